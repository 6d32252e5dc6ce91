"""BERT masked LM, whole-word masking (REFERENCE §3), done once, offline.

Rows are packed as ``clm`` packs them, ``--packing concat`` (documents joined with EOS and cut
into rows) or ``best-fit`` (rows built from whole documents, only those longer than a row split,
the rest of a row padding), with ``segment_ids`` and ``positions`` per row, then masked: ``input_ids`` holds the masked row, ``labels`` the
original id where a token was selected and -100 elsewhere. Special tokens (control pieces of the
model and every allocated special) are never selected; random replacements are drawn from
ordinary tokens only. ``--dupe-factor K`` writes K differently-masked copies of each row, copy
after copy within each batch of rows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from ..errors import ObjcliError
from ..kernels.masking import IGNORE, replace_selected, select_tokens, select_units, unit_ids
from ..rng import derive_rng
from ..rows import ColumnSpec, RowBatch
from .base import DocumentBatch, register
from .clm import make_packer

COUNTS = ("bernoulli", "exact")


MLM_PACKINGS = ("concat", "best-fit")


def check_probabilities(mask_prob: float, mask_replace: float, random_replace: float) -> None:
    for name, value in (("--mask-prob", mask_prob), ("--mask-replace", mask_replace), ("--random-replace", random_replace)):
        if not 0 <= value <= 1:
            raise ObjcliError(f"{name} {value}: must be between 0 and 1")
    if mask_prob == 0:
        raise ObjcliError("--mask-prob 0: nothing would be predicted; use a probability above 0")
    if mask_replace + random_replace > 1:
        raise ObjcliError(
            f"--mask-replace {mask_replace} + --random-replace {random_replace} = {mask_replace + random_replace:g}: "
            "must not exceed 1 (the rest stay unchanged)"
        )


@dataclass(frozen=True)
class MlmOptions:
    mask_prob: float = 0.15
    mask_replace: float = 0.8
    random_replace: float = 0.1
    count: str = "bernoulli"
    max_predictions: int | None = None
    whole_word: bool = False
    dupe_factor: int = 1

    def __post_init__(self):
        check_probabilities(self.mask_prob, self.mask_replace, self.random_replace)
        if self.count not in COUNTS:
            raise ObjcliError(f"--count {self.count}: choose one of {', '.join(COUNTS)}")
        if self.max_predictions is not None and self.max_predictions < 1:
            raise ObjcliError(f"--max-predictions {self.max_predictions}: must be at least 1")
        if self.dupe_factor < 1:
            raise ObjcliError(f"--dupe-factor {self.dupe_factor}: must be at least 1")


@dataclass(frozen=True)
class MaskedLmOptions(MlmOptions):
    """The ``mlm`` objective's options: the masking ones, plus how rows are packed."""

    packing: str = "concat"
    pack_window: int = 4_000_000

    def __post_init__(self):
        super().__post_init__()
        if self.packing not in MLM_PACKINGS:
            raise ObjcliError(f"--packing {self.packing}: mlm packs with one of {', '.join(MLM_PACKINGS)}")
        if self.pack_window < 1:
            raise ObjcliError(f"--pack-window {self.pack_window}: must be at least 1 token")


class Masker:
    """Vocabulary tables and the masking step shared by mlm, electra, nsp and sop."""

    def __init__(self, tokenizer, options: MlmOptions, seed: int, name: str):
        self.options, self.seed, self.name = options, seed, name
        self.mask_id = tokenizer.resolve("mask", "[MASK]")
        self.tokenizer = tokenizer

    def finalize(self, tokenizer) -> None:
        """Build the lookup tables once every special token is resolved."""
        vocab, total = tokenizer.vocab_size, tokenizer.total_vocab_size
        self.special = np.ones(total, dtype=bool)  # every allocated special is special too
        self.special[:vocab] = tokenizer.control_mask()
        self.ordinary = tokenizer.ordinary_ids()
        self.word_start = np.zeros(total, dtype=bool)
        self.word_start[:vocab] = tokenizer.word_start_mask()

    def mask(self, input_ids: np.ndarray, valid: np.ndarray, row_lengths: np.ndarray, partition: int, key: int, copy: int):
        """(masked input_ids, labels) for (rows, L) ``input_ids``; ``valid`` marks non-padding."""
        o = self.options
        rows, length = input_ids.shape
        stream = f"{self.name}/copy{copy}"
        candidates = valid & ~self.special[input_ids]
        select_keys = derive_rng(self.seed, partition, key, f"{stream}/select").random((rows, length), dtype=np.float32)
        if o.whole_word or o.count == "exact":
            unit_start = self.word_start[input_ids] if o.whole_word else np.ones_like(candidates)
            units = unit_ids(candidates, unit_start)
            selected = select_units(units, select_keys, o.mask_prob, o.count == "exact", row_lengths, o.max_predictions)
        else:
            selected = select_tokens(candidates, select_keys, o.mask_prob)
        # One draw per selected token only: most tokens are never selected.
        count = int(selected.sum())
        action_keys = derive_rng(self.seed, partition, key, f"{stream}/action").random(count, dtype=np.float32)
        random_tokens = self.ordinary[
            derive_rng(self.seed, partition, key, f"{stream}/random-token").integers(len(self.ordinary), size=count)
        ]
        return replace_selected(input_ids, selected, action_keys, random_tokens, self.mask_id, o.mask_replace, o.random_replace)


def with_copies(rows: RowBatch, masker: Masker, partition: int, key: int, masked_columns) -> RowBatch:
    """``dupe_factor`` differently-masked copies of ``rows``, one copy after the other."""
    copies = []
    for copy in range(masker.options.dupe_factor):
        masked = masked_columns(copy)
        documents = rows.documents if copy == 0 else np.zeros_like(rows.documents)
        copies.append(RowBatch({**rows.columns, **masked}, rows.tokens, rows.padding, documents))
    if len(copies) == 1:
        return copies[0]
    return RowBatch(
        {name: np.concatenate([c.columns[name] for c in copies]) for name in copies[0].columns},
        np.concatenate([c.tokens for c in copies]),
        np.concatenate([c.padding for c in copies]),
        np.concatenate([c.documents for c in copies]),
    )


@register("mlm")
class MaskedLM:
    options_type = MaskedLmOptions
    default_eos = True

    def __init__(self, config, tokenizer):
        self.config = config
        self.options: MaskedLmOptions = config.objective_options
        self.bos_id = tokenizer.resolve("bos") if config.bos else None
        self.eos_id = tokenizer.resolve("eos") if config.eos else None
        self.pad_id = tokenizer.resolve("pad") if self.options.packing == "best-fit" else None
        self.masker = Masker(tokenizer, self.options, config.seed, "mlm")
        self.masker.finalize(tokenizer)
        self.vocab_size = tokenizer.total_vocab_size

    def columns(self) -> list[ColumnSpec]:
        top, seq_len = self.vocab_size - 1, self.config.seq_len
        return [
            ColumnSpec("input_ids", "fixed", 0, top, "masked token ids"),
            ColumnSpec("labels", "fixed", IGNORE, top, "original id where selected, -100 elsewhere"),
            ColumnSpec("segment_ids", "fixed", 0, seq_len, "1-based document segment per row"),
            ColumnSpec("positions", "fixed", 0, seq_len - 1, "position within the segment"),
        ]

    def partition_transform(self, partition_index: int):
        return _MlmPartition(self, partition_index)


class _MlmPartition:
    def __init__(self, objective: MaskedLM, partition: int):
        self.o = objective
        self.partition = partition
        o = objective.options
        self.packer = make_packer(o.packing, objective.config.seq_len, objective.bos_id, objective.eos_id,
                                  objective.pad_id, o.pack_window)
        self.counters: Counter = self.packer.counters
        self.rows_done = 0

    def process(self, batch: DocumentBatch) -> RowBatch | None:
        return self._masked(self.packer.process(batch))

    def finish(self) -> RowBatch | None:
        return self._masked(self.packer.finish())  # concat drops the remainder (counted); best-fit packs it

    def _masked(self, rows: RowBatch | None) -> RowBatch | None:
        if rows is None:
            return None
        key = self.rows_done
        self.rows_done += rows.num_rows
        input_ids = rows.columns["input_ids"]
        valid = rows.columns["segment_ids"] > 0

        def masked(copy):
            ids, labels = self.o.masker.mask(input_ids, valid, rows.tokens, self.partition, key, copy)
            self.counters["tokens_selected"] += int(np.sum(labels != IGNORE))
            return {"input_ids": ids, "labels": labels}

        return with_copies(rows, self.o.masker, self.partition, key, masked)
