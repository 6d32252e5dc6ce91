"""Multi-token prediction (DeepSeek-V3; Gloeckle et al., 2024): K heads, head k predicting the token
k places ahead.

The rows are exactly ``clm``'s (``input_ids``, ``segment_ids``, ``positions``, from the same packer);
one more column, ``heads_with_target``, says at each position how many heads have a target in the
same segment: ``min(K, tokens after t in its segment within the row)``, 0 on padding. Head k takes
its loss where ``heads_with_target >= k``, so a trainer builds every head's mask with one comparison
and its labels by shifting ``input_ids`` by k, and nothing is stored K times (K label rows would
multiply the output by K + 1 for what one small column says). A segment of n tokens gives head k
n - k targets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels.mtp import heads_with_target
from ..options import Options, option
from ..rows import ColumnSpec, Ragged, RowBatch
from .base import PartitionExamples, register
from .clm import CausalLM, _Documents


@dataclass(frozen=True)
class MtpOptions(Options):
    mtp_heads: int = option(
        2, "Prediction heads K: head k predicts the token k places ahead (DeepSeek-V3: 2).", minimum=1, maximum=64
    )


@register("mtp", "multi-token")
class MultiTokenPrediction(CausalLM):
    options_type = MtpOptions
    supervision = "next-token"
    row_step = True  # each token's heads with a target, from the segments

    def columns(self, packed: list[ColumnSpec]) -> list[ColumnSpec]:
        segments = next(c for c in packed if c.role == "segment_ids")
        depth = ColumnSpec(
            "heads_with_target",
            segments.kind,
            0,
            self.options.mtp_heads,
            "heads whose target (t + k) is in this token's segment; head k trains where >= k",
            role="target_depth",
        )
        return [*packed, depth]

    def partition_examples(self, partition_index: int) -> PartitionExamples:
        return _Heads(self.bos_id, self.eos_id, self.options.mtp_heads)


class _Heads(_Documents):
    def __init__(self, bos_id, eos_id, heads: int):
        super().__init__(bos_id, eos_id)
        self.heads = heads

    def rows(self, rows: RowBatch | None) -> RowBatch | None:
        if rows is None:
            return None
        segments = rows.columns["segment_ids"]
        if isinstance(segments, Ragged):
            depth = Ragged(heads_with_target(segments.values, segments.offsets, self.heads), segments.offsets)
        else:
            count, length = segments.shape
            offsets = np.arange(count + 1, dtype=np.int64) * length
            depth = heads_with_target(segments.reshape(-1), offsets, self.heads).reshape(count, length)
        return RowBatch({**rows.columns, "heads_with_target": depth}, rows.tokens, rows.padding, rows.documents)
