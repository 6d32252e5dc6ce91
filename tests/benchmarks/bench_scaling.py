"""Throughput against cores, measured: the tokenizer's ceiling and `objcli transform` at 1..N cores.

Run by `make bench` (up to this machine's cores) and, alone, on a many-core machine:

    python tests/benchmarks/bench_scaling.py --megabytes 400 --cores 1,2,4,8,16 --repeats 3 \\
        [--runs clm/threads,…] [--json F]

Each row is the same corpus at the same core count. The ceiling is linear: one SentencePiece thread's
batched encode of texts already in memory, its wall divided by the number of cores (N x one core's
throughput); SentencePiece's own N-thread call is shown beside it (a library's N-thread call can
scale far below N). Then the CLI with that many workers, cold (start-up included), once per pool.
Runs at one core count are interleaved; min and median of the walls, and the CPU time per MB of the
CLI's whole process tree, its fork server's workers included (this process adopts and reaps them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the tests' helpers
from paths import ROOT  # noqa: E402

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


def ceiling_seconds(
    paths: list[Path], threads: int, batch_bytes: int = 1 << 20, cpu: list | None = None
) -> tuple[float, int]:
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


def adopt_orphans() -> None:
    """Make this process the reaper of its descendants' orphans (Linux): the CLI's fork server is not
    waited for by the CLI, so its CPU (and its workers', which it reaps) would never be counted."""
    import ctypes

    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER


def _reap_adopted(before: set[int], timeout: float = 30.0) -> None:
    """Wait for the children this process adopted during a run (they exit once the run's main process
    has), so that their CPU reaches ``os.times()``."""
    import psutil

    deadline = time.monotonic() + timeout
    for child in psutil.Process().children():
        if child.pid not in before:
            with contextlib.suppress(ChildProcessError, psutil.Error):
                child.wait(max(0.0, deadline - time.monotonic()))
                os.waitpid(child.pid, 0)


def cli_run(paths: list[Path], out: Path, workers: int, pool: str, objective: str) -> tuple[float, float]:
    """Wall and CPU seconds (whole process tree, fork server and its workers included) of one cold CLI run."""
    import psutil

    adopt_orphans()
    shutil.rmtree(out, ignore_errors=True)
    seq_len = "2048" if objective == "clm" else "512"
    command = [
        sys.executable,
        "-m",
        "objcli",
        "transform",
        *map(str, paths),
        "-t",
        str(TOKENIZER),
        "--objective",
        objective,
        "--seq-len",
        seq_len,
        "-o",
        str(out),
        "--quiet",
        "--workers",
        str(workers),
        "--pool",
        pool,
    ]
    before, children = _children_cpu(), {c.pid for c in psutil.Process().children()}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"{' '.join(command[2:4])} failed:\n{done.stderr}")
    _reap_adopted(children)
    return wall, _children_cpu() - before


def _children_cpu() -> float:
    """CPU seconds of every child process this one has reaped (and of their reaped children)."""
    times = os.times()
    return times.children_user + times.children_system


RUNS = "clm/threads,clm/processes,nsp/processes"


def measure(paths: list[Path], cores: list[int], repeats: int, out: Path, runs: str = RUNS) -> list[dict]:
    rows = []
    for count in cores:
        walls: dict[str, list[float]] = {"ceiling": [], f"sentencepiece {count} threads": []}
        cpu: dict[str, list[float]] = {}
        text_bytes = 0
        for _ in range(repeats):  # one core count's runs interleaved
            seconds, text_bytes = ceiling_seconds(paths, 1)
            walls["ceiling"].append(seconds / count)  # linear: N x one thread's throughput
            if count > 1:
                walls[f"sentencepiece {count} threads"].append(ceiling_seconds(paths, count)[0])
            for objective, pool in (run.split("/") for run in runs.split(",")):
                wall, used = cli_run(paths, out, count, pool, objective)
                walls.setdefault(f"{objective}/{pool}", []).append(wall)
                cpu.setdefault(f"{objective}/{pool}", []).append(used)
        rows.append(
            {"cores": count, "text_mb": text_bytes / 1e6, "walls": {k: v for k, v in walls.items() if v}, "cpu": cpu}
        )
        print_row(rows[-1])
    return rows


def print_row(row: dict) -> None:
    megabytes, ceiling = row["text_mb"], min(row["walls"]["ceiling"])
    if row["cores"] == 1 or not hasattr(print_row, "header"):
        print_row.header = True
        print(
            f"{'cores':>5} {'run':>26} {'min s':>7} {'median s':>9} {'CPU s/MB':>9} {'ratio (min)':>12} {'(median)':>9}"
        )
    for name, walls in row["walls"].items():
        cpu = f"{min(row['cpu'][name]) / megabytes:9.4f}" if name in row["cpu"] else f"{'':9}"
        ratio = ceiling / min(walls)
        median_ratio = statistics.median(row["walls"]["ceiling"]) / statistics.median(walls)
        print(
            f"{row['cores']:5} {name:>26} {min(walls):7.2f} {statistics.median(walls):9.2f} {cpu} "
            f"{ratio:11.2f}x {median_ratio:8.2f}x",
            flush=True,
        )


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


def _pickled_per_megabyte(run) -> float:
    """Bytes a process pool moves per MB of text: each partition's task there, its result back."""
    import pickle

    import objcli.executors.local as local

    moved, text = [], []
    original = local.run_partition

    def counted(task, report):
        result = original(task, report)
        moved.append(len(pickle.dumps(task)) + len(pickle.dumps(result)))
        text.append(result.text_bytes)
        return result

    local.run_partition = counted
    try:
        run()
    finally:
        local.run_partition = original
    return sum(moved) / (sum(text) / 1e6)


def model_rows(paths: list[Path], objectives: tuple[str, ...] = ("clm",), megabytes_at_scale: int = 1000) -> dict:
    """The expected ratio to the linear ceiling at many cores, per objective and pool, from this
    machine's one-core figures: tokenizer CPU (T), the pipeline's CPU (P, tokenizer included) and the
    seconds of it that hold the GIL (G), measured beside a probe thread (needs 2 cores). Threads at N
    cores run at best max(P / N, G) against the ceiling's T / N; processes pay the fork server's
    start-up (S, once) and each forked worker's (F), at ``megabytes_at_scale`` MB of text."""
    sys.path.insert(0, str(ROOT / "tests"))
    from runs import run_transform

    out = ROOT / "bench_out" / "model"
    encoding: list[float] = []
    ceiling_seconds(paths, 1, cpu=encoding)
    megabytes = sum(p.stat().st_size for p in paths) / 1e6
    scale = megabytes_at_scale / megabytes
    tokenizer_cpu = encoding[0]
    spawn = _cpu_of(
        [
            sys.executable,
            "-c",
            "import objcli.run.pipeline, objcli.formats, objcli.objectives, pyarrow; "
            f"from objcli.tokenizers import load_tokenizer; load_tokenizer({str(TOKENIZER)!r})",
        ]
    )
    forked = forked_worker_cpu(4)
    shared = {"T": tokenizer_cpu / megabytes, "S": spawn, "F": forked, "megabytes": megabytes, "objectives": {}}
    for objective in objectives:
        seq_len = 2048 if objective == "clm" else 512

        def run(objective=objective, seq_len=seq_len):
            return run_transform(paths, TOKENIZER, out, workers=1, seq_len=seq_len, objective=objective)

        pipeline_cpu = min(_cpu(run) for _ in range(2))
        sys.setswitchinterval(1e-4)  # the probe gives the GIL back at once when the run wants it
        held = gil_held_seconds(run)
        sys.setswitchinterval(0.005)
        model = {"P": pipeline_cpu / megabytes, "G": held / megabytes, "IPC": _pickled_per_megabyte(run)}
        for cores in (2, 16, 64):
            model[f"threads {cores}"] = tokenizer_cpu / max(pipeline_cpu, cores * held)
        for cores in (16, 64):
            model[f"processes {cores}"] = tokenizer_cpu * scale / (pipeline_cpu * scale + spawn + cores * forked)
        shared["objectives"][objective] = model
    return shared


def print_model(model: dict, megabytes_at_scale: int = 1000) -> None:
    print(
        f"T: tokenizer CPU, one thread: {model['T']:.4f} s/MB; S: the fork server's start-up CPU (once): "
        f"{model['S']:.2f} s; F: a worker forked from it: {model['F'] * 1e3:.1f} ms of CPU (most of 4)"
    )
    print(
        "P: the pipeline's CPU s/MB (one worker, in process, tokenizer included); G: the part holding the GIL; "
        "IPC: bytes pickled between processes per MB of text."
    )
    print(
        f"Expected ratio to the linear ceiling: threads T / max(P, N G); processes at {megabytes_at_scale} MB "
        "T / (P + S + N F) (per MB)"
    )
    print(
        f"{'objective':>16} {'P s/MB':>8} {'G s/MB':>8} {'IPC B/MB':>9} {'thr 2':>6} {'thr 16':>7} {'thr 64':>7} "
        f"{'proc 16':>8} {'proc 64':>8}"
    )
    for name, m in model["objectives"].items():
        print(
            f"{name:>16} {m['P']:8.4f} {m['G']:8.4f} {m['IPC']:9.0f} {m['threads 2']:6.2f} {m['threads 16']:7.2f} "
            f"{m['threads 64']:7.2f} {m['processes 16']:8.2f} {m['processes 64']:8.2f}"
        )


def _first_task_cpu(_) -> float:
    """CPU this worker has used since it was forked, when its first task starts (what a partition
    finds loaded: the pipeline's modules and the tokenizer)."""
    import objcli.run.pipeline  # noqa: F401
    from objcli.tokenizers import load_tokenizer

    load_tokenizer(str(TOKENIZER), "sentencepiece")
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)  # microseconds, where os.times() counts 10 ms ticks
    return usage.ru_utime + usage.ru_stime


def forked_worker_cpu(workers: int) -> float:
    """The start-up CPU of workers as objcli's process pool makes them (its fork server, preloaded)."""
    from concurrent.futures import ProcessPoolExecutor

    from objcli.executors.local import _process_context

    class Task:  # what _process_context reads of the run's first task
        config = type(
            "Config",
            (),
            {"tokenizer": str(TOKENIZER), "engine": "sentencepiece", "objective": "clm", "objective_options": None},
        )

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
        objectives = tuple(run.split("/")[0] for run in args.runs.split(","))
        print_model(
            model_rows(
                build_corpus(ROOT / "bench_data" / "scaling", args.megabytes, files=8), tuple(dict.fromkeys(objectives))
            )
        )
        return
    paths = build_corpus(ROOT / "bench_data" / "scaling", args.megabytes)
    print(f"{len(paths)} files, {sum(p.stat().st_size for p in paths) / 1e6:.0f} MB, {os.cpu_count()} cores")
    rows = measure(
        paths, [int(c) for c in args.cores.split(",")], args.repeats, ROOT / "bench_out" / "scaling", args.runs
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
