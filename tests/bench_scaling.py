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


def ceiling_seconds(paths: list[Path], threads: int, batch_bytes: int = 1 << 20) -> tuple[float, int]:
    """Best of two: SentencePiece batched encode of every text, ``threads`` threads, 1 MiB batches."""
    import msgspec
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(TOKENIZER))
    batches, batch, size, total = [], [], 0, 0
    for path in paths:
        for record in msgspec.json.Decoder().decode_lines(path.read_bytes()):
            batch.append(record["text"])
            size += len(record["text"])
            if size >= batch_bytes:
                batches.append(batch)
                total += size
                batch, size = [], 0
    batches.append(batch)
    total += size
    best = float("inf")
    for _ in range(2):
        started = time.perf_counter()
        for b in batches:
            sp.encode(b, return_type="numpy", num_threads=threads)
        best = min(best, time.perf_counter() - started)
    return best, total


def cli_run(paths: list[Path], out: Path, workers: int, pool: str, objective: str) -> tuple[float, float]:
    """Wall and CPU seconds (whole process tree) of one cold CLI run."""
    shutil.rmtree(out, ignore_errors=True)
    seq_len = "2048" if objective == "clm" else "512"
    command = [sys.executable, "-m", "objcli", "transform", *map(str, paths), "-t", str(TOKENIZER), "--objective",
               objective, "--seq-len", seq_len, "-o", str(out), "--quiet", "--workers", str(workers), "--pool", pool]
    before = os.times()
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(command[2:4])} failed:\n{done.stderr}")
    wall = time.perf_counter() - started
    after = os.times()
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


RUNS = "clm/threads,clm/processes,nsp/processes"


def measure(paths: list[Path], cores: list[int], repeats: int, out: Path, runs: str = RUNS) -> list[dict]:
    rows = []
    for count in cores:
        walls: dict[str, list[float]] = {"ceiling": []}
        cpu: dict[str, list[float]] = {}
        text_bytes = 0
        for _ in range(repeats if count > 2 else 1):  # one core count's runs interleaved
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=400)
    parser.add_argument("--cores", default="1,2,4,8,16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", default=RUNS, help="objective/pool pairs (pool: threads, processes or auto)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    paths = build_corpus(ROOT / "bench_data" / "scaling", args.megabytes)
    print(f"{len(paths)} files, {sum(p.stat().st_size for p in paths) / 1e6:.0f} MB, {os.cpu_count()} cores")
    rows = measure(paths, [int(c) for c in args.cores.split(",")], args.repeats, ROOT / "bench_out" / "scaling", args.runs)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
