"""`make bench`, issue 28: merging 200 Megatron outputs into one bin/idx pair, side by side with
`cat` of the same .bin bytes into one file (interleaved, min and median), and the merge's peak RSS
with 20 and with 200 sources (memory must not grow with their number)."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import DATA, ROOT, _run_tree, build_corpus


def megatron_sources(count: int) -> list[Path]:
    """``count`` Megatron outputs of about 11 MB of tokens each (2.2 GB in all, so that start-up is
    not what is measured): one transform of four bench corpus files, then hard-linked copies
    (distinct folders, the same bytes)."""
    folder = DATA / "merge-sources"
    first = folder / "src-000"
    if not (first / "manifest.json").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "objcli",
                "transform",
                *map(str, build_corpus()[:4]),
                "-t",
                str(ROOT / "sample_data" / "tokenizer.model"),
                "--format",
                "megatron",
                "-o",
                str(first),
                "-q",
            ],
            check=True,
            capture_output=True,
        )
    sources = [folder / f"src-{k:03d}" for k in range(count)]
    for source in sources[1:]:
        if not source.exists():
            subprocess.run(["cp", "-al", str(first), str(source)], check=True)
    return sources


def merge_table(count: int = 200, repeats: int = 3) -> None:
    sources = megatron_sources(count)
    bins = sorted(str(p) for s in sources for p in s.glob("*.bin"))
    size = sum(Path(b).stat().st_size for b in bins)
    out = DATA / "merge-out"
    print(
        f"\nMerging {count} Megatron outputs into one bin/idx pair (issue 28): {size / 1e6:.0f} MB of .bin, "
        f"interleaved x{repeats}:"
    )
    walls: dict[str, list[float]] = {"cat": [], "merge": []}
    peaks = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(f"cat {' '.join(bins)} > {DATA / 'cat.bin'} && sync {DATA / 'cat.bin'}", shell=True, check=True)
        walls["cat"].append(time.perf_counter() - started)
        (DATA / "cat.bin").unlink()
        seconds, peak, _ = _run_tree(
            [sys.executable, "-m", "objcli", "merge", *map(str, sources), "-o", str(out), "--overwrite", "-q"]
        )
        walls["merge"].append(seconds)
        peaks.append(peak)
    for name, label in (
        ("cat", "cat of the .bin files into one, then sync"),
        ("merge", f"objcli merge ({count} sources)"),
    ):
        w = walls[name]
        print(
            f"  {label:48} min {min(w):6.2f} s  median {statistics.median(w):6.2f} s  {size / 1e6 / min(w):7.0f} MB/s"
        )
    print(f"  merge / cat throughput: {min(walls['cat']) / min(walls['merge']):.2f} (goal >= 0.8)")
    _, small, _ = _run_tree(
        [sys.executable, "-m", "objcli", "merge", *map(str, sources[:20]), "-o", str(out), "--overwrite", "-q"]
    )
    print(f"  peak RSS: {small / 2**20:.0f} MiB with 20 sources, {min(peaks) / 2**20:.0f} MiB with {count}")
    shutil.rmtree(out, ignore_errors=True)


def reshard_table(repeats: int = 5) -> None:
    """Resharding a 1 GB Arrow output (16 MB shards) into 256 MB shards, beside ``cp -r`` of the same
    folder (then ``sync``): the output is eight hard-linked copies of one run, merged, so that
    start-up is not what is measured."""
    one, source = DATA / "reshard-one", DATA / "reshard-src"
    if not (one / "manifest.json").exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "objcli",
                "transform",
                *map(str, build_corpus()),
                "-t",
                str(ROOT / "sample_data" / "tokenizer.model"),
                "-o",
                str(one),
                "--shard-size",
                "16MB",
                "--overwrite",
                "-q",
            ],
            check=True,
            capture_output=True,
        )
    if not (source / "manifest.json").exists():
        copies = [DATA / f"reshard-copy-{k}" for k in range(8)]
        for copy in copies:
            if not copy.exists():
                subprocess.run(["cp", "-al", str(one), str(copy)], check=True)
        subprocess.run(
            [sys.executable, "-m", "objcli", "merge", *map(str, copies), "-o", str(source), "-q"], check=True
        )
    size = sum(p.stat().st_size for p in source.glob("part-*"))
    walls: dict[str, list[float]] = {"cp": [], "dd": [], "reshard": []}
    copy_through_user_space = (
        f"mkdir {DATA / 'copied'} && for f in {source}/part-*; do dd if=$f "
        f"of={DATA / 'copied'}/$(basename $f) bs=8M status=none; done && sync"
    )
    for _ in range(repeats):
        for name, command in (("cp", f"cp -r {source} {DATA / 'copied'} && sync"), ("dd", copy_through_user_space)):
            shutil.rmtree(DATA / "copied", ignore_errors=True)
            started = time.perf_counter()
            subprocess.run(command, shell=True, check=True)
            walls[name].append(time.perf_counter() - started)
        seconds, _, _ = _run_tree(
            [
                sys.executable,
                "-m",
                "objcli",
                "reshard",
                str(source),
                "--shard-size",
                "256MB",
                "-o",
                str(DATA / "resharded"),
                "--overwrite",
                "-q",
            ]
        )
        walls["reshard"].append(seconds)
    print(f"\nResharding an Arrow output ({size / 1e6:.0f} MB, 16 MB shards -> 256 MB), interleaved x{repeats}:")
    for name in walls:
        print(
            f"  {name:10} min {min(walls[name]):6.2f} s  median {statistics.median(walls[name]):6.2f} s  "
            f"{size / 1e6 / min(walls[name]):7.0f} MB/s"
        )
    print(
        f"  reshard / cp throughput: {min(walls['cp']) / min(walls['reshard']):.2f} (goal >= 0.8; cp copies in the "
        f"kernel, copy_file_range); reshard / dd (the same bytes through user space, as any rewrite must): "
        f"{min(walls['dd']) / min(walls['reshard']):.2f}"
    )
    for name in ("copied", "resharded"):
        shutil.rmtree(DATA / name, ignore_errors=True)


if __name__ == "__main__":
    merge_table()
    reshard_table()
