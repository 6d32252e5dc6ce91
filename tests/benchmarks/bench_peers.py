"""`make bench`, issue 62: ``--format megatron`` head to head with the peer tools on every corpus shape.

On each shape (``shapes.py`` and the held-out corpus), the same 32k byte-level BPE ``tokenizer.json``
(its ``tokenizer_config.json`` naming ``<|endoftext|>`` the EOS), the same 2 cores, one JSONL file:

- objcli ``transform --format megatron --workers 2 --max-document-chars 0`` (documents whole, as the
  peers keep them; ``--engine auto``: gigatoken);
- Megatron-LM's ``tools/preprocess_data.py --workers 2 --append-eod`` (``transformers``' tokenizer);
- Megatron-LM's ``tools/preprocess_data_fast.py --use-gigatoken --append-eod`` (gigatoken, 2 threads);
- datatrove's ``DocumentTokenizer`` (2 workers, its own ``.ds`` layout).

The Megatron tools live in the Megatron-LM repository, not in the ``megatron-core`` wheel: give a
checkout with ``MEGATRON_LM=/path/to/Megatron-LM`` (its ``megatron/`` package is put first on the
path; it needs ``triton``, and its newest ``megatron/training`` Python 3.12's ``typing.override``,
which is taken from ``typing_extensions`` on 3.11). Every Megatron output's ids and document
boundaries are compared with objcli's (read by objcli's own MMIDIDX reader): ``same ids`` or the first
difference. Interleaved repeats, min and median walls, CPU of the whole process tree, peak RSS.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from bench_shapes import corpora, tokenizers
from benchmarks import CORES, DATA, OUT, _last_cpu, _run_tree, _stopped, datatrove_tokenize

PEER_LIMIT_S = 600  # a peer run past this is stopped: its row says "> 600 s" (Megatron on 2.7 M tiny documents)

SHIM = """import runpy, sys, typing
import typing_extensions
typing.override = getattr(typing, "override", typing_extensions.override)  # Python 3.12's, on 3.11
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
"""


def one_file(shape: str, paths: list[Path]) -> Path:
    """The shape's JSONL files as one (the Megatron tools take one --input)."""
    joined = DATA / "peers" / f"{shape}.jsonl"
    if not joined.exists() or joined.stat().st_size != sum(p.stat().st_size for p in paths):
        joined.parent.mkdir(parents=True, exist_ok=True)
        with open(joined, "wb") as out:
            for path in paths:
                out.write(path.read_bytes())
    return joined


def tokenizer_folder(tokenizer: Path) -> Path:
    """The tokenizer.json with a tokenizer_config.json naming its EOS, as transformers loads it."""
    folder = DATA / "peers" / "tokenizer"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tokenizer, folder / "tokenizer.json")
    config = '{"eos_token": "<|endoftext|>", "tokenizer_class": "PreTrainedTokenizerFast"}'
    (folder / "tokenizer_config.json").write_text(config)
    return folder


def objcli_megatron(source: Path, folder: Path) -> dict:
    shutil.rmtree(OUT, ignore_errors=True)
    command = [sys.executable, "-m", "objcli", "transform", str(source), "-t", str(folder), "--format", "megatron"]
    command += ["--max-document-chars", "0", "-o", str(OUT), "--quiet", "--workers", str(CORES)]
    seconds, peak, _ = _run_tree(command)
    return {"seconds": seconds, "peak_rss": peak, "cpu": _last_cpu[0], "prefix": _prefix(OUT)}


def megatron_tool(checkout: Path, script: str, source: Path, folder: Path, *extra: str) -> dict:
    out = DATA / "peers" / "megatron"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    shim = DATA / "peers" / "shim.py"
    shim.write_text(SHIM)
    command = [sys.executable, str(shim), str(checkout / "tools" / script), "--input", str(source)]
    command += ["--output-prefix", str(out / "peer"), "--tokenizer-type", "HuggingFaceTokenizer"]
    command += ["--tokenizer-model", str(folder), "--append-eod", *extra]
    # The checkout first; what PYTHONPATH already holds after it (where a user put triton, say).
    path = os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH", "")]))
    env = {**os.environ, "PYTHONPATH": path, "RAYON_NUM_THREADS": str(CORES)}
    seconds, peak, _ = _run_tree(command, env, PEER_LIMIT_S)
    if _stopped[0]:
        return {"seconds": seconds, "peak_rss": peak, "cpu": _last_cpu[0], "prefix": [], "stopped": True}
    return {"seconds": seconds, "peak_rss": peak, "cpu": _last_cpu[0], "prefix": _prefix(out)}


def _prefix(folder: Path) -> list[str]:
    """The folder's Megatron pairs, in order (objcli's shards: part-00000-of-…, part-00001-of-…)."""
    return [str(idx)[: -len(".idx")] for idx in sorted(folder.glob("*.idx"))]


def _documents(prefixes: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Every pair's ids, joined, and the documents' offsets in them."""
    from objcli.inputs.token_inputs.megatron import MegatronInput

    opened = [MegatronInput().open(prefix, "input_ids", None) for prefix in prefixes]
    tokens = np.concatenate([np.asarray(o.tokens, dtype=np.int64) for o in opened])
    lengths = np.concatenate([np.diff(o.offsets) for o in opened])
    return tokens, np.concatenate([[0], np.cumsum(lengths)])


def same_ids(ours: list[str], theirs: list[str]) -> str:
    (a, a_offsets), (b, b_offsets) = _documents(ours), _documents(theirs)
    if not np.array_equal(a_offsets, b_offsets):
        return f"documents differ ({len(a_offsets) - 1:,} against {len(b_offsets) - 1:,})"
    differ = np.flatnonzero(a != b)
    return "same ids" if not len(differ) else f"ids differ from token {int(differ[0]):,}"


def peers_table(repeats: int = 2, only: tuple[str, ...] = ()) -> None:
    checkout = Path(os.environ.get("MEGATRON_LM", "")) if os.environ.get("MEGATRON_LM") else None
    tokenizer = tokenizer_folder(tokenizers()["32k tokenizer.json"][0])
    print(f"\n--format megatron against the peers, every shape, {CORES} cores, {repeats} interleaved runs:")
    if checkout is None:
        print("(MEGATRON_LM is not set: no Megatron-LM rows; give a checkout of the repository to add them)")
    for shape, (paths, about) in corpora().items():
        if only and shape not in only:
            continue
        source = one_file(shape, paths)
        megabytes = source.stat().st_size / 1e6
        runs: dict[str, list[dict]] = {}
        for _ in range(repeats):
            ours = objcli_megatron(source, tokenizer)
            runs.setdefault("objcli --format megatron", []).append(ours)
            if checkout is not None:
                for name, script, extra in (
                    ("Megatron preprocess_data.py", "preprocess_data.py", ("--workers", str(CORES))),
                    ("Megatron preprocess_data_fast.py", "preprocess_data_fast.py", ("--use-gigatoken",)),
                ):
                    run = megatron_tool(checkout, script, source, tokenizer, *extra)
                    run["ids"] = (
                        f"stopped at {PEER_LIMIT_S} s"
                        if run.get("stopped")
                        else same_ids(ours["prefix"], run["prefix"])
                    )
                    runs.setdefault(name, []).append(run)
            try:
                text = sum(p.stat().st_size for p in paths)
                run = datatrove_tokenize(paths, tokenizer / "tokenizer.json", text)
                runs.setdefault("datatrove DocumentTokenizer", []).append({**run, "cpu": _last_cpu[0], "ids": "-"})
            except ImportError:
                pass
        _print(about, runs, megabytes)


def _print(about: str, runs: dict[str, list[dict]], megabytes: float) -> None:
    ours = statistics.median(r["seconds"] for r in runs["objcli --format megatron"])
    print(f"\n{about}")
    print(f"{'':34} {'min s':>7} {'median s':>9} {'CPU ms/MB':>10} {'peak RSS':>9} {'objcli x':>9}  ids")
    for name, group in runs.items():
        walls = [r["seconds"] for r in group]
        cpu = 1000 * statistics.median(r["cpu"] for r in group) / megabytes
        rss = f"{max(r['peak_rss'] for r in group) / 2**20:.0f} MiB"
        ids = "" if name.startswith("objcli") else group[-1].get("ids", "")
        print(
            f"{name:34} {min(walls):7.2f} {statistics.median(walls):9.2f} {cpu:10.1f} {rss:>9} "
            f"{statistics.median(walls) / ours:8.2f}x  {ids}"
        )


if __name__ == "__main__":
    started = time.perf_counter()
    peers_table(int(sys.argv[1]) if len(sys.argv) > 1 else 2, tuple(sys.argv[2:]))
    print(f"\n({time.perf_counter() - started:.0f} s)")
