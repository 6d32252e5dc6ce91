"""The library API behind ``objcli transform``: plan, run partitions, finalize shards, manifest."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from . import __version__
from .config import TransformConfig
from .errors import ObjcliError
from .executors import LocalExecutor
from .manifest import MANIFEST_NAME, MANIFEST_VERSION, totals, write_json_atomically
from .pipeline import PartitionResult, PartitionTask, Progress, plan_objective
from .readers import plan_partitions, resolve_inputs
from .readers.inputs import STDIN
from .writers import arrow_schema

WORK_FOLDER = ".objcli-tmp"


@dataclass
class Summary:
    manifest: dict
    seconds: float
    output: str

    @property
    def totals(self) -> dict:
        return self.manifest["totals"]

    def line(self) -> str:
        t = self.totals
        mb = t["text_bytes"] / 1e6
        skipped = ""
        if t["documents_skipped"]:
            reasons = ", ".join(f"{n} {r}" for r, n in t["skipped_by_reason"].items())
            skipped = f" ({reasons})"
        where = "stdout" if self.output == STDIN else self.output
        return (
            f"objcli: {t['documents_read']:,} documents read, {t['documents_written']:,} written, "
            f"{t['documents_skipped']:,} skipped{skipped}; {t['rows']:,} rows, {t['tokens']:,} tokens, "
            f"padding {100 * t['padding_fraction']:.1f}%, {t['mean_segments_per_row']:.2f} segments/row, "
            f"{t['documents_split']:,} documents split ({100 * t['split_fraction']:.1f}%); "
            f"{t['shards']} shards -> {where} in {self.seconds:.1f}s "
            f"({mb / max(self.seconds, 1e-9):.1f} MB/s, {t['tokens'] / max(self.seconds, 1e-9):,.0f} tokens/s)"
        )


def _prepare_output(output: Path, overwrite: bool) -> None:
    output.mkdir(parents=True, exist_ok=True)
    existing = sorted(
        (p for p in output.iterdir() if p.name == MANIFEST_NAME or p.name.startswith("part-")),
        key=lambda p: (p.name != MANIFEST_NAME, p.name),
    )
    if existing and not overwrite:
        raise ObjcliError(
            f"output {output}: already holds objcli output ({existing[0].name}); "
            "pass --overwrite to replace it or choose another folder"
        )
    for path in existing:
        path.unlink()
    if not os.access(output, os.W_OK):
        raise ObjcliError(f"output {output}: folder is not writable; choose another with -o")


def _final_names(results: list[PartitionResult]) -> list[tuple[str, str]]:
    shards = [s for r in results for s in r.shards]
    renames = []
    for number, shard in enumerate(shards):
        prefix = f"p{shard.partition:05d}-s{shard.ordinal:05d}"
        final_prefix = f"part-{number:05d}-of-{len(shards):05d}"
        new_files = []
        for name in shard.files:
            new_name = final_prefix + name.removeprefix(prefix)
            renames.append((name, new_name))
            new_files.append(new_name)
        shard.sha256 = {final_prefix + k.removeprefix(prefix): v for k, v in shard.sha256.items()}
        shard.files = new_files
    return renames


class _StdoutStream:
    """Streams finished partitions to standard output in partition order."""

    def __init__(self, columns, work: Path):
        self.work = work
        self.writer = pa.ipc.new_stream(pa.PythonFile(sys.stdout.buffer, mode="w"), arrow_schema(columns))
        self.next_index = 0
        self.waiting: dict[int, PartitionResult] = {}

    def add(self, result: PartitionResult) -> None:
        self.waiting[result.index] = result
        while self.next_index in self.waiting:
            for shard in self.waiting.pop(self.next_index).shards:
                for name in shard.files:
                    with pa.ipc.open_stream(pa.memory_map(str(self.work / name))) as reader:
                        for batch in reader:
                            self.writer.write_batch(batch)
                    (self.work / name).unlink()
            self.next_index += 1

    def close(self) -> None:
        self.writer.close()
        sys.stdout.buffer.flush()


def transform(
    config: TransformConfig,
    workers: int | None = None,
    overwrite: bool = False,
    progress: Callable[[Progress], None] | None = None,
    warn: Callable[[str], None] | None = None,
) -> Summary:
    """Run a whole transform; returns the manifest and timing. Raises ObjcliError on bad input."""
    started = time.perf_counter()
    workers = workers or os.cpu_count() or 1
    if workers < 1:
        raise ObjcliError(f"--workers {workers}: must be at least 1")
    files = resolve_inputs(list(config.inputs), config.input_format)
    partitions = plan_partitions(files, config.partition_bytes, config.text_unit)
    tokenizer, objective, columns = plan_objective(config)
    # Megatron's format holds token sequences only; it rebuilds positions and boundaries itself.
    lost = [c.name for c in columns if c.name not in ("input_ids", "segment_ids", "positions", "fim_modes")]
    if config.output_format == "megatron" and lost:
        raise ObjcliError(
            f"--format megatron stores input_ids only, and {objective.name} also writes {', '.join(lost)}; "
            "choose --format arrow, parquet or npy"
        )

    to_stdout = config.output == STDIN
    if to_stdout:
        work = Path(tempfile.mkdtemp(prefix="objcli-"))
    else:
        output = Path(config.output)
        _prepare_output(output, overwrite)
        work = output / WORK_FOLDER
        shutil.rmtree(work, ignore_errors=True)  # temp files of a run that died
        work.mkdir()
    # Standard input can only be read by this process; everything else may go to the pool.
    pooled_count = sum(p.input.path != STDIN for p in partitions)
    processes = max(1, min(workers, pooled_count))
    threads = max(1, workers // processes)  # tokenizer threads per process: never oversubscribe
    tasks = [PartitionTask(p, config, tokenizer.special, str(work), threads) for p in partitions]
    in_process = [t for t in tasks if t.partition.input.path == STDIN]
    pooled = [t for t in tasks if t.partition.input.path != STDIN]
    report = progress or (lambda _: None)
    stream = _StdoutStream(columns, work) if to_stdout else None
    results: list[PartitionResult] = []
    try:
        for executor, batch in ((LocalExecutor(1), in_process), (LocalExecutor(workers), pooled)):
            for result in executor.run(batch, report):
                results.append(result)
                if stream:
                    stream.add(result)
        if stream:
            stream.close()
    finally:
        if to_stdout:
            shutil.rmtree(work, ignore_errors=True)
    results.sort(key=lambda r: r.index)

    examples: dict[str, tuple[int, str]] = {}
    counts: Counter = Counter()
    for result in results:
        counts.update(result.skipped)
        for reason, example in result.first_examples.items():
            examples.setdefault(reason, example)
    if warn:
        for reason, example in examples.items():
            warn(f"skipped {counts[reason]:,} records ({reason}); first at {example}")

    renames = [] if to_stdout else _final_names(results)
    for old, new in renames:
        os.replace(work / old, output / new)
    manifest = {
        "objcli_version": __version__,
        "manifest_version": MANIFEST_VERSION,
        "complete": True,
        "objective": objective.name,
        "config": config.to_json(),
        "config_sha256": config.fingerprint(tokenizer.sha256),
        "seed": config.seed,
        "tokenizer": {
            "kind": tokenizer.kind,
            "path": str(Path(config.tokenizer).resolve()),
            "sha256": tokenizer.sha256,
            "vocab_size": tokenizer.vocab_size,
            "total_vocab_size": tokenizer.total_vocab_size,
        },
        "special_tokens": tokenizer.special.to_json(),
        "format": config.output_format,
        "columns": [
            {
                "name": c.name,
                "kind": c.kind,
                "arrow_type": str(arrow_schema([c]).field(0).type),
                "disk_dtype": str(c.disk_dtype()),
                "min_value": c.min_value,
                "max_value": c.max_value,
                "description": c.doc,
            }
            for c in columns
        ],
        "inputs": [
            {"path": f.path, "format": f.format, "compression": f.compression, "bytes": f.size} for f in files
        ],
        "partitions": [
            {
                **p.to_json(),
                "documents_read": r.documents_read,
                "documents_written": r.documents_written,
                "documents_skipped": r.documents_skipped,
                "skipped_by_reason": r.skipped,
                "counters": r.counters,
                "shards": [s.files[0] for s in r.shards],
            }
            for p, r in zip(partitions, results)
        ],
        "shards": [s.to_json() for r in results for s in r.shards],
        "totals": totals(results),
        "run": {"workers": workers, "executor": "local"},
    }
    t = manifest["totals"]
    lossy = t.get("fim_units_not_round_trip", 0)
    if warn and lossy:
        warn(
            f"fim: {lossy:,} transformed documents have pieces that do not survive decode(encode(piece)) "
            "with this tokenizer (it normalizes whitespace or adds a dummy prefix); for code, train one "
            "with 'objcli train-tokenizer --preset code'"
        )
    if t["documents_read"] != t["documents_written"] + t["documents_skipped"]:
        raise AssertionError("document accounting does not balance")  # a bug, never bad input
    if not to_stdout:
        write_json_atomically(output / MANIFEST_NAME, manifest)
        shutil.rmtree(work, ignore_errors=True)
    return Summary(manifest, time.perf_counter() - started, config.output)
