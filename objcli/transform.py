"""The library API behind ``objcli transform``: plan, run partitions, finalize shards, manifest."""

from __future__ import annotations

import dataclasses
import json
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

from .config import TransformConfig
from .errors import ObjcliError
from .executors import POOLS, LocalExecutor, make_executor
from .executors.local import compiled_kernels, start_fork_server
from .executors.pools import choose_pool, will_fork
from .formats import SIDE_FILES
from .formats.arrow_columns import arrow_schema
from .objectives.base import remainder_hint
from .order.first_pass import mixture_rates, split_bounds
from .order.mixture import check_repeats, parse_sources
from .order.shuffle import shuffle_rows
from .readers import plan_partitions, resolve_inputs
from .readers.inputs import STDIN
from .readers.records import every_record_bad, why_no_rows
from .run.append import adopt as adopt_partitions
from .run.append import adopted_results, check_appendable
from .run.finish import build_manifest
from .run.pipeline import PartitionTask, Progress, first_texts, plan_objective
from .run.run_inputs import check_output_outside_inputs, check_sources_disjoint, make_run_key
from .run.summary import Summary
from .storage.dataset_card import card_files
from .storage.identity import run_identity, side_digests
from .storage.output import OutputFolder, PartitionResult, final_names, output_error
from .storage.remote import is_url
from .storage.stores import open_store, share_tokenizer


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


@dataclass
class RunPlan:
    """What ``plan_run`` decides before any partition runs."""

    config: TransformConfig
    files: list
    partitions: list
    tokenizer: object
    objective: object
    columns: list
    fingerprint: str
    pool: str
    split_bounds: tuple = ()  # --split: each held-out split's interval of the keyed hash (splits.py)
    mixture: dict = dataclasses.field(default_factory=dict)  # --source: each source's estimate and rate
    task_tokenizer: str = ""  # where partitions load the tokenizer from, if not --tokenizer's path
    identity: dict = dataclasses.field(default_factory=dict)  # every file read besides the inputs (storage/identity.py)


def _check_execution(workers: int, overwrite: bool, resume: bool, to_stdout: bool, executor: str, pool: str) -> None:
    if workers < 1:
        raise ObjcliError(f"--workers {workers}: must be at least 1")
    if overwrite and resume:
        raise ObjcliError("--resume keeps an earlier run and --overwrite replaces it; pass one of them")
    if to_stdout and resume:
        raise ObjcliError("--resume needs an output folder; a stream on stdout cannot be resumed")
    if pool not in POOLS:
        raise ObjcliError(f"--pool {pool}: choose one of {', '.join(POOLS)}")
    if pool != "auto" and executor != "local":
        raise ObjcliError(f"--pool applies to --executor local, not to {executor}")


def _input_groups(paths: list[str], breaks) -> list[list[str]]:
    edges = [0, *sorted(b for b in set(breaks) if 0 < b < len(paths)), len(paths)]
    return [paths[a:b] for a, b in zip(edges[:-1], edges[1:])]


def plan_run(config: TransformConfig, pool: str, warn=None, workers: int = 1, executor: str = "") -> RunPlan:
    """Inputs, partitions, tokenizer, objective and columns, all checked before any work."""
    check_output_outside_inputs(config)
    files, partitions, by_source = [], [], {}
    for source, paths in (parse_sources(config.source) if config.source else {"": list(config.inputs)}).items():
        source_files = by_source[source] = []
        # Partitions never mix sources (each row then has one), nor inputs an --append added.
        for group in _input_groups(paths, config.input_breaks if not config.source else ()):
            group_files = resolve_inputs(group, config.input_format, warn)
            partitions += [dataclasses.replace(p, index=len(partitions) + i, source=source) for i, p in
                           enumerate(plan_partitions(group_files, config.partition_bytes, config.text_unit))]
            source_files += group_files
        files += source_files
    check_sources_disjoint(by_source)
    if config.text_unit != "line" and files and all(f.format in ("jsonl", "parquet") for f in files):
        raise ObjcliError(f"--text-unit {config.text_unit}: applies to plain-text inputs, and these are all "
                          f"{' and '.join(sorted({f.format for f in files}))} (one document per record); drop it")
    if executor == "local" and will_fork(config.objective, pool, workers, sum(not p.input.is_stream for p in partitions)):
        start_fork_server(config.tokenizer, compiled_kernels(config))
    config, tokenizer, objective, columns = plan_objective(config, warn, first_texts(partitions, config))
    pool = choose_pool(pool, objective, tokenizer, workers)
    # Megatron's and the flat formats hold token sequences only; the trainer rebuilds positions and boundaries.
    lost = [c.name for c in columns if c.name != "input_ids" and c.role not in ("segment_ids", "positions", "per_segment")]
    if config.format.whole_documents and lost:
        raise ObjcliError(
            f"--format {config.output_format} stores input_ids only, and {objective.name} also writes {', '.join(lost)}; "
            "choose --format arrow, parquet or npy"
        )
    identity = run_identity(tokenizer, objective)
    return RunPlan(config, files, partitions, tokenizer, objective, columns,
                   config.fingerprint(tokenizer.sha256, side_digests(identity)), pool, identity=identity)


def _run_partitions(plan: RunPlan, todo, work: str, run_key: str, workers: int, executor: str,
                    scheduler: str | None, stream, report) -> list[PartitionResult]:
    """Run the partitions not yet done (writing to ``work``, a folder or the URL of a work prefix):
    standard input in this process, the rest in the pool."""
    pooled_count = sum(not p.input.is_stream for p in todo)
    processes = max(1, min(workers, pooled_count))
    threads = max(1, workers // processes)  # tokenizer threads per process: never oversubscribe
    # Partitions on threads of this process share its cores: one left running alone (a run's tail,
    # the last range of one big file) takes them all (pipeline.encode_threads).
    shared = workers if executor == "local" and plan.pool == "threads" else threads
    sources = list(plan.mixture)
    config = dataclasses.replace(plan.config, tokenizer=plan.task_tokenizer) if plan.task_tokenizer else plan.config
    tasks = [PartitionTask(p, config, plan.tokenizer.special, work, threads, run_key, plan.fingerprint,
                           plan.split_bounds, plan.mixture[p.source]["rate"] if p.source else 1.0,
                           sources.index(p.source) if p.source else -1, shared) for p in todo]
    in_process = [t for t in tasks if t.partition.input.is_stream]  # a stream is read once, here
    pooled = [t for t in tasks if not t.partition.input.is_stream]
    results = []
    runs = [(LocalExecutor(1), in_process), (make_executor(executor, workers, scheduler, plan.pool), pooled)]
    for runner, batch in runs:
        if not batch:
            continue
        with runner:
            for result in runner.run(batch, report):
                results.append(result)
                if stream:
                    stream.add(result)
    if stream:
        stream.close()
    return results


def _warn_skips(results, warn) -> None:
    examples: dict[str, tuple[int, str]] = {}
    counts: Counter = Counter()
    for result in results:
        counts.update(result.skipped)
        for reason, example in result.first_examples.items():
            examples.setdefault(reason, example)
    for reason, example in examples.items():
        warn(f"skipped {counts[reason]:,} records ({reason}); first at {example}")


def _shuffle(shards, folder: OutputFolder | None, work: Path, plan: RunPlan):
    """``--shuffle-rows``' second pass, on this machine: in object storage, the partitions' work files
    are fetched to the staging folder first, and the shuffled shards uploaded as they finish."""
    remote = folder is not None and folder.store.remote
    config = plan.config
    try:
        for name in (n for s in shards for n in s.files) if remote else ():
            folder.work_store.fetch(name, work)
        shuffled = shuffle_rows(shards, work, plan.columns, config.output_format, config.shard_limit, config.seed,
                                publish=folder.work_store.publish if remote else None)
    except OSError as error:  # a full disk in the second pass is the same one line as in the first
        for partial in work.glob("shuffled-*.tmp"):  # the shard it was writing: a rerun redoes the pass
            partial.unlink(missing_ok=True)
        raise output_error(error, folder.store.where if folder else work) from None
    if remote:
        folder.work_store.flush()
    return shuffled


def _open_output(plan: RunPlan, overwrite: bool, resume: bool, warn, append: dict | None = None
                 ) -> tuple[OutputFolder | None, str, Path]:
    """(the output folder, or None for stdout; the run key; where this process writes work files).
    ``append``: the finished output's manifest, whose partitions this run adopts (``run/append.py``)."""
    config = plan.config
    if config.output == STDIN:
        return None, "", Path(tempfile.mkdtemp(prefix="objcli-"))
    streams = [f.path for f in plan.files if f.is_stream]
    if resume and streams:
        raise ObjcliError(
            f"--resume: input {streams[0]} is a stream, read once, so what an earlier run read from it cannot be "
            "checked; drop --resume to build the output again"
        )
    run_key = make_run_key(plan.fingerprint, plan.files)
    folder = OutputFolder(open_store(config.output), plan.fingerprint, run_key, SIDE_FILES,
                          record=json.loads(json.dumps({"config": config.to_json(), "identity": plan.identity})))
    adopt = None
    if append is not None:
        check_appendable(config)
        adopted = adopted_results(plan, append)
        adopt = lambda folder: adopt_partitions(folder, adopted, plan.fingerprint, run_key)  # noqa: E731
    folder.open(len(plan.partitions), overwrite=overwrite, resume=resume, adopt=adopt)
    if folder.restarted and warn:
        changed = "inputs changed since"
        if streams:
            name = "standard input" if streams[0] == STDIN else f"input {streams[0]}"
            changed = f"{name} is a stream that cannot be compared with"
        warn(f"{changed} the {folder.restarted} run in {folder.store.where}; starting it again")
    return folder, run_key, folder.work


def transform(
    config: TransformConfig,
    workers: int | None = None,
    overwrite: bool = False,
    resume: bool = False,
    executor: str = "local",
    scheduler: str | None = None,
    pool: str = "auto",
    progress: Callable[[Progress], None] | None = None,
    warn: Callable[[str], None] | None = None,
    append: dict | None = None,
) -> Summary:
    """Run a whole transform; returns the manifest and timing. Raises ObjcliError on bad input.

    An output folder that holds an interrupted (or finished) run of the same configuration is
    resumed: finished partitions are kept and only the rest is done again.
    """
    started = time.perf_counter()
    workers = workers or os.cpu_count() or 1
    to_stdout = config.output == STDIN
    _check_execution(workers, overwrite, resume, to_stdout, executor, pool)
    if pool == "threads":
        # Threads of one process share one Hugging Face (Rayon) thread pool: size it for all of them.
        os.environ.setdefault("RAYON_NUM_THREADS", str(workers))
    plan = plan_run(config, pool, warn, workers, executor)
    allocated = plan.tokenizer.allocation_warning()
    if warn and allocated:  # once the run is known to go ahead
        warn(allocated)
    folder, run_key, work = _open_output(plan, overwrite, resume, warn, append)
    try:
        if folder and folder.complete_manifest is not None:
            folder.stamp()
            return Summary(folder.complete_manifest, time.perf_counter() - started, config.output,
                           len(plan.partitions), True)
        summary = _run_and_finish(plan, folder, run_key, work, started, workers, executor, scheduler, progress, warn)
        summary.appended = append is not None
        return summary
    finally:
        if folder:
            folder.close()


def _run_and_finish(plan, folder, run_key, work, started, workers, executor, scheduler, progress, warn) -> Summary:
    """Run what is left to do, then the manifest: the second half of ``transform``."""
    config, to_stdout = plan.config, folder is None
    kept = folder.kept if folder else {}
    todo = [p for p in plan.partitions if p.index not in kept]
    stream = _StdoutStream(plan.columns, work) if to_stdout else None
    report = progress or (lambda _: None)
    if config.source or config.split:  # a first pass may count the corpus: a phase of its own
        report(Progress(phase="first pass (split bounds, mixture rates)"))
    plan.split_bounds = split_bounds(config, plan.partitions, plan.tokenizer)
    plan.mixture = mixture_rates(config, plan.partitions, plan.tokenizer)
    check_repeats(plan.mixture, warn)
    streams = any(p.input.is_stream for p in plan.partitions)
    report(Progress(phase="transform", total=None if streams else sum(p.size for p in plan.partitions),
                    done=sum(p.size for p in plan.partitions if p.index in kept)))
    task_folder = folder.task_folder if folder else str(work)
    if folder and folder.store.remote and executor == "dask" and not is_url(config.tokenizer):
        # Dask workers share no folder with this machine: they fetch the tokenizer from the bucket.
        plan.task_tokenizer = share_tokenizer(config.tokenizer, folder.work_store)
    try:
        results = list(kept.values()) + _run_partitions(plan, todo, task_folder, run_key, workers, executor, scheduler,
                                                        stream, report)
    finally:
        if to_stdout:
            shutil.rmtree(work, ignore_errors=True)
    results.sort(key=lambda r: r.index)
    if warn:
        _warn_skips(results, warn)
    shards = [s for r in results for s in r.shards]
    if config.shuffle_rows:
        report(Progress(phase="shuffling rows across shards"))
        shards = _shuffle(shards, folder, work, plan)
    renames = [] if to_stdout else final_names(shards)  # gives the shards their final names
    manifest = build_manifest(plan, results, shards, run_key)
    doubled = manifest["totals"].get("texts_starting_with_bos_text", 0)
    if warn and doubled:
        warn(f"{doubled:,} documents already start with the BOS text {manifest['special_tokens']['pieces']['bos']!r}, "
             "and get the BOS token too; strip it from the corpus, or pass --no-bos")
    lossy = manifest["totals"].get("fim_units_not_round_trip", 0)
    if warn and lossy:
        warn(
            f"fim: {lossy:,} transformed documents have pieces that do not survive decode(encode(piece)) "
            "with this tokenizer (it normalizes whitespace or adds a dummy prefix); for code, train one "
            "with 'objcli train-tokenizer --preset code'"
        )
    t = manifest["totals"]
    if t["documents_read"] != t["documents_written"] + t["documents_skipped"]:
        raise AssertionError("document accounting does not balance")  # a bug, never bad input
    if every_record_bad(t):
        raise ObjcliError(every_record_bad(t))
    if warn and not t["rows"]:
        warn(why_no_rows(t, config.seq_len, remainder_hint(manifest["config"])))
    if folder:
        extra = config.format.side_files(shards, config.format.stored_columns(plan.columns), plan.fingerprint)
        folder.finish(renames, manifest, {**extra, **card_files(folder.store, manifest, warn)})
    return Summary(manifest, time.perf_counter() - started, config.output, kept=len(kept))
