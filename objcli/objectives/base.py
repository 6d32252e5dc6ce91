"""What every objective implements, and the registry that names them.

An objective is built once per run in the main process, where it resolves the special tokens it
needs (so allocation order is fixed), and then once per partition in a worker, where it turns
tokenized documents into rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..errors import ObjcliError
from ..kernels.example_runs import ExampleRuns
from ..kernels.ragged import add_boundary_tokens
from ..kernels.rng import derive_rng
from ..options import Registry
from ..rows import ColumnSpec, Ragged, RowBatch
from .supply import DOCUMENTS_READ, Reads

if TYPE_CHECKING:
    from ..tokenizers import Tokenizer


@dataclass(frozen=True)
class ObjectiveContext:
    """What an objective knows of the run, resolved once by the setup (``recipe.objective_context``)
    from the configuration and the packer: no objective reads the configuration, the packer's name
    or the output format."""

    options: object  # the objective's own options (its ``options_type``)
    seq_len: int  # tokens per row
    row_length: int  # seq_len, or one more whose label is in the row (--row-tokens seq-len+1)
    seed: int
    bos: bool  # BOS before each document
    eos: bool  # EOS after each document
    pads_rows: bool  # the packer leaves room in rows that padding fills: a pad token is needed
    packed: bool  # several examples may share a row (any packer but none)
    provenance: bool = False  # --provenance: each row's spans are recorded
    value_types: tuple = ()  # (column, type) of value columns the records decide (``inferred_values``)


@dataclass(frozen=True)
class DocumentBatch:
    """Tokenized documents of one partition, in order."""

    texts: list[str]
    tokens: np.ndarray  # int32, flat
    offsets: np.ndarray  # int64, len(texts) + 1
    first_document: int  # index within the partition of the first document here
    batch_index: int  # position of this batch within the partition
    encode: Callable[[list[str]], tuple[np.ndarray, np.ndarray]] | None = None  # the run's tokenizer
    # A per-sentence token store's (tokens, sentence offsets, sentences per document): no text to split.
    sentences: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    # What a store's kind keeps for the objective that reads it (``KindRecords.batch``): a chat store's, each
    # conversation's token offsets, its record, each supervised span's conversation, first and last token,
    # and the records it could not render; a pair store's, ``preference_tokens.EncodedPairs``' fields.
    records: Any = None

    def ids_of(self, values: np.ndarray) -> np.ndarray:
        """The ids of ``values`` taken from ``tokens``: in a plan run, store positions (``formats/row_plan.py``)
        made ids again, for an objective whose examples read some tokens' values (``Objective.plan_reads_ids``);
        elsewhere the values themselves."""
        ids_of = getattr(self.texts, "ids_of", None)
        return values if ids_of is None else ids_of(values)

    def sentence_tokens(self, mode: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every sentence's tokens (flat), each sentence's token offsets, and each document's count of
        sentences: split by ``mode`` and encoded, or as a per-sentence token store kept them."""
        if self.sentences is not None:
            return self.sentences
        from .sentences import split_batch

        sentences, counts = split_batch(self.texts, mode)
        tokens, cumulative = self.encode(sentences)
        return tokens, cumulative, counts


def document_examples(batch: DocumentBatch, bos_id: int | None, eos_id: int | None) -> RowBatch:
    """The documents of a batch as examples for a packer: ``input_ids`` with BOS/EOS added."""
    tokens, offsets = add_boundary_tokens(batch.tokens, batch.offsets, bos_id, eos_id)
    count = len(offsets) - 1
    none = np.zeros(count, dtype=np.int64)
    return RowBatch(
        {"input_ids": Ragged(tokens, offsets)},
        tokens=np.diff(offsets),
        padding=none,
        documents=np.ones(count, dtype=np.int64),
    )


class PartitionExamples:
    """An objective's work on one partition: documents in, examples out (``examples``), and,
    for objectives that work on packed rows (BERT masking, Megatron-style FIM), a row step after
    the packer (``rows``)."""

    counters: Counter  # counts for the manifest; "skipped:<reason>" entries: documents the objective dropped
    joins_batches: ClassVar[bool] = False  # example_runs of batches joined = theirs in turn (with examples' records)

    def __init__(self, objective: Objective | None = None, partition: int = 0):
        self.o = objective
        self.partition = partition
        self.counters = Counter()
        self.first_skipped: dict[str, str] = {}  # reason -> where its first record is (file:line)
        self.rows_done = 0  # packed rows before the batch in hand: what a row step keys its generators to

    def note_skip(self, reason: str, batch: DocumentBatch, k: int, detail: str = "") -> None:
        """Where the first record skipped for ``reason`` is: its file and line (records are read with
        their origin for objectives that read whole records), else its place in the partition; and
        ``detail`` where the reason is not enough (the image that could not be read)."""
        if reason in self.first_skipped:
            return
        text = batch.texts[k] if isinstance(batch.texts, list) else None
        record = getattr(text, "record", None)
        where = f"partition {self.partition}, document {batch.first_document + k:,}"
        where = f"{text.file}:{record + 1}" if record is not None else where
        self.first_skipped[reason] = f"{where} ({detail})" if detail else where

    def rng(self, key: int, step: str) -> np.random.Generator:
        """The generator of one random step, keyed to the data's position (seed, partition, ``key``: the
        first example or row of a batch, and the step's name under the objective's), never to the order
        partitions run in."""
        return derive_rng(self.o.context.seed, self.partition, key, f"{self.o.name}/{step}")

    def examples(self, batch: DocumentBatch) -> RowBatch | None:
        raise NotImplementedError

    def finish(self) -> RowBatch | None:
        """Examples held back until the partition ends (a last, short chunk)."""
        return None

    def rows(self, rows: RowBatch | None) -> RowBatch | None:
        return rows

    def example_runs(self, batch: DocumentBatch) -> ExampleRuns | None:
        """The batch's examples as runs, for a plan from lengths (``Objective.plans_lengths``): its documents
        (``batch.texts.firsts``: their first store positions) with the objective's BOS and EOS around them."""
        return ExampleRuns.of_documents(batch.texts.firsts, np.diff(batch.offsets), self.o.bos_id, self.o.eos_id)


class Objective:
    """What every objective declares. Required: ``@register(NAME)`` (its ``name``), ``options_type``,
    ``example_columns()`` (each column with its role) and ``partition_examples()`` (a ``PartitionExamples``).
    Everything else is optional, each part with the default declared below, in groups:

    - its examples: ``examples_are_documents``, ``supervision``, ``next_token_rows``, ``labels_are_inputs``,
      ``pads_sequences``, ``segments_per_example``, ``row_step`` (a step after the packer), ``packers()``;
    - what it reads: ``reads()`` (the supply it needs: ``supply.py``), ``encodes_rows()``, ``inferred_values``,
      ``store_refusal()``;
    - planning (``--format plan``): ``plans_rows`` (examples and rows only move tokens, so a run over a store
      writes positions and ``objcli.reading.Rows`` makes the rows on read; a row step keys its draws to
      ``PartitionExamples.rows_done``, the rows made before the batch, as the plan's reader does),
      ``plans_lengths`` (its examples as runs: rows from their lengths alone), ``plan_reads_ids``,
      ``plan_counts_rows``, ``plan_refusal()``;
    - what the run says of it: ``warnings``, ``boundaries``, ``uses_seq_len``, ``seq_len_bounds``,
      ``records_hint``, ``setup_warnings()``, ``provenance`` (how ``--provenance`` spans its examples)."""

    name: ClassVar[str]
    options_type: ClassVar[type]
    default_eos: ClassVar[bool] = True  # EOS between documents unless --eos/--no-eos says
    examples_are_documents: ClassVar[bool] = False  # documents (packers join, cut and split them), or finished
    # What carries loss, for ``stats``: "labels" (labels != -100), "next-token" (L - 1 per
    # segment), "all-tokens" (ELECTRA's discriminator), "example-labels" (one class per row),
    # "pairs" (contrastive views: the loss compares rows, no token carries it).
    supervision: ClassVar[str] = "labels"
    # Rows whose labels are their own tokens shifted (the trainer shifts): --row-tokens applies.
    next_token_rows: ClassVar[bool] = False
    # Labels are, position by position, the token itself or -100 (``verify`` checks it).
    labels_are_inputs: ClassVar[bool] = False
    took_pack: ClassVar[bool] = False  # accepted the old --pack flag
    # Its packed examples may be padded inside their sequences (--pad-to-multiple): whole examples whose
    # labels keep every token out of the loss that is not learned (the padding: -100), and no row step.
    pads_sequences: ClassVar[bool] = False
    # --provenance: "tokens" where examples are the batch's documents, one each, as tokenized (BOS and
    # EOS around them), so a segment's span follows from its tokens; "stream" where each example is cut
    # from the documents joined (objectives/stream.py: the stream records what; its spans are the
    # original text the example was made from); "documents" where each example is made from whole
    # documents rewritten (its spans: those documents; the ``DOCUMENT`` column names them, one an example
    # or, ragged, several for unpacked rows of pairs and views); None: not recorded (refused).
    provenance: ClassVar[str | None] = None
    # Counters that call for a warning when a run ends with any: counter -> message, formatted with
    # {count} (the run's total). The run says them; nothing outside the objective names its counters.
    warnings: ClassVar[dict[str, str]] = {}
    uses_seq_len: ClassVar[bool] = True  # rows are bounded by --seq-len (RL prompts are not: a rollout grows them)
    seq_len_bounds: ClassVar[str] = ""  # what --seq-len bounds, where it is not a row (said with its default)
    # What a run whose every record was skipped is told to check (objectives that read records).
    records_hint: ClassVar[str] = "check the input format and --text-key against the first skipped record"
    # What the summary says bounds a row's documents; None: BOS/EOS as configured.
    boundaries: ClassVar[str | None] = None
    pad_id: int | None = None  # the pad token the packer uses (None: the packer never pads)
    # Value columns whose type the records decide (``value_types.py``): the run's first pass reads every
    # record's ``record_values`` and hands the columns' common types back in ``context.value_types``.
    inferred_values: ClassVar[tuple[str, ...]] = ()
    # The segments each packed example becomes after the row step (a preference pair: its two sides):
    # --provenance gives each of them its example's span.
    segments_per_example: int = 1
    # Its partition's examples have a row step (``PartitionExamples.rows``) after the packer.
    row_step: ClassVar[bool] = False
    # Hidden columns (``__`` names) its row step reads: a plan keeps them, as the run's rows carry them to it.
    row_step_reads: ClassVar[tuple[str, ...]] = ()
    # Its examples and packed rows only move tokens (a row step may read them: it runs on read), so a
    # run over a store can write its plan instead of its rows (``--format plan``, formats/row_plan.py).
    plans_rows: ClassVar[bool] = False
    # Its examples read some tokens' values (BART's word starts): a plan run reads the store's ids besides their
    # positions, and the examples find a value's id with ``DocumentBatch.ids_of``.
    plan_reads_ids: ClassVar[bool] = False
    # Its row step changes how many tokens each row holds (FIM re-encodes pieces): a plan run reads the ids
    # too and makes each batch's rows, to record their counts (and the step's counters) as a run writing them.
    plan_counts_rows: ClassVar[bool] = False
    # Its examples can be given as runs (``PartitionExamples.example_runs``; by default its documents with
    # ``bos_id``/``eos_id`` around them): a plan packs them from their lengths, no array a token
    # (``packing/concat.ConcatPlanner``, ``packing/best_fit.BestFitPlanner``). "chunks": its examples are the
    # stream's chunks of ``raw_length`` (span corruption): its ``chunk_counts`` and ``keeps_tail`` say their rows.
    plans_lengths: ClassVar[bool | str] = False
    # Its work holds the GIL (many array calls a batch): a run over stores forks however few its partitions.
    holds_gil: ClassVar[bool] = False

    def __init__(self, context: ObjectiveContext, tokenizer: Tokenizer) -> None:
        self.context = context
        self.options = context.options

    def resolve_document_tokens(self, tokenizer) -> None:
        """BOS and EOS around each document as the run says, and the pad token where the packer pads:
        what objectives whose examples are documents resolve (the ids are allocated in this order)."""
        self.bos_id = tokenizer.resolve("bos") if self.context.bos else None
        self.eos_id = tokenizer.resolve("eos") if self.context.eos else None
        self.pad_id = tokenizer.resolve("pad") if self.context.pads_rows else None

    def store_refusal(self, columns: set[str]) -> str | None:
        """Why a token store with these columns cannot give this run what it reads (one line), or None: a
        store made before a column this run needs was kept."""
        return None

    def plan_refusal(self) -> str | None:
        """Why a plan cannot stand for this run's rows (one clause), or None."""
        if self.plans_rows:
            return None
        return f"{self.name} reads its tokens' values to make its examples, so its rows are written, not planned"

    @classmethod
    def encodes_rows(cls, options) -> bool:
        """Whether it encodes text of its own even from token inputs (FIM re-encodes the pieces it
        decodes): such a run chooses its engine as a text run does, never settling for the reference."""
        return False

    @classmethod
    def reads(cls, options) -> Reads:
        """What the objective reads with these options (``supply.py``): documents' tokens unless it says
        otherwise; the setup checks every input gives it (``run/fitness.py``), the tests choose its inputs by it.
        The one declaration of its needs: whether it reads whole records or tokenizes pieces of its own
        follow from it (``Reads.records``, ``Reads.tokenizes_itself``)."""
        return DOCUMENTS_READ

    @property
    def tokenizes_itself(self) -> bool:
        return self.reads(self.options).tokenizes_itself

    def record_values(self, record: str) -> dict | None:
        """One record's values of the ``inferred_values`` columns (None: the record gives no row)."""
        raise NotImplementedError

    def setup_warnings(self) -> list[str]:
        """What the setup says once before a run when the objective is built (a chat template writing
        markers the tokenizer lacks); none by default."""
        return []

    def identity_files(self) -> dict[str, Path]:
        """Files the objective reads (a chat template), by what they are: part of the run's identity."""
        return {}

    @classmethod
    def provenance_of(cls, options) -> str | None:
        """How --provenance is recorded with these options (see ``provenance``)."""
        return cls.provenance

    def provenance_kind(self) -> str | None:
        """How this run records it (where the packer changes how examples are made)."""
        return self.provenance_of(self.options)

    @classmethod
    def compiled_kernels(cls, options) -> tuple[str, ...]:
        """The compiled (numba) kernels a run calls, which a fork server loads once for every worker
        (``executors/preload.py``): the prose sentence splitter, for every objective that takes the
        shared ``--sentences`` option (``sentences.py``) set to prose."""
        return ("sentences",) if getattr(options, "sentences", None) == "prose" else ()

    @classmethod
    def packers(cls, options) -> tuple[str, ...]:
        """Packers that make sense for these options; the first is the default."""
        return ("none",)

    @classmethod
    def keeps_remainder(cls, packing: str, options) -> str | None:
        """The option that keeps a partition's partial last row (padded) instead of dropping it,
        as the summary and warnings name it; None where nothing keeps it. Whatever this names is
        accepted by the run and keeps the tokens (tests/project/test_hints.py follows it)."""
        return "--remainder pad" if packing == "concat" else None

    @classmethod
    def legacy_pack(cls, options) -> str:
        """The packer the old ``--pack`` flag meant: the packer after ``none`` for the objectives
        that took it (prefix-lm, bart), an error for the rest."""
        if not cls.took_pack:
            raise ObjcliError(f"--pack: {cls.name} takes --packing {' or '.join(cls.packers(options))}")
        return cls.packers(options)[1]

    def example_columns(self) -> list[ColumnSpec]:
        raise NotImplementedError

    def columns(self, packed: list[ColumnSpec]) -> list[ColumnSpec]:
        """The written columns, given the packer's (objectives with a row step add theirs)."""
        return packed

    def partition_examples(self, partition_index: int) -> PartitionExamples:
        raise NotImplementedError


def remainder_hint(config: dict) -> str | None:
    """The option that keeps the dropped partial rows of a run (its configuration as the manifest
    records it), or None: nothing keeps them, or the run already gave it."""
    objective = REGISTRY.named(config["objective"])
    try:
        options = objective.options_type(**config.get("objective_options", {}))
    except (TypeError, AttributeError, ObjcliError):  # options as JSON (UL2's denoisers): what decides is plain
        options = objective.options_type()
    hint = objective.keeps_remainder(config.get("packing", "none"), options)
    if hint is None:
        return None
    flag, value = hint.removeprefix("--").split(" ", 1)
    key = flag.replace("-", "_")
    given = config.get(key, config.get("objective_options", {}).get(key))
    return None if given == value else hint


# Objectives by name, each in a module of this package (``objectives/__init__.py`` imports them all).
REGISTRY: Registry[type[Objective]] = Registry("objective", order=lambda objective: objective.name)
register = REGISTRY.register
