"""Checks of a run's inputs against its output: the run key (what a resumed run must match) and an
output placed where the inputs would read it back."""

from __future__ import annotations

import glob
import hashlib
import json
import os
from pathlib import Path

from ..config import TransformConfig
from ..errors import ObjcliError
from ..inputs.pieces import STDIN, InputKind
from ..inputs.token_inputs import InputSite, token_format
from ..inputs.token_inputs.digests import token_input_digests
from ..storage.remote import is_url, public_url


def make_run_key(config_sha256: str, files, names: list[str] | None = None) -> str:
    """The configuration plus the size and modification time (an object's ETag; a tokenized input's
    files' sha256) of every input: an
    interrupted run's finished partitions are reused only if this matches (an edited input
    invalidates them). What a stream held cannot be compared with an earlier run, so a run that
    reads one has a key of its own. ``names``: what each file was named by when the key was first made
    (an append run from another folder finds the output's inputs where the manifest recorded them)."""
    stats = []
    for k, f in enumerate(files):
        if f.is_stream:
            stats.append([f.path, os.urandom(16).hex()])
            continue
        if f.kind is InputKind.TOKENS:  # by content: what a sweep derives every objective from
            stats.append([public_url(f.path), token_input_digests(f.path, f.format)])
            continue
        if is_url(f.path):
            stats.append([public_url(f.path), f.size, f.version])  # as listed when the run was set up
            continue
        try:  # a token store is its manifest (written last, rewritten by every change to the store)
            stat = os.stat(os.path.join(f.path, "manifest.json") if f.format == "store" else _data_file(f))
        except OSError as error:
            raise ObjcliError(f"input {f.path}: {error.strerror}; check that it still exists") from None
        stats.append([names[k] if names else f.path, stat.st_size, stat.st_mtime_ns])
    payload = json.dumps({"config": config_sha256, "inputs": stats}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def _data_file(f) -> str:
    """The file whose size and time stand for an input (a Megatron prefix's .bin)."""
    if f.kind is InputKind.TOKENS and not os.path.exists(f.path):  # named by a prefix: its last file
        return token_format(f.format).files(InputSite.local(f.path))[-1]
    return f.path


def check_output_outside_inputs(config: TransformConfig) -> None:
    """An output folder inside an input folder (or prefix) would be read back by the next run (or by
    this one, if it already holds data files)."""
    if config.output == STDIN:
        return
    sources = config.mixture.paths
    for spec in [*config.inputs, *sources]:
        if spec != STDIN and _inside(config.output, spec):
            raise ObjcliError(
                f"output {public_url(config.output)}: inside the input folder {public_url(spec)}, whose files are all "
                f"read; choose -o outside it, or name the inputs with a glob that leaves the output out "
                f"(e.g. {public_url(spec).rstrip('/')}/*.jsonl)"
            )


def _inside(output: str, spec: str) -> bool:
    if is_url(output) or is_url(spec):
        prefix = spec.rstrip("/")
        return not glob.has_magic(spec) and (output.rstrip("/") == prefix or output.startswith(prefix + "/"))
    if not os.path.isdir(spec):
        return False
    output_path, folder = Path(os.path.realpath(output)), Path(os.path.realpath(spec))
    return output_path == folder or folder in output_path.parents


def check_sources_disjoint(files_by_source: dict[str, list]) -> None:
    """A file belongs to one source: the same file under two ``--source``s (or a folder of one that
    holds another's) would be read and written twice, silently weighting it twice."""
    owner: dict[str, tuple[str, str]] = {}  # the file -> (its source, the path it was reached by)
    for source, files in files_by_source.items():
        for name, key in _read_files(files):
            first, path = owner.setdefault(key, (source, name))
            if first != source:
                also = "" if path == name else f" (as {path})"
                raise ObjcliError(
                    f"--source {first} and --source {source} both hold {name}{also}; a file belongs to "
                    "one source: narrow one of them (a glob, or another folder)"
                )


def _read_files(files: list):
    """(its name, the file whose text it holds) for each file a source reads: a token store's are the
    text files it was tokenized from (a store beside its own text would read them twice)."""
    from ..formats.store import STORE
    from ..inputs.token_store import store_manifest

    for f in files:
        if f.is_stream:
            continue
        if f.format == STORE:
            stored = store_manifest(f.path)["inputs"]
            text = [e for e in stored if isinstance(e.get("resolved"), str)]
            yield from ((f"the token store {f.path}'s text", os.path.realpath(e["resolved"])) for e in text)
            continue
        yield f.path, public_url(f.path) if is_url(f.path) else os.path.realpath(f.path)
