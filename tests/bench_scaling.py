"""Throughput against cores, measured: the tokenizer's ceiling and `objcli transform` at 1..N cores.

Run by `make bench` (up to this machine's cores) and, alone, on a many-core machine:

    python tests/bench_scaling.py --megabytes 400 --cores 1,2,4,8,16 --repeats 3 [--runs clm/threads,…] [--json F]

Each row is the same corpus at the same core count: raw SentencePiece batched encode with that
many threads over texts already in memory (the ceiling), then the CLI with that many workers, cold
(start-up included), once per pool. Runs at one core count are interleaved; min and median of the
walls, and the CPU time per MB of the CLI's whole process tree.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER = ROOT / "sample_data" / "tokenizer.model"


def build_corpus(folder: Path, megabytes: int, files: int = 16) -> list[Path]:
    """``files`` JSONL files holding about ``megabytes`` MB of the sample corpus, repeated."""
    source = (ROOT / "sample_data" / "prose.jsonl").read_bytes() + (ROOT / "sample_data" / "code.jsonl").read_bytes()
    copies = max(1, round(megabytes * 10**6 / (len(source) * files)))
    paths = [folder / f"corpus-{i:02d}.jsonl" for i in range(files)]
    if not all(p.exists() and p.stat().st_size == len(source) * copies for p in paths):
        folder.mkdir(parents=True, exist_ok=True)
        for path in paths:
            path.write_bytes(source * copies)
    return paths


def ceiling_seconds(paths: list[Path], threads: int, batch_bytes: int = 1 << 20, cpu: list | None = None) -> tuple[float, int]:
    """Best of two: SentencePiece batched encode of every text, ``threads`` threads, 1 MiB batches
    (with ``cpu``, the CPU seconds of the encoding alone are appended to it)."""
    import sentencepiece as spm
    from benchmarks import text_batches

    sp = spm.SentencePieceProcessor(model_file=str(TOKENIZER))
    batches = text_batches(paths, batch_bytes)
    total = sum(len(text) for batch in batches for text in batch)
    best, best_cpu = float("inf"), float("inf")
    for _ in range(2):
        started, started_cpu = time.perf_counter(), time.process_time()
        for b in batches:
            sp.encode(b, return_type="numpy", num_threads=threads)
        best = min(best, time.perf_counter() - started)
        best_cpu = min(best_cpu, time.process_time() - started_cpu)
    if cpu is not None:
        cpu.append(best_cpu)
    return best, total


def cli_run(paths: list[Path], out: Path, workers: int, pool: str, objective: str) -> tuple[float, float]:
    """Wall and CPU seconds (whole process tree) of one cold CLI run."""
    shutil.rmtree(out, ignore_errors=True)
    seq_len = "2048" if objective == "clm" else "512"
    command = [sys.executable, "-m", "objcli", "transform", *map(str, paths), "-t", str(TOKENIZER), "--objective",
               objective, "--seq-len", seq_len, "-o", str(out), "--quiet", "--workers", str(workers), "--pool", pool]
    before = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(command[2:4])} failed:\n{done.stderr}")
    return time.perf_counter() - started, _children_cpu() - before


def _children_cpu() -> float:
    """CPU seconds of every child process this one has reaped (and of their reaped children)."""
    times = os.times()
    return times.children_user + times.children_system


RUNS = "clm/threads,clm/processes,nsp/processes"


def measure(paths: list[Path], cores: list[int], repeats: int, out: Path, runs: str = RUNS) -> list[dict]:
    rows = []
    for count in cores:
        walls: dict[str, list[float]] = {"ceiling": []}
        cpu: dict[str, list[float]] = {}
        text_bytes = 0
        for _ in range(repeats):  # one core count's runs interleaved
            seconds, text_bytes = ceiling_seconds(paths, count)
            walls["ceiling"].append(seconds)
            for objective, pool in (run.split("/") for run in runs.split(",")):
                wall, used = cli_run(paths, out, count, pool, objective)
                walls.setdefault(f"{objective}/{pool}", []).append(wall)
                cpu.setdefault(f"{objective}/{pool}", []).append(used)
        rows.append({"cores": count, "text_mb": text_bytes / 1e6, "walls": walls, "cpu": cpu})
        print_row(rows[-1])
    return rows


def print_row(row: dict) -> None:
    megabytes, ceiling = row["text_mb"], min(row["walls"]["ceiling"])
    if row["cores"] == 1 or not hasattr(print_row, "header"):
        print_row.header = True
        print(f"{'cores':>5} {'run':>26} {'min s':>7} {'median s':>9} {'CPU s/MB':>9} {'ratio (min)':>12} {'(median)':>9}")
    for name, walls in row["walls"].items():
        cpu = f"{min(row['cpu'][name]) / megabytes:9.4f}" if name in row["cpu"] else f"{'':9}"
        ratio = ceiling / min(walls)
        median_ratio = statistics.median(row["walls"]["ceiling"]) / statistics.median(walls)
        print(f"{row['cores']:5} {name:>26} {min(walls):7.2f} {statistics.median(walls):9.2f} {cpu} "
              f"{ratio:11.2f}x {median_ratio:8.2f}x", flush=True)


def _probe(stop, cpu: list) -> None:
    """Pure Python that needs the GIL for every step: its thread's CPU time is the time it held it."""
    started = time.thread_time()
    while not stop.is_set():
        for _ in range(200):
            pass
    cpu.append(time.thread_time() - started)


def _probe_gap(beside) -> float:
    """Seconds a probe thread went without CPU while ``beside()`` ran in this thread (or it slept)."""
    import threading

    stop, cpu = threading.Event(), []
    probe = threading.Thread(target=_probe, args=(stop, cpu))
    started = time.perf_counter()
    probe.start()
    beside() if beside else time.sleep(0.5)
    wall = time.perf_counter() - started
    stop.set()
    probe.join()
    return wall - cpu[0], wall


def gil_held_seconds(run, repeats: int = 3) -> float:
    """Seconds ``run()`` holds the GIL. A probe thread on another core runs Python non-stop: beside the
    run it gets no CPU exactly while the run holds the GIL (and while the system takes its core, which
    the same probe beside a sleeping thread measures: that share is subtracted). Median of ``repeats``."""
    held = []
    for _ in range(repeats):
        idle, idle_wall = _probe_gap(None)
        gap, wall = _probe_gap(run)
        held.append(max(0.0, gap - idle / idle_wall * wall))
    return statistics.median(held)


def model_rows(paths: list[Path], megabytes_at_scale: int = 1000) -> list[tuple[str, float]]:
    """The expected ratio to the tokenizer's ceiling at many cores, from this machine's one-core
    figures: tokenizer CPU (T), the pipeline's CPU (P, tokenizer included) and the seconds of it that
    hold the GIL (G), measured beside a probe thread (needs 2 cores). Threads at N cores run at best
    max(P / N, G) against the ceiling's T / N (taken as linear: SentencePiece's own scaling is not
    counted against us); processes pay a spawned worker's start-up CPU (S) each, at 1 GB of text."""
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import run_transform

    out = ROOT / "bench_out" / "model"
    encoding: list[float] = []
    ceiling_seconds(paths, 1, cpu=encoding)
    tokenizer_cpu = encoding[0]
    pipeline_cpu = min(_cpu(lambda: run_transform(paths, TOKENIZER, out, workers=1, seq_len=2048)) for _ in range(2))
    sys.setswitchinterval(1e-4)  # the probe gives the GIL back at once when the run wants it
    held = gil_held_seconds(lambda: run_transform(paths, TOKENIZER, out, workers=1, seq_len=2048))
    sys.setswitchinterval(0.005)
    spawn = _cpu_of([sys.executable, "-c", "import objcli.run.pipeline, objcli.writers, objcli.objectives, pyarrow; "
                     f"from objcli.tokenizers import load_tokenizer; load_tokenizer({str(TOKENIZER)!r})"])
    forked = forked_worker_cpu(4)
    megabytes = sum(p.stat().st_size for p in paths) / 1e6
    scale = megabytes_at_scale / megabytes
    rows = [("T: tokenizer CPU s/MB, one thread", tokenizer_cpu / megabytes),
            ("P: pipeline CPU s/MB, one worker", pipeline_cpu / megabytes),
            ("G: of which holding the GIL, s/MB", held / megabytes),
            ("S: the fork server's start-up CPU (once; a spawned worker's), s", spawn),
            ("F: a worker forked from it, start-up CPU, s (most of 4)", forked)]
    for cores in (2, 16, 64):
        rows.append((f"threads at {cores} cores: T / max(P, N G)", tokenizer_cpu / max(pipeline_cpu, cores * held)))
    for cores in (16, 64):
        rows.append((f"processes at {cores} cores, {megabytes_at_scale} MB: T / (P + S + N F)",
                     tokenizer_cpu * scale / (pipeline_cpu * scale + spawn + cores * forked)))
    return rows


def _first_task_cpu(_) -> float:
    """CPU this worker has used since it was forked, when its first task starts (what a partition
    finds loaded: the pipeline's modules and the tokenizer)."""
    import objcli.run.pipeline  # noqa: F401
    from objcli.tokenizers import load_tokenizer

    load_tokenizer(str(TOKENIZER), "sentencepiece")
    times = os.times()
    return times.user + times.system


def forked_worker_cpu(workers: int) -> float:
    """The start-up CPU of workers as objcli's process pool makes them (its fork server, preloaded)."""
    from concurrent.futures import ProcessPoolExecutor

    from objcli.executors.local import _process_context

    class Task:  # what _process_context reads of the run's first task
        config = type("Config", (), {"tokenizer": str(TOKENIZER), "engine": "sentencepiece"})

    context, _ = _process_context([Task()])
    if context.get_start_method() != "forkserver":
        return float("nan")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        return max(pool.map(_first_task_cpu, range(workers)))


def _cpu(function) -> float:
    before = time.process_time()
    function()
    return time.process_time() - before


def _cpu_of(command: list[str]) -> float:
    before = _children_cpu()
    subprocess.run(command, check=True, cwd=ROOT)
    return _children_cpu() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=400)
    parser.add_argument("--cores", default="1,2,4,8,16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", default=RUNS, help="objective/pool pairs (pool: threads, processes or auto)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--model", action="store_true", help="print the many-core model only")
    args = parser.parse_args()
    if args.model:
        for name, value in model_rows(build_corpus(ROOT / "bench_data" / "scaling", args.megabytes, files=8)):
            print(f"{name:52} {value:8.4f}")
        return
    paths = build_corpus(ROOT / "bench_data" / "scaling", args.megabytes)
    print(f"{len(paths)} files, {sum(p.stat().st_size for p in paths) / 1e6:.0f} MB, {os.cpu_count()} cores")
    rows = measure(paths, [int(c) for c in args.cores.split(",")], args.repeats, ROOT / "bench_out" / "scaling", args.runs)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
