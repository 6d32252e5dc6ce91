"""read -> tokenize -> objective -> pack -> write, for one input partition at a time.

``run_partition`` is the unit of work every executor runs; it depends only on its task, so the
output of a partition is the same whichever process, worker count or executor runs it.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ..config import TransformConfig
from ..errors import ObjcliError
from ..inputs import Partition, RecordLog
from ..inputs.cutting import utf8_bytes
from ..order.document_windows import take
from ..order.mixture import passes
from ..order.splits import assign_splits, split_names
from ..storage.faults import crash_point
from ..storage.output import output_error
from ..storage.partitions import PartitionResult, clear_partition, write_marker
from ..storage.places import open_place
from ..tokenizers import SpecialTokens, load_tokenizer
from .affinity import free_for
from .chain import SplitChain
from .document_batches import starting_with
from .passes import documents_of_pass
from .store_chain import StoreChain


@dataclass(frozen=True)
class PartitionTask:
    """One partition's work, everything a worker needs (made with keywords: fourteen fields)."""

    partition: Partition
    config: TransformConfig
    special: SpecialTokens
    folder: str  # where its shards go: a local folder, or the URL of the work prefix in object storage
    threads: int = 1  # tokenizer threads for this partition
    run_key: str = ""  # written into the completion marker; empty: no marker (stdout runs)
    config_sha256: str = ""
    split_bounds: tuple = ()  # --split: (split index, upper bound of its interval of u), from first_pass
    mixture_rate: float = 1.0  # --source: copies per document of this partition's source, from first_pass
    mixture_cut: list | None = None  # --source: which documents its last copy takes (order/mixture.exact_cut)
    source_index: int = -1  # --source: the value of the rows' source column
    process_threads: int = 1  # tokenizer threads shared by the partitions running in this process
    inputs: tuple[str, ...] = ()  # --provenance: the run's input files as the manifest names them
    leftovers: bool = True  # the work folder held files of this partition when the run began: cleared first


@dataclass
class Progress:
    """Increments reported while a partition runs (documents, bytes of text, tokens, bytes of input
    read: a partition's reports add up to its ``Partition.size``); or, once before any partition runs,
    the run's ``total`` input bytes and the bytes ``done`` already (a resumed run's kept partitions)."""

    documents: int = 0
    text_bytes: int = 0
    tokens: int = 0
    input_bytes: int = 0
    total: int | None = None  # the run's first report only: None for a stream, whose size is unknown
    done: int = 0
    phase: str = ""  # a phase's first report (a mixture's first pass, the row shuffle)


# Counters of the pipeline's own that call for a warning when a run ends with any ({count}: the total,
# {bos}: the BOS piece); an objective declares its own (Objective.warnings).
RUN_WARNINGS = {
    "texts_starting_with_bos_text": "{count:,} documents already start with the BOS text {bos!r}, and get the BOS "
    "token too; strip it from the corpus, or pass --no-bos",
}


def run_partition(task: PartitionTask, report=None) -> PartitionResult:
    """Run one partition. On any failure its files are removed (a partition without its completion
    marker is never reused, and a disk that just filled up needs the space back); an OS error
    becomes one line naming the input or the output folder."""
    work = open_place(task.folder)
    try:
        return _run_partition(task, work, report)
    except BaseException as error:
        work.close()  # uploads still on their way stop first, so none lands after the clearing
        clear_partition(work, task.partition.index)
        if isinstance(error, OSError):
            raise _os_error(task, error) from None
        raise
    finally:
        work.close()  # object storage: the local staging folder goes


def _os_error(task: PartitionTask, error: OSError) -> ObjcliError:
    name = str(error.filename or "")
    if name and not name.startswith(task.folder):
        # The file itself when it is one of the partition's pieces (a partition may group many).
        where = name if any(p.input.path == name for p in task.partition.pieces) else task.partition.label
        return ObjcliError(
            f"{where}: {error.strerror or error} ({name}); check that the input is still there and readable"
        )
    return output_error(error, task.folder.removesuffix("/.objcli-tmp"))


def _route(texts: list[str], index: np.ndarray, count: int) -> list[list[str]]:
    """The texts of each split, in their order."""
    return [take(texts, np.flatnonzero(index == split)) for split in range(count)]


class _Running:
    """The partitions running in this process now."""

    count = 0
    lock = threading.Lock()


@contextmanager
def _running_partition() -> Iterator[None]:
    with _Running.lock:
        _Running.count += 1
    try:
        yield
    finally:
        with _Running.lock:
            _Running.count -= 1


def encode_threads(task: PartitionTask) -> int:
    """Tokenizer threads for the next batch: this process's threads shared among the partitions
    running in it now, never fewer than the task's own share. Tokens never depend on it."""
    return max(task.threads, task.process_threads // max(1, _Running.count))


def _run_partition(task: PartitionTask, work, report) -> PartitionResult:
    with _running_partition():
        return _run_partition_counted(task, work, report)


def _run_partition_counted(task: PartitionTask, work, report) -> PartitionResult:
    started = time.perf_counter()
    crash_point("partition-start")
    if task.leftovers:  # whatever a dead attempt left
        clear_partition(work, task.partition.index)
    config = task.config
    tokenizer = load_tokenizer(config.tokenizer, config.engine)
    tokenizer.adopt(task.special)
    chains = _chains(task, tokenizer, work)
    log = RecordLog(strict=config.strict)
    options = config.read_options(config.strict, task.partition.source)
    text_bytes = 0
    # Text that already begins with the BOS piece would get it twice (as text, then as the token).
    bos_text, seen = (task.special.pieces.get("bos") if config.bos else None), Counter()

    def encode(texts: list[str], specials: bool = False):
        threads = encode_threads(task)
        with free_for(threads):  # a pinned worker left with idle cores beside it uses them (affinity.py)
            return tokenizer.encode(texts, threads, specials)

    repeats = passes(task.mixture_rate)
    documents = itertools.chain.from_iterable(
        documents_of_pass(task, options, log, tokenizer, j) for j in range(repeats)
    )
    progress = _Reporter(report, task.partition.size, repeats, log)
    for batch_index, texts in enumerate(documents):
        groups = (
            _route(texts, assign_splits(texts, task.split_bounds, config.seed), len(chains))
            if config.split
            else [texts]
        )
        tokens = sum(chain.feed(group, batch_index, encode) for chain, group in zip(chains, groups) if group)
        if bos_text:
            seen["texts_starting_with_bos_text"] += starting_with(texts, bos_text)
        size = utf8_bytes(texts)
        text_bytes += size
        progress.batch(len(texts), size, tokens)
    progress.done()
    shards = [shard for chain in chains for shard in chain.close()]
    counters = [c for chain in chains for c in chain.counters()]
    log.first_example = {**{k: v for c in chains for k, v in c.first_skipped().items()}, **log.first_example}
    result = _result(task, log, [*counters, seen], shards, text_bytes, started)
    work.flush()  # every shard uploaded before the marker says the partition is done
    if task.run_key:
        write_marker(work, result, task.config_sha256, task.run_key)
    return result


def _chains(task: PartitionTask, tokenizer, work) -> list:
    """Where the partition's documents go: one chain per split (objective, packer, sink), or the
    token store's (objcli tokenize: the documents' tokens, kept for every derived run)."""
    if task.config.store_kind:
        return [StoreChain.build(task.config, tokenizer, task, work)]
    names = split_names(task.config.split) if task.config.split else [""]
    return [SplitChain.build(task.config, tokenizer, task, name, work) for name in names]


class _Reporter:
    """A partition's progress: documents, text and tokens a batch, and its input bytes in all, once,
    whatever its passes (sentence-level objectives report 0 tokens)."""

    def __init__(self, report, size: int, repeats: int, log: RecordLog):
        self.report, self.size, self.repeats, self.log, self.reported = report, size, repeats, log, 0

    def batch(self, documents: int, text_bytes: int, tokens: int) -> None:
        if self.report is not None:
            read = min(self.log.input_bytes // self.repeats, self.size)
            self.report(Progress(documents, text_bytes, tokens, read - self.reported))
            self.reported = read

    def done(self) -> None:
        if self.report is not None and self.size > self.reported:
            self.report(Progress(input_bytes=self.size - self.reported))


def _result(
    task: PartitionTask, log: RecordLog, counter_sets, shards, text_bytes: int, started: float
) -> PartitionResult:
    """The partition's accounting: reader skips plus the documents objectives and packers dropped
    ("skipped:<reason>" counters), and every other counter."""
    skipped = Counter(log.skipped)
    counters = {"long_documents_cut": log.cut} if log.cut else {}
    for key, value in (item for c in counter_sets for item in c.items()):
        if key.startswith("skipped:"):
            skipped[key.removeprefix("skipped:")] += value
        else:
            counters[key] = counters.get(key, 0) + int(value)
    return PartitionResult(
        index=task.partition.index,
        documents_read=log.read,
        skipped={reason: n for reason, n in sorted(skipped.items()) if n},
        first_examples=log.first_example,
        counters=counters,
        shards=shards,
        text_bytes=text_bytes,
        seconds=time.perf_counter() - started,
    )
