"""`make bench`, issue 16: the same transform with its inputs, its output or both in S3, served by a
moto server on 127.0.0.1 (a process of its own, on the same cores), against local disk; interleaved
repeats, min and median walls, CPU per MB of objcli's process tree, and the endpoint's own CPU.

Loopback is a lower bound on what a network adds: no latency, no bandwidth limit. But moto is
Python, and it shares this machine's cores with the run, which a real endpoint does not."""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import psutil
from paths import ROOT


@contextmanager
def moto_endpoint():
    """``moto_server`` on a free loopback port; this process and its children reach it through the
    standard endpoint and credential variables."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = psutil.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    saved = dict(os.environ)
    os.environ.update(
        {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield server
    finally:
        os.environ.clear()
        os.environ.update(saved)
        server.terminate()
        server.wait()


def storage_table(paths: list[Path], transform, repeats: int = 3) -> None:
    """``transform(inputs, *extra, output=...)`` is benchmarks.objcli_transform. Then ten copies of
    the corpus (80 files, hard links on disk), read from the bucket and from disk (2 runs each):
    with start-up a smaller share, the steady-state ratio. (Not one large object: moto reads a
    whole object for every ranged GET, 0.3 s a request on a 521 MB one, which S3 does not.)"""
    import s3fs

    local_out = str(ROOT / "bench_out")
    with moto_endpoint() as server:
        fs = s3fs.S3FileSystem(skip_instance_cache=True)
        fs.mkdir("bench")
        for path in paths:
            fs.put_file(str(path), f"bench/corpus/{path.name}")
        ten = _ten_copies(paths)
        fs.put(f"{ten}/", "bench/ten/", recursive=True)
        variants = {
            "local disk -> local disk": (paths, local_out),
            "s3 -> local disk": (["s3://bench/corpus/"], local_out),
            "local disk -> s3": (paths, "s3://bench/out"),
            "s3 -> s3": (["s3://bench/corpus/"], "s3://bench/out"),
        }
        runs = _interleaved(variants, transform, server, repeats)
        tenfold = _interleaved(
            {"10x, local disk": ([ten], local_out), "10x, s3 -> local disk": (["s3://bench/ten/"], local_out)},
            transform,
            server,
            2,
        )
    shutil.rmtree(local_out, ignore_errors=True)
    _print(runs, sum(p.stat().st_size for p in paths) / 1e6, repeats)
    _print(tenfold, 10 * sum(p.stat().st_size for p in paths) / 1e6, 2)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import s3fs; s3fs.S3FileSystem().ls('bench')"], check=False, capture_output=True
    )
    print(
        f"start-up that S3 adds (import s3fs, a client, one listing; a process of its own): "
        f"{time.perf_counter() - started:.2f} s"
    )


def _ten_copies(paths: list[Path]) -> Path:
    """A folder of ten copies of the corpus as hard links (distinct paths, so objcli reads each)."""
    folder = paths[0].parent / "memory" / "ten"  # not beside the corpus: peers read that folder
    for copy in range(10):
        (folder / f"copy-{copy}").mkdir(parents=True, exist_ok=True)
        for path in paths:
            link = folder / f"copy-{copy}" / path.name
            if not link.exists() or not link.samefile(path):
                link.unlink(missing_ok=True)
                os.link(path, link)
    return folder


def _interleaved(variants: dict, transform, server, repeats: int) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, (inputs, output) in variants.items():
            before = sum(server.cpu_times()[:2])
            run = transform(inputs, "--overwrite", output=output)
            run["endpoint_cpu"] = sum(server.cpu_times()[:2]) - before
            runs[name].append(run)
    return runs


def _print(runs: dict[str, list[dict]], megabytes: float, repeats: int) -> None:
    print(
        f"\nObject storage (moto S3 on 127.0.0.1), clm --seq-len 2048, {megabytes:.0f} MB, "
        f"({repeats} interleaved runs each):"
    )
    print(f"{'':26} {'min s':>7} {'median s':>9} {'CPU s/MB':>9} {'moto CPU s':>11} {'vs local':>9}")
    base = statistics.median(r["seconds"] for r in next(iter(runs.values())))
    for name, group in runs.items():
        walls = [r["seconds"] for r in group]
        cpu = statistics.median(r["cpu"] for r in group) / megabytes
        endpoint = statistics.median(r["endpoint_cpu"] for r in group)
        print(
            f"{name:26} {min(walls):7.2f} {statistics.median(walls):9.2f} {cpu:9.4f} {endpoint:11.2f} "
            f"{base / statistics.median(walls):8.2f}x"
        )
