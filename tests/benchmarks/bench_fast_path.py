"""`make bench`, issue 42: the pipeline's own cost on the fast path, on a held-out corpus of this
machine's own text (``held_out.py``: man pages, package docs, Python sources, 200 MB), a 32k
byte-level BPE ``tokenizer.json`` and the pinned ``tokenizers`` pre-release.

- **The linear ceiling**: the engine's own ``encode_batch`` over the texts in memory, in a process
  pinned to one core (the pre-release runs a thread of its own inside each call, so "one thread"
  unpinned keeps 1.6-2 cores busy), times CORES.
- **objcli** clm (``--pool auto`` and ``processes``, each with its workers pinned to a core, as a run
  whose workers fill the cores has them, and not; and one worker), mlm and span corruption, CLI,
  start-up included: min and median wall of interleaved repeats, CPU per MB of the process tree,
  peak RSS, ratio = the ceiling's wall / the row's.
- **Start-up**: a 20-document file with the probe's verdict kept, 32k and 128k ``tokenizer.json``.
- **Per stage**: one worker pinned to one core, its functions timed (``stage_costs.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from bench_engines import CEILING, prerelease_env, tokenizer_files
from benchmarks import CORES, DATA, OUT, _last_cpu, _run_tree
from held_out import held_out_corpus
from paths import ROOT

HERE = Path(__file__).parent
UNPINNED = "OBJCLI_PIN_WORKERS=0"  # a row's mark: its workers left free (run/affinity.py)


def _pinned() -> list[str]:
    """A command prefix that pins to one core, where ``taskset`` exists."""
    return ["taskset", "-c", str(sorted(os.sched_getaffinity(0))[-1])] if shutil.which("taskset") else []


def engine_one_core(paths: list[Path], tokenizer: Path) -> dict:
    command = [*_pinned(), sys.executable, "-c", CEILING, json.dumps([str(p) for p in paths]), str(tokenizer), "1"]
    out = subprocess.run(command, capture_output=True, text=True, env=prerelease_env(), check=True, cwd=ROOT)
    return json.loads(out.stdout)


def objcli_run(paths: list[Path], tokenizer: Path, objective: str, *extra: str, env_extra: dict | None = None) -> dict:
    shutil.rmtree(OUT, ignore_errors=True)
    seq_len = "2048" if objective == "clm" else "512"
    command = [sys.executable, "-m", "objcli", "transform", *map(str, paths), "-t", str(tokenizer)]
    command += ["--objective", objective, "--seq-len", seq_len, "-o", str(OUT), "--quiet", *extra]
    env = prerelease_env()
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: objcli's bytecode cached, not compiled each run
    env.update(env_extra or {})
    seconds, peak, _ = _run_tree(command, env)
    manifest = json.loads((OUT / "manifest.json").read_text())
    return {"seconds": seconds, "peak_rss": peak, "cpu": _last_cpu[0], "text_bytes": manifest["totals"]["text_bytes"]}


def startup(tokenizer: Path, repeats: int = 3) -> list[float]:
    """Walls of a 20-document run, the verdict kept by a first run (not counted)."""
    tiny = DATA / "startup.jsonl"
    if not tiny.exists():
        lines = (DATA / "held-out" / "held-out-00.jsonl").read_text().splitlines(keepends=True)[:20]
        tiny.write_text("".join(lines))
    objcli_run([tiny], tokenizer, "clm", "--remainder", "pad")
    return [objcli_run([tiny], tokenizer, "clm", "--remainder", "pad")["seconds"] for _ in range(repeats)]


def stage_costs(paths: list[Path], tokenizer: Path, objective: str = "clm") -> dict:
    env = {**prerelease_env(), "STAGE_OUT": str(OUT)}
    shutil.rmtree(OUT, ignore_errors=True)
    command = [sys.executable, str(HERE / "stage_costs.py"), str(tokenizer), objective, *map(str, paths)]
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True, cwd=ROOT)
    return json.loads(out.stdout.splitlines()[-1])


def fast_path_table(repeats: int = 2) -> None:
    paths, about = held_out_corpus(DATA / "held-out")
    files = tokenizer_files()
    tokenizer = files["32k byte-level BPE tokenizer.json"]
    megabytes = sum(p.stat().st_size for p in paths) / 1e6
    two = ("--workers", str(CORES))
    rows = {
        "objcli clm, --workers 2 (auto)": ("clm", *two),
        "objcli clm, --workers 2 --pool processes": ("clm", *two, "--pool", "processes"),
        "objcli clm, --workers 2, workers not pinned": ("clm", *two, UNPINNED),
        "objcli clm, --workers 2 --pool processes, not pinned": ("clm", *two, "--pool", "processes", UNPINNED),
        "objcli clm, --workers 1": ("clm", "--workers", "1"),
        "objcli mlm, --workers 2 (auto)": ("mlm", *two),
        "objcli span-corruption, --workers 2 (auto)": ("span-corruption", *two),
    }
    runs: dict[str, list[dict]] = {"engine encode_batch, one core": []}
    for _ in range(repeats):  # interleaved: each repeat runs every row once
        runs["engine encode_batch, one core"].append(engine_one_core(paths, tokenizer))
        for name, (objective, *extra) in rows.items():
            env = {"OBJCLI_PIN_WORKERS": "0"} if UNPINNED in extra else None
            extra = [e for e in extra if e != UNPINNED]
            runs.setdefault(name, []).append(objcli_run(paths, tokenizer, objective, *extra, env_extra=env))
    one_core = min(r["seconds"] for r in runs["engine encode_batch, one core"])
    ceiling = one_core / CORES
    print(f"\nThe fast path (issue 42): held-out corpus, {about}; 32k byte-level BPE tokenizer.json, {CORES} cores")
    print(f"linear ceiling: {CORES} x the engine's one-core encode = {ceiling:.2f} s ({megabytes / ceiling:.0f} MB/s)")
    print(f"{'':52} {'min s':>7} {'median s':>9} {'MB/s':>7} {'CPU ms/MB':>10} {'peak RSS':>9} {'ratio':>6}")
    for name, group in runs.items():
        walls = [r["seconds"] for r in group]
        cpu = 1000 * statistics.median(r.get("cpu", 0.0) for r in group) / megabytes
        rss = f"{max(r['peak_rss'] for r in group) / 2**20:.0f} MiB" if "peak_rss" in group[0] else "-"
        ratio = ceiling / min(walls) if name.startswith("objcli") else CORES * 1.0
        print(
            f"{name:52} {min(walls):7.2f} {statistics.median(walls):9.2f} {megabytes / min(walls):7.1f} "
            f"{cpu:10.1f} {rss:>9} {ratio:5.2f}x"
        )
    for name in ("32k byte-level BPE tokenizer.json", "Llama 3 128k tokenizer.json"):
        walls = startup(files[name])
        print(
            f"start-up, 20 documents, {name}, verdict kept: "
            f"min {min(walls):.2f} s, median {statistics.median(walls):.2f} s"
        )
    costs = stage_costs(paths, tokenizer)
    engine_ms = 1000 * one_core / megabytes
    print(f"one worker pinned to one core, clm, ms per MB (the engine alone: {engine_ms:.1f}):")
    print("  " + ", ".join(f"{k} {1000 * v / megabytes:.1f}" for k, v in costs.items() if k != "total"))
    own = sum(v for k, v in costs.items() if k not in ("encode", "start-up", "total"))
    print(f"  objcli's own at steady state (all but start-up and encode): {1000 * own / megabytes:.1f} ms/MB")


if __name__ == "__main__":
    fast_path_table()
