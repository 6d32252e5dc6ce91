"""BERT's masking step (REFERENCE §3), shared by mlm, electra, nsp and sop: select tokens (per
token or per whole word, Bernoulli or an exact count), then 80/10/10 (configurable) [MASK] /
random ordinary token / unchanged. Special tokens are never selected."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels.masking import draw_with_replacement, replace_selected, select_tokens, select_units, unit_ids
from ..kernels.rng import derive_rng
from ..options import Options, option
from ..rows import RowBatch
from .common import check_probabilities, mask_prob_option

COUNTS = ("bernoulli", "exact")


@dataclass(frozen=True)
class MaskingOptions(Options):
    mask_prob: float = mask_prob_option()
    mask_replace: float = option(0.8, "Selected tokens that become [MASK].", minimum=0, maximum=1)
    random_replace: float = option(0.1, "Selected tokens that become a random ordinary token.", minimum=0, maximum=1)
    count: str = option(
        "bernoulli", "Bernoulli per token (HF), or exactly min(max-predictions, round(n*p)) (BERT).", choices=COUNTS
    )
    max_predictions: int | None = option(
        None, "Cap on selected tokens per row with --count exact.", minimum=1, maximum=2**24
    )
    whole_word: bool = option(False, "Select whole words (a word starts at a piece beginning with U+2581).")
    dupe_factor: int = option(1, "Write K differently-masked copies of each row.", minimum=1, maximum=1000)

    def __post_init__(self):
        super().__post_init__()
        check_probabilities(self.mask_prob, self.mask_replace, self.random_replace)


class Masker:
    """Vocabulary tables and the masking step."""

    def __init__(self, tokenizer, options: MaskingOptions, seed: int, name: str, with_replacement: bool = False):
        self.options, self.seed, self.name = options, seed, name
        self.with_replacement = with_replacement  # ELECTRA's draws (see draw_with_replacement)
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

    def mask(
        self, input_ids: np.ndarray, valid: np.ndarray, row_lengths: np.ndarray, partition: int, key: int, copy: int
    ):
        """(masked input_ids, labels) for (rows, L) ``input_ids``; ``valid`` marks non-padding."""
        o = self.options
        rows, length = input_ids.shape
        stream = f"{self.name}/copy{copy}"
        candidates = valid & ~self.special[input_ids]
        if self.with_replacement:
            return self._drawn_with_replacement(input_ids, candidates, row_lengths, f"{stream}", partition, key)
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
        return replace_selected(
            input_ids, selected, action_keys, random_tokens, self.mask_id, o.mask_replace, o.random_replace
        )

    def _drawn_with_replacement(self, input_ids, candidates, row_lengths, stream: str, partition: int, key: int):
        o = self.options
        budget = np.minimum(o.max_predictions, np.maximum(1, np.round(row_lengths * o.mask_prob))).astype(np.int64)
        keys = derive_rng(self.seed, partition, key, f"{stream}/draw").random((2, len(input_ids), o.max_predictions))
        selected, to_mask = draw_with_replacement(candidates, budget, keys[0], keys[1], o.mask_replace)
        action_keys = np.where(to_mask.ravel()[np.flatnonzero(selected)], 0.0, 1.0)
        return replace_selected(
            input_ids, selected, action_keys, np.zeros(len(action_keys), dtype=np.int32), self.mask_id, 1.0, 0.0
        )


def with_copies(rows: RowBatch, masker: Masker, partition: int, key: int, masked_columns) -> RowBatch:
    """``dupe_factor`` differently-masked copies of ``rows``, one copy after the other."""
    copies = []
    for copy in range(masker.options.dupe_factor):
        masked = masked_columns(copy)
        documents = rows.documents if copy == 0 else np.zeros_like(rows.documents)
        copies.append(RowBatch({**rows.columns, **masked}, rows.tokens, rows.padding, documents))
    if len(copies) == 1:
        return copies[0]
    return RowBatch.concat(copies)
