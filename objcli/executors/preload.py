"""What the fork server of a process pool imports once, before any worker forks from it: objcli's
pipeline (NumPy, PyArrow, every objective and writer) and, when the run names it in
``OBJCLI_PRELOAD_TOKENIZER`` (``path<TAB>engine``), the run's tokenizer with its engine, and with
``OBJCLI_PRELOAD_COMPILED`` the compiled kernels it names (``sentences``, ``electra``: numba's
import and their cached code, 0.3 s once instead of in every worker). A worker then
starts as a fork of a process that has everything loaded: milliseconds of CPU instead of a fresh
interpreter's imports and a tokenizer load (0.4 s and more, 2.6 s under gVisor)."""

import os

# What a worker's first partition imported otherwise, each worker anew: PyArrow (a store shard's reader, 20 ms),
# jinja2 (a chat template, 15 ms), zstandard (a plan file), xxhash (a store block's digest).
import jinja2  # noqa: F401
import pyarrow.ipc  # noqa: F401
import xxhash  # noqa: F401
import zstandard  # noqa: F401

from ..run import pipeline  # noqa: F401 - imported for the workers that fork from here
from ..stores import STORE_KINDS  # noqa: F401 - every store kind registered (they fill when first asked for)

_spec = os.environ.get("OBJCLI_PRELOAD_TOKENIZER", "")
if "\t" in _spec:
    try:
        from ..tokenizers import load_tokenizer, preload_tokenizer

        _path, _engine = _spec.split("\t", 1)
        # "auto": the server started before the run chose its engine (start_fork_server); each worker
        # gives the opened tokenizer the engine its task names.
        preload_tokenizer(_path, _engine) if _engine in ("auto", "reference") else load_tokenizer(_path, _engine)
    except Exception:  # noqa: BLE001 - a worker that finds no tokenizer here loads it itself, and reports
        pass

_compiled = os.environ.get("OBJCLI_PRELOAD_COMPILED", "").split(",")
if "sentences" in _compiled:
    from ..objectives.sentences import warm_splitter

    warm_splitter()
if "electra" in _compiled:
    from ..objectives.pairs import warm_electra_walk

    warm_electra_walk()
