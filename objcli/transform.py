"""The library API behind ``objcli transform``: setup (``run/setup.py``), run the partitions
(``run/pipeline.py`` in the executor's workers), finish (``run/finish.py``: the row shuffle, the
manifest, its checks), with the output folder's decisions (start, resume, refuse, done) around them."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from .config import TransformConfig
from .errors import ObjcliError
from .executors import LocalExecutor, check_execution, make_executor, run_all
from .executors.local import compiled_kernels, start_fork_server
from .executors.pools import choose_pool, token_partitions, will_fork
from .formats import SIDE_FILES
from .formats.dataset_card import card_files
from .inputs.pieces import STDIN
from .order.mixture import check_repeats, run_blend
from .order.splits import split_names
from .run.append import adopt as adopt_partitions
from .run.append import adopted_results, check_appendable
from .run.finish import build_manifest, check_totals, join_prefixes, shuffle_pass, warn_skips
from .run.first_pass import mixture_rates, split_bounds
from .run.fitness import check_renderer
from .run.pipeline import PartitionResult, PartitionTask, Progress
from .run.run_inputs import make_run_key
from .run.setup import RunSetup, set_up_stages
from .run.stdout import StdoutStream
from .run.summary import Summary
from .storage.output import OutputFolder, final_names
from .storage.partitions import partitions_with_files
from .storage.places import open_place
from .storage.remote import is_url
from .storage.staging import share_tokenizer
from .stores import WHOLE_DOCUMENTS, StoreKind, parse

__all__ = ["RunSetup", "set_up_run", "transform"]


def set_up_run(config: TransformConfig, pool: str, warn=None, workers: int = 1, executor: str = "") -> RunSetup:
    """The run's setup (``run/setup.py``) and its pool: with local processes, the fork server starts as
    soon as the partitions are known, to load the tokenizer while this process loads it too."""

    def start_early(partitions) -> None:
        pooled = sum(not p.input.is_stream for p in partitions)
        tokens = token_partitions(config, partitions)
        if executor == "local" and will_fork(config.reads, pool, workers, pooled, config.tokenizer, tokens):
            # A run that encodes nothing takes its tokenizer's reference engine, made where it encodes (run/setup.py).
            start_fork_server(config.tokenizer, compiled_kernels(config), "reference" if tokens else "auto")

    setup = set_up_stages(config, warn, start_early)
    tokens = token_partitions(config, setup.partitions)
    setup.pool = choose_pool(pool, setup.objective, setup.tokenizer, workers, config.tokenizer, tokens)
    return setup


def _run_partitions(
    setup: RunSetup, todo, work: str, run_key: str, workers: int, executor: str, scheduler: str | None, stream, report
) -> list[PartitionResult]:
    """Run the partitions not yet done (writing to ``work``, a folder or the URL of a work prefix):
    standard input in this process, the rest in the pool."""
    pooled_count = sum(not p.input.is_stream for p in todo)
    processes = max(1, min(workers, pooled_count))
    threads = max(1, workers // processes)  # tokenizer threads per process: never oversubscribe
    # Partitions on threads of this process share its cores: one left running alone (a run's tail,
    # the last range of one big file) takes them all (pipeline.encode_threads).
    shared = workers if executor == "local" and setup.pool == "threads" else threads
    sources = list(setup.mixture)
    config = dataclasses.replace(setup.config, tokenizer=setup.task_tokenizer) if setup.task_tokenizer else setup.config
    leftovers = partitions_with_files(open_place(work))  # one listing, not one a partition
    tasks = [
        PartitionTask(
            partition=p,
            config=config,
            special=setup.tokenizer.special,
            folder=work,
            threads=threads,
            run_key=run_key,
            config_sha256=setup.config_sha256,
            split_bounds=setup.split_bounds,
            mixture_rate=setup.mixture[p.source]["rate"] if p.source else 1.0,
            mixture_cut=setup.mixture[p.source].get("cut") if p.source else None,
            source_index=sources.index(p.source) if p.source else -1,
            process_threads=shared,
            inputs=setup.input_names() if config.provenance else (),
            leftovers=p.index in leftovers,
        )
        for p in todo
    ]
    in_process = [t for t in tasks if t.partition.input.is_stream]  # a stream is read once, here
    pooled = [t for t in tasks if not t.partition.input.is_stream]
    runs = [(LocalExecutor(1), in_process), (make_executor(executor, workers, scheduler, setup.pool), pooled)]
    results = run_all(runs, report, stream.add if stream else lambda result: None)
    if stream:
        stream.close()
    return results


def _open_output(
    setup: RunSetup, overwrite: bool, resume: bool, warn, append: dict | None = None
) -> tuple[OutputFolder | None, str, Path]:
    """(the output folder, or None for stdout; the run key; where this process writes work files).
    ``append``: the finished output's manifest, whose partitions this run adopts (``run/append.py``)."""
    config = setup.config
    if config.output == STDIN:
        return None, "", Path(tempfile.mkdtemp(prefix="objcli-"))
    streams = [f.path for f in setup.files if f.is_stream]
    if resume and streams:
        raise ObjcliError(
            f"--resume: input {streams[0]} is a stream, read once, so what an earlier run read from it cannot be "
            "checked; drop --resume to build the output again"
        )
    run_key = make_run_key(setup.config_sha256, setup.files)
    folder = OutputFolder(
        open_place(config.output),
        setup.config_sha256,
        run_key,
        SIDE_FILES,
        record=json.loads(json.dumps({"config": config.to_json(), "identity": setup.identity})),
        inputs=[f.path for f in setup.files if not f.is_stream],
        split_side_files=config.format.split_folder_files(split_names(config.split) if config.split else []),
    )
    adopt = None
    if append is not None:
        check_appendable(config)
        adopted = adopted_results(setup, append)
        adopt = lambda folder: adopt_partitions(folder, adopted, setup.config_sha256, run_key)  # noqa: E731
    folder.open(len(setup.partitions), overwrite=overwrite, resume=resume, adopt=adopt)
    if folder.restarted and warn:
        changed = "inputs changed since"
        if streams:
            name = "standard input" if streams[0] == STDIN else f"input {streams[0]}"
            changed = f"{name} is a stream that cannot be compared with"
        warn(f"{changed} the {folder.restarted} run in {folder.place.where}; starting it again")
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
    given_workers = workers
    workers = workers or os.cpu_count() or 1
    to_stdout = config.output == STDIN
    check_execution(given_workers, overwrite, resume, to_stdout, executor, pool, scheduler)
    if pool == "threads":
        # Threads of one process share one Hugging Face (Rayon) thread pool: size it for all of them.
        os.environ.setdefault("RAYON_NUM_THREADS", str(workers))
    setup = set_up_run(config, pool, warn, workers, executor)
    folder, run_key, work = _open_output(setup, overwrite, resume, warn, append)
    try:
        if folder and folder.complete_manifest is not None:
            folder.stamp()
            return Summary(
                folder.complete_manifest, time.perf_counter() - started, config.output, len(setup.partitions), True
            )
        allocated = setup.tokenizer.allocation_warning()
        for line in [*setup.objective.setup_warnings(), allocated] if warn else ():
            if line:  # once the run is known to go ahead (a finished one has nothing to say)
                warn(line)
        summary = _run_and_finish(setup, folder, run_key, work, started, workers, executor, scheduler, progress, warn)
        summary.appended = append is not None
        return summary
    finally:
        if folder:
            folder.close()


def _run_and_finish(setup, folder, run_key, work, started, workers, executor, scheduler, progress, warn) -> Summary:
    """Run what is left to do, then the manifest: the second half of ``transform``."""
    config, to_stdout = setup.config, folder is None
    kept = folder.kept if folder else {}
    todo = [p for p in setup.partitions if p.index not in kept]
    stream = StdoutStream(setup.columns, work) if to_stdout else None
    report = progress or (lambda _: None)
    if config.source or config.split:  # a first pass may count the corpus: a phase of its own
        report(Progress(phase="first pass (split bounds, mixture rates)"))
    setup.split_bounds = split_bounds(config, setup.partitions, setup.tokenizer)
    setup.mixture = mixture_rates(config, setup.partitions, setup.tokenizer)
    check_repeats(setup.mixture, warn)
    streams = any(p.input.is_stream for p in setup.partitions)
    report(
        Progress(
            phase="tokenize" if config.store_kind else "transform",  # the command's own name
            total=None if streams else sum(p.size for p in setup.partitions),
            done=sum(p.size for p in setup.partitions if p.index in kept),
        )
    )
    task_folder = folder.task_folder if folder else str(work)
    if folder and folder.place.remote and executor == "dask" and not is_url(config.tokenizer):
        # Dask workers share no folder with this machine: they fetch the tokenizer from the bucket.
        setup.task_tokenizer = share_tokenizer(config.tokenizer, folder.work_place)
    try:
        results = list(kept.values()) + _run_partitions(
            setup, todo, task_folder, run_key, workers, executor, scheduler, stream, report
        )
    finally:
        if to_stdout:
            shutil.rmtree(work, ignore_errors=True)
    results.sort(key=lambda r: r.index)
    if warn:
        warn_skips(results, warn)
    shards = [s for r in results for s in r.shards]
    if config.shuffle_pass:
        report(Progress(phase="shuffling rows across shards"))
        shards = shuffle_pass(shards, folder, work, setup)
    shards = join_prefixes(shards, folder, work, setup)  # Megatron: prefixes as large as --shard-size
    renames = [] if to_stdout else final_names(shards)  # gives the shards their final names
    manifest = build_manifest(setup, results, shards, run_key)
    check_totals(manifest, setup, warn)
    if folder:
        columns, blend = config.format.recorded_columns(setup.columns), run_blend(config, setup.partitions)
        extra = config.format.side_files(shards, columns, setup.config_sha256, blend)
        folder.finish(renames, manifest, {**extra, **card_files(folder.place, manifest, warn)})
    return Summary(manifest, time.perf_counter() - started, config.output, kept=len(kept))


def tokenize(config: TransformConfig, kind: StoreKind | str = WHOLE_DOCUMENTS, **execution) -> Summary:
    """``objcli tokenize`` as a library call: the configuration's inputs tokenized once into a token
    store at ``config.output`` (``kind``: what it holds, ``stores.StoreKind``, or as the manifest spells
    it: "documents", a sentence splitter's name for a per-sentence store, "conversations" for a chat
    store), which every ``transform`` then reads with no tokenizer run. ``execution`` as ``transform``
    takes it (workers, overwrite, append, ...)."""
    import dataclasses

    kind = (parse(kind) if isinstance(kind, str) else kind) or WHOLE_DOCUMENTS
    check_renderer(config, kind)
    return transform(dataclasses.replace(config, store_kind=kind), **execution)
