"""Masked-LM selection and replacement (REFERENCE §3), vectorized over a batch of rows.

Selection works on *units*: tokens, or whole words (a word starts at a piece beginning with ``▁``
and continuation pieces join it). Random draws come in as arguments so that a per-row reference
loop fed the same draws gives the same answer.

    input_ids  [CLS  the  ▁cat  s  ▁sat  SEP]      candidates: not special
    units      [ -    1    2    2   3     - ]      whole words: "▁cat s" is one unit
    selected   [ 0    0    1    1   0     0 ]      -> labels [-100 -100 cat s -100 -100]
"""

from __future__ import annotations

import numpy as np

from . import IGNORE


def unit_ids(candidates: np.ndarray, unit_start: np.ndarray) -> np.ndarray:
    """(rows, L) 1-based unit number per candidate token, 0 for non-candidates.

    A unit starts at a candidate that has ``unit_start`` set or follows a non-candidate.
    """
    previous = np.zeros_like(candidates)
    previous[:, 1:] = candidates[:, :-1]
    starts = candidates & (unit_start | ~previous)
    return np.where(candidates, np.cumsum(starts, axis=1, dtype=np.int32), np.int32(0))


def select_units(
    units: np.ndarray,
    unit_keys: np.ndarray,
    mask_prob: float,
    exact: bool,
    row_lengths: np.ndarray,
    max_predictions: int | None,
) -> np.ndarray:
    """Boolean (rows, L) selection of whole units.

    ``unit_keys[r, u - 1]`` is the uniform key of unit u of row r (shape (rows, L) is enough).
    Bernoulli: a unit is selected when its key < ``mask_prob``. Exact (Google BERT's
    ``create_masked_lm_predictions``): the budget is ``min(max_predictions, max(1, round(row_length
    * mask_prob)))`` tokens; units are visited in order of increasing key, and a unit that would
    overflow the budget is skipped while later, shorter ones may still fit (budget 3, words of 2, 2
    and 1 tokens in key order: the first and the third are taken). For single-token units this
    selects exactly the budget, or every candidate when there are fewer.
    """
    rows, length = units.shape
    if not exact:  # each token looks up its unit's key
        return (units > 0) & (np.take_along_axis(unit_keys, np.maximum(units - 1, 0), axis=1) < mask_prob)
    else:
        # Tokens per unit (column u - 1 for unit u); unit 0, the non-candidates, is dropped.
        flat = (np.arange(rows, dtype=np.int64)[:, None] * (length + 1) + units).ravel()
        counts = np.bincount(flat, minlength=rows * (length + 1)).reshape(rows, length + 1)[:, 1:]
        present = counts > 0
        budget = np.maximum(1, np.round(row_lengths * mask_prob)).astype(np.int64)
        if max_predictions is not None:
            budget = np.minimum(budget, max_predictions)
        order = np.argsort(np.where(present, unit_keys, np.inf), axis=1, kind="stable")
        ok_in_order = _greedy_fill(np.take_along_axis(counts, order, axis=1), budget)
        chosen = np.zeros_like(present)
        np.put_along_axis(chosen, order, ok_in_order, axis=1)
    chosen = np.concatenate([np.zeros((rows, 1), dtype=bool), chosen], axis=1)
    return np.take_along_axis(chosen, units, axis=1)


def _greedy_fill(sizes: np.ndarray, budget: np.ndarray) -> np.ndarray:
    """BERT's scan over units in key order, taking each that still fits, done for all rows at once
    in rounds: a round takes the longest prefix of the units that fit the remaining budget; the
    first that overflows (and every unit after it) waits for the next round with what is left. The
    budget left shrinks every round that takes a unit, so rounds are few (a word's length, at most)."""
    remaining = budget.astype(np.int64).copy()
    waiting = sizes > 0
    taken = np.zeros_like(waiting)
    while True:
        fits = waiting & (sizes <= remaining[:, None])
        if not fits.any():
            return taken
        take = fits & (np.cumsum(np.where(fits, sizes, 0), axis=1) <= remaining[:, None])
        taken |= take
        waiting &= ~take
        remaining -= np.where(take, sizes, 0).sum(axis=1)


def draw_with_replacement(
    candidates: np.ndarray, budget: np.ndarray, position_keys: np.ndarray, action_keys: np.ndarray, mask_replace: float
) -> tuple[np.ndarray, np.ndarray]:
    """ELECTRA's ``pretrain_helpers.mask``: each row draws ``budget`` positions uniformly among its
    candidates *with replacement* (``tf.random.categorical``), so a position may be drawn twice and
    fewer distinct tokens are selected than the budget; each draw replaces with [MASK] when its action
    key < ``mask_replace``, and a position drawn several times is [MASK] if any of its draws says so.
    ``position_keys`` and ``action_keys`` are (rows, N >= max budget) uniforms. Returns (selected,
    becomes [MASK]), both (rows, L) booleans."""
    rows, _ = candidates.shape
    per_row = candidates.sum(axis=1)
    first_candidate = np.concatenate([[0], np.cumsum(per_row)[:-1]])
    flat_candidates = np.flatnonzero(candidates)  # row-major: row r's candidates are contiguous
    draws = (np.arange(position_keys.shape[1]) < budget[:, None]) & (per_row[:, None] > 0)
    rank = np.minimum((position_keys * per_row[:, None]).astype(np.int64), np.maximum(per_row - 1, 0)[:, None])
    positions = flat_candidates[(first_candidate[:, None] + rank)[draws]] if draws.any() else np.zeros(0, np.int64)
    selected = np.zeros(candidates.size, dtype=bool)
    selected[positions] = True
    to_mask = np.zeros(candidates.size, dtype=bool)
    to_mask[positions[action_keys[draws] < mask_replace]] = True
    return selected.reshape(candidates.shape), to_mask.reshape(candidates.shape)


def select_tokens(candidates: np.ndarray, keys: np.ndarray, mask_prob: float) -> np.ndarray:
    """Bernoulli selection of single tokens: the common case, without unit bookkeeping."""
    return candidates & (keys < mask_prob)


def replace_selected(
    input_ids: np.ndarray,
    selected: np.ndarray,
    action_keys: np.ndarray,
    random_tokens: np.ndarray,
    mask_id: int,
    mask_replace: float,
    random_replace: float,
) -> tuple[np.ndarray, np.ndarray]:
    """(masked input_ids, labels). ``action_keys`` and ``random_tokens`` hold one draw per *selected*
    token, in row-major order: a selected token becomes ``mask_id`` when its key < mask_replace, a
    random ordinary token when < mask_replace + random_replace, else stays. Labels hold the original
    id where selected and -100 elsewhere."""
    # Flat indices of the selected tokens (about 15 %): take/put on them beats boolean masks.
    where = np.flatnonzero(selected)
    original = input_ids.ravel().take(where)
    labels = np.full(input_ids.shape, IGNORE, dtype=np.int32)
    labels.ravel()[where] = original
    replacement = np.where(action_keys < mask_replace + random_replace, random_tokens, original)
    replacement = np.where(action_keys < mask_replace, mask_id, replacement)
    masked = input_ids.copy()
    masked.ravel()[where] = replacement
    return masked, labels
