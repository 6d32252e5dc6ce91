"""``verify``'s check of NVIDIA's packed SFT rows (``formats/nemo_packed.py``): each row's sequence
starts from 0, rising, inside the row; the loss mask 0 or 1 everywhere and 0 at each sequence's last
token (nothing follows it in its sequence to learn)."""

from __future__ import annotations

import numpy as np

from ..formats import Column


def check_packed_sequences(tokens: Column, mask: Column, starts: Column) -> list[str]:
    problems = []
    if not np.array_equal(tokens.lengths, mask.lengths):
        return ["loss_mask rows are not as long as the input_ids rows"]
    rows = len(starts.lengths)
    first = starts.values[starts.offsets[:-1][starts.lengths > 0]]
    if np.any(starts.lengths == 0) or np.any(first != 0):
        problems.append("a row's seq_start_id does not begin at 0")
    row_of = np.repeat(np.arange(rows), starts.lengths)
    rising = np.diff(starts.values) > 0
    same_row = row_of[1:] == row_of[:-1]
    if np.any(same_row & ~rising) or np.any(starts.values >= tokens.lengths[row_of]):
        problems.append("seq_start_id is not rising inside its row")
        return problems
    if np.any((mask.values != 0) & (mask.values != 1)):
        problems.append("loss_mask holds a value other than 0 and 1")
    ends = np.concatenate([starts.values[1:] - 1, [0]])  # each sequence's last token, in its row
    last_of_row = np.concatenate([~same_row, [True]])
    ends[last_of_row] = tokens.lengths[row_of[last_of_row]] - 1
    if len(ends) and np.any(mask.values[tokens.offsets[row_of] + ends] != 0):
        problems.append("loss_mask is 1 at a sequence's last token, where no next token is in its sequence")
    return problems
