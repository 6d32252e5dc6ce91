"""One split's chain in a partition: objective -> packer -> row step -> shards (``pipeline.py`` runs a
partition's documents through one such chain per split; ``store_chain.py`` is ``objcli tokenize``'s)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..config import TransformConfig
from ..formats import ShardSink
from ..formats.arrow import RowsToShuffle
from ..formats.row_plan import ID_ROLES, with_ids
from ..inputs.token_store import StoredDocuments
from ..objectives import DocumentBatch
from ..packing import Packer
from ..packing.best_fit import BestFitPlanner
from ..packing.concat import ConcatPlanner
from ..recipe import build_objective
from ..rows import RowBatch
from ..tokenizers import Tokenizer
from .provenance import Sources
from .stages import build_packer, build_planner, run_columns


@dataclass
class SplitChain:
    """objective -> packer -> row step -> shards, for the documents of one split of a partition."""

    partition_examples: object  # the objective's PartitionExamples for this partition
    packer: Packer
    sink: ShardSink
    tokenizes_itself: bool  # the objective tokenizes its own pieces (sentences, FIM's), not documents
    first_document: int = 0
    source_index: int = -1  # --source: every row of the partition gets it in its source column
    sources: Sources | None = None  # --provenance: where each document comes from
    plans: bool = False  # --format plan: packed rows written as they are, the row step made on read
    planner: ConcatPlanner | BestFitPlanner | None = None  # --format plan over documents: rows from lengths alone
    counting: PositionIds | None = None  # --format plan, a row step that changes rows' counts: their ids
    held: list | None = None  # a plan run's batches (documents, index, first document), planned at close

    def _write(self, packed: RowBatch | None) -> None:
        # Spans before the row step: it may rearrange a row's segments (FIM at context level).
        spanned = packed if self.sources is None else self.sources.spans(packed)
        if not self.plans:
            rows = self.partition_examples.rows(spanned)
        else:
            rows = spanned if self.counting is None or spanned is None else self._counted(spanned)
        self.sink.write(self._sourced(rows))

    def _sourced(self, rows):
        """Rows (written, packed or planned) with --source's column: the partition's source, every row."""
        if rows is not None and self.source_index >= 0:
            if rows.columns is None:  # planned from lengths: runs only
                rows.columns = {}
            rows.columns["source"] = np.full(rows.num_rows, self.source_index, dtype=np.int32)
        return rows

    @classmethod
    def build(cls, config: TransformConfig, tokenizer: Tokenizer, task, split: str, work) -> SplitChain:
        """The chain of ``split`` (``task``: the partition's ``pipeline.PartitionTask``)."""
        partition = task.partition.index
        objective = build_objective(config, tokenizer)
        packer = build_packer(config, objective)
        # --shuffle-rows: rows in order to Arrow work files first; the shuffle writes the format.
        writer = RowsToShuffle if config.shuffle_pass else config.format.writer
        whole = config.format.whole_partitions
        sink = ShardSink(
            work.staging(),
            partition,
            writer,
            run_columns(config, objective, packer, planned=config.format.packs_positions),
            None if whole else config.shard_limit.rows,
            None if whole else config.shard_limit.bytes,
            split=split,
            publish=work.publish if work.remote else None,
            provenance=list(task.inputs) if config.provenance else None,
        )
        examples = objective.partition_examples(partition)
        sources = _sources(objective, examples, tokenizer, task.inputs) if config.provenance else None
        plans = config.format.packs_positions
        planner = build_planner(config, objective) if plans else None
        chain = cls(examples, packer, sink, objective.tokenizes_itself, 0, task.source_index, sources, plans, planner)
        if planner is not None and examples.joins_batches and sources is None:
            chain.held = []
        if plans and objective.plan_counts_rows:
            chain.counting = PositionIds(
                tokenizer.total_vocab_size, [c.name for c in packer.columns() if c.role in ID_ROLES]
            )
        return chain

    def feed(self, texts: list[str], batch_index: int, encode) -> int:
        sentences = records = None
        stored = isinstance(texts, StoredDocuments)
        if stored and self.held is not None:  # planned once a partition, at close (``_plan_held``)
            self.held.append((texts, batch_index, self.first_document))
            self.first_document += len(texts)
            return len(texts.tokens)
        if stored and self.planner is None:  # a plan run's examples over positions: each token's made
            texts = texts.placed()
        if self.counting is not None and stored:
            self.counting.put(texts.tokens, texts.ids)
        if stored and texts.records is not None:  # what the store's kind keeps for its objective (chat, pairs)
            tokens, offsets = texts.tokens, texts.offsets
            records = texts.records.batch(offsets)
        elif stored and self.tokenizes_itself:  # a per-sentence store, or Megatron's
            tokens, offsets = encode([])
            sentences = texts.sentence_tokens()
        elif stored:  # a token store's documents, or a tokenized input's
            tokens, offsets = texts.tokens, texts.offsets
        else:
            tokens, offsets = encode([]) if self.tokenizes_itself else encode(texts)
        batch = DocumentBatch(texts, tokens, offsets, self.first_document, batch_index, encode, sentences, records)
        if self.planner is not None and stored:  # a plan from the examples' lengths: no array a token
            self.sink.write(self._sourced(self.planner.feed(self.partition_examples.example_runs(batch))))
            self.first_document += len(texts)
            return len(tokens)
        examples = self.partition_examples.examples(batch)
        if self.sources is not None:
            self.sources.add(texts, tokens, offsets)
            examples = self.sources.mark(examples, self.first_document)
        self._write(self.packer.process(examples))
        self.first_document += len(texts)
        return len(tokens)

    def _plan_held(self) -> None:
        """The held batches' examples made once, over their documents joined, then fed to the planner a batch
        at a time (each its examples, None where it has none): windows and the batches a row step keys its draws
        to close where they did."""
        parts, indices, firsts = zip(*self.held)
        self.held = []
        texts = StoredDocuments.concat(list(parts))
        records = texts.records.batch(texts.offsets) if texts.records is not None else None
        batch = DocumentBatch(texts, texts.tokens, texts.offsets, firsts[0], indices[0], None, None, records)
        examples = self.partition_examples.example_runs(batch)
        bounds = np.cumsum([len(part) for part in parts])  # one past each batch's last document
        ends = np.searchsorted(examples.records, bounds) if examples is not None else np.zeros(len(parts), int)
        for lo, hi in zip([0, *ends[:-1].tolist()], ends.tolist()):
            self.sink.write(self._sourced(self.planner.feed(examples.slice(lo, hi) if hi > lo else None)))

    def _counted(self, packed: RowBatch) -> RowBatch:
        """Packed rows of positions, as a plan keeps them, with the counts of the rows the row step makes of
        them (``Objective.plan_counts_rows``): the step runs as a row format's run runs it, so its counters
        and keys are that run's too."""
        ids = {
            name: with_ids(packed.columns[name], self.counting, self.counting.vocabulary)
            for name in self.counting.names
        }
        made = self.partition_examples.rows(replace(packed, columns={**packed.columns, **ids}))
        return CountedRows(packed.columns, made.tokens, made.padding, made.documents, made.row_segments())

    def counters(self) -> list[dict]:
        packed = self.planner if self.planner is not None else self.packer
        return [self.partition_examples.counters, packed.counters]

    def first_skipped(self) -> dict[str, str]:  # where the objective's first skip of each reason was
        return getattr(self.partition_examples, "first_skipped", {})

    def close(self) -> list:
        if self.planner is not None:
            if self.held:
                self._plan_held()
            self.sink.write(self._sourced(self.planner.finish()))
            return self.sink.close()
        last = self.partition_examples.finish()
        if self.sources is not None:
            last = self.sources.mark(last, self.first_document)
        self._write(self.packer.process(last))
        self._write(self.packer.finish())
        return self.sink.close()


@dataclass
class CountedRows(RowBatch):
    """Packed rows that count as the rows the row step makes of them: their tokens, padding and segments."""

    made_segments: np.ndarray | None = None  # each row's segments once made

    def slice(self, start: int, stop: int) -> CountedRows:
        part = super().slice(start, stop)
        return CountedRows(part.columns, part.tokens, part.padding, part.documents, self.made_segments[start:stop])

    def segments(self) -> int:
        return int(self.made_segments.sum())


class PositionIds:
    """A partition's ids by store position, as a plan run's batches bring them (positions beside their ids,
    in whatever order, subset or repeat its splits and passes give them): what its packed rows are made
    from to be counted."""

    def __init__(self, vocabulary: int, names: list[str]):
        self.vocabulary, self.names = vocabulary, names  # the packed columns holding ids (positions)
        self.ids = np.zeros(0, np.int32)
        self.end = 0  # one past the last position put

    def __len__(self) -> int:
        return self.end

    def put(self, positions: np.ndarray, ids: np.ndarray) -> None:
        if not len(positions):
            return
        places = positions - self.vocabulary
        end = int(places.max()) + 1
        if end > len(self.ids):  # doubling: each id copied a bounded number of times
            grown = np.zeros(max(end, 2 * len(self.ids)), np.int32)
            grown[: len(self.ids)] = self.ids
            self.ids = grown
        self.ids[places] = ids
        self.end = max(self.end, end)

    def take(self, positions: np.ndarray) -> np.ndarray:
        return self.ids.take(positions)


def _sources(objective, examples, tokenizer: Tokenizer, inputs: tuple[str, ...]) -> Sources:
    """--provenance: the chain's documents; an objective that cuts a stream of documents has its
    stream record what each example is cut from."""
    kind = objective.provenance_kind()
    joined = kind != "tokens" or not hasattr(objective, "bos_id")  # the BOS the stream or the documents get
    bos = getattr(objective, "join_bos" if joined else "bos_id", None) is not None
    segments = objective.segments_per_example
    sources = Sources({name: i for i, name in enumerate(inputs)}, tokenizer, bos, kind, segments)
    if kind == "stream":
        examples.stream.sources = sources
    return sources
