"""Sentence-pair examples (REFERENCE §4), vectorized across the documents of a batch.

Sentences travel as one flat token array with ``sentence_offsets``; documents as ranges of
sentences (``document_sentences``). Google BERT's ``create_instances_from_document`` walks each
document sentence by sentence; here all documents take one step at a time together (a step makes
one chunk in every unfinished document), so the Python loop runs once per chunk *position*, never
per sentence or per document.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ragged import gather_ranges


@dataclass
class Pairs:
    """Token ranges of the A and B segments of each example, in document order."""

    document: np.ndarray  # index of the document within the batch
    a_start: np.ndarray
    a_end: np.ndarray
    b_start: np.ndarray
    b_end: np.ndarray
    label: np.ndarray  # NSP: 1 = B is random (NotNext); SOP: 1 = swapped


def document_steps(starts: np.ndarray, stops: np.ndarray):
    """Walk all documents together: yields (step, active documents, position) until every
    document's sentences are used; the caller advances ``position[active]`` at each step."""
    position = starts.copy()
    step = 0
    while True:
        active = np.flatnonzero(position < stops)
        if not len(active):
            return
        yield step, active, position
        step += 1


def chunk_end(cumulative: np.ndarray, start: np.ndarray, target: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """First sentence index j > start where sentences [start, j) hold at least ``target`` tokens,
    or ``stop``. ``cumulative`` is the token offset of each sentence (len = sentences + 1)."""
    j = np.searchsorted(cumulative, cumulative[start] + target, side="left")
    return np.clip(j, start + 1, stop)


def truncate_pair(length_a: np.ndarray, length_b: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """Tokens to remove from A and from B so that A + B fit ``budget``, removing one token at a
    time from the longer side (B on ties), as Google BERT's ``truncate_seq_pair`` does."""
    excess = np.maximum(length_a + length_b - budget, 0)
    gap = np.abs(length_a - length_b)
    from_longer = np.minimum(excess, gap)
    rest = excess - from_longer  # removed alternately once the two are equal, B first
    a_longer = length_a > length_b
    remove_a = np.where(a_longer, from_longer, 0) + rest // 2
    remove_b = np.where(a_longer, 0, from_longer) + rest - rest // 2
    return remove_a, remove_b


def assemble_rows(
    tokens: np.ndarray, pairs: Pairs, seq_len: int, cls_id: int, sep_id: int, pad_id: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``[CLS] A [SEP] B [SEP]`` padded to ``seq_len`` (B may be empty: ``[CLS] A [SEP]``).

    Returns (input_ids, token_type_ids, attention_mask): type 0 for [CLS], A and the first [SEP],
    1 for B and its [SEP]. The A and B tokens of every row are gathered in row order and placed
    through a boolean mask of their cells, one pass over the rows; the special tokens go in by row.
    """
    rows = len(pairs.a_start)
    length_a = pairs.a_end - pairs.a_start
    length_b = pairs.b_end - pairs.b_start
    has_b = length_b > 0
    b_from = (length_a + 2)[:, None]
    total = 2 + length_a + np.where(has_b, length_b + 1, 0)
    column = np.arange(seq_len)
    in_b = (column >= b_from) & (column < b_from + length_b[:, None])
    body = ((column >= 1) & (column <= length_a[:, None])) | in_b
    starts = np.stack([pairs.a_start, pairs.b_start], axis=1).ravel()
    lengths = np.stack([length_a, length_b], axis=1).ravel()
    input_ids = np.full((rows, seq_len), pad_id, dtype=np.int32)
    input_ids[body] = gather_ranges(tokens, starts, lengths)
    row = np.arange(rows)
    input_ids[:, 0] = cls_id
    input_ids[row, length_a + 1] = sep_id
    input_ids[row[has_b], total[has_b] - 1] = sep_id
    attention = column < total[:, None]
    token_type_ids = (attention & (column >= b_from)).astype(np.int32)
    return input_ids, token_type_ids, attention.astype(np.int32)


def electra_first_segment(
    lengths: np.ndarray, counts: np.ndarray, first_target: np.ndarray, coins: np.ndarray
) -> np.ndarray:
    """ELECTRA's ``ExampleBuilder._create_example``, for many chunks at once: which sentences go to
    the first segment. ``lengths`` (chunks, S) holds each chunk's sentence lengths (``counts`` of them
    are real); a sentence goes to A when A is empty, when it keeps A under ``first_target``, or, while
    B is still empty and A under target, when its coin is < 0.5; else to B. A sentence that fits may
    join A after B has started, so A is not always a prefix of the chunk.

        target 40 -> first target 18; sentences of 10, 10, 3 tokens; the coin of the second says B:
        A = first + third (13 tokens), B = second (10)
    """
    chunks, width = lengths.shape
    first = np.zeros(chunks, dtype=np.int64)
    second = np.zeros(chunks, dtype=np.int64)
    in_first = np.zeros((chunks, width), dtype=bool)
    for i in range(width):  # sentence by sentence, every chunk at once
        real = i < counts
        size = lengths[:, i]
        crossing = (second == 0) & (first < first_target) & (coins[:, i] < 0.5)
        to_first = real & ((first == 0) | (first + size < first_target) | crossing)
        in_first[:, i] = to_first
        first += np.where(to_first, size, 0)
        second += np.where(real & ~to_first, size, 0)
    return in_first


def from_ranges(ranges: list[dict]) -> Pairs:
    """Pairs from each step's ranges, in document order and, within a document, chunk order."""
    if not ranges:
        empty = np.zeros(0, dtype=np.int64)
        return Pairs(empty, empty, empty, empty, empty, empty)
    keys = ("document", "a_start", "a_end", "b_start", "b_end", "label", "step")
    columns = {k: np.concatenate([r[k] for r in ranges]) for k in keys}
    order = np.lexsort((columns["step"], columns["document"]))  # document order, chunk order
    return Pairs(*(columns[k][order] for k in keys[:-1]))


def bert_pairs(cumulative, document_sentences, rng, seq_len, short_seq_prob, order_objective: bool, counters) -> Pairs:
    """NSP (``order_objective`` False) or SOP pairs for every document of a batch: BERT's
    ``create_instances_from_document``, one chunk of each document a step, all documents at once."""
    starts, stops = document_sentences[:-1], document_sentences[1:]
    budget = seq_len - 3
    short = rng["target"].random(len(starts)) < short_seq_prob
    targets = np.where(short, rng["target"].integers(2, max(budget, 2) + 1, len(starts)), budget)
    ranges = []
    for step, active, position in document_steps(starts, stops):
        p, stop, target = position[active], stops[active], targets[active]
        end = chunk_end(cumulative, p, target, stop)
        n = end - p
        a_sentences = np.where(n >= 2, rng["split"].integers(1, np.maximum(n, 2)), 1)
        coin = rng["coin"].random(len(active)) < 0.5
        a = (cumulative[p], cumulative[p + a_sentences])
        b = (a[1], cumulative[end])
        if order_objective:
            (a, b), label, keep = _sop_pair(a, b, n, coin, rng["split"])
            position[active] = end
        else:
            chunk = (active, target, a_sentences, end, n, coin, p)
            (a, b), label, keep, position[active] = _nsp_pair(a, b, chunk, cumulative, starts, stops, rng, counters)
        counters["chunks_without_pair"] += int(np.sum(~keep))
        ranges.append(
            {
                "document": active[keep],
                "a_start": a[0][keep],
                "a_end": a[1][keep],
                "b_start": b[0][keep],
                "b_end": b[1][keep],
                "label": label[keep],
                "step": np.full(int(keep.sum()), step),
            }
        )
    return _truncated(from_ranges(ranges), budget, rng["truncate"])


def _sop_pair(a, b, n, coin, split_rng):
    """ALBERT's sentence order: A then B, swapped where the coin says (label 1); a chunk of one
    sentence is cut in two at a random token."""
    single = n == 1
    length = b[1] - a[0]
    cut = a[0] + split_rng.integers(1, np.maximum(length, 2))
    a = (a[0], np.where(single, cut, a[1]))
    b = (np.where(single, cut, b[0]), b[1])
    keep = ~single | (length >= 2)
    swapped = (
        (np.where(coin, b[0], a[0]), np.where(coin, b[1], a[1])),
        (np.where(coin, a[0], b[0]), np.where(coin, a[1], b[1])),
    )
    return swapped, coin.astype(np.int64), keep


def _nsp_pair(a, b, chunk, cumulative, starts, stops, rng, counters):
    """BERT's next sentence: B the rest of the chunk, or (where the coin says, or the chunk is one
    sentence) sentences of another document (label 1), whose unused sentences go back."""
    active, target, a_sentences, end, n, coin, p = chunk
    documents = len(starts)
    is_random = ((n == 1) | coin) & (documents > 1)
    other = rng["document"].integers(0, max(documents - 1, 1), len(active))
    other = np.minimum(other + (other >= active), documents - 1)
    sentence = starts[other] + rng["document"].integers(0, np.maximum(stops[other] - starts[other], 1))
    random_end = chunk_end(cumulative, sentence, target - (a[1] - a[0]), stops[other])
    b = (np.where(is_random, cumulative[sentence], b[0]), np.where(is_random, cumulative[random_end], b[1]))
    keep = is_random | (n >= 2)  # a one-sentence chunk with no other document has no pair
    counters["single_sentence_negatives"] += int(np.sum(is_random & (n == 1)))
    return (a, b), is_random.astype(np.int64), keep, np.where(is_random, p + a_sentences, end)


def _truncated(pairs: Pairs, budget: int, rng) -> Pairs:
    """BERT's ``truncate_seq_pair``: tokens removed from the longer side, each from the front or the back
    by a coin."""
    remove_a, remove_b = truncate_pair(pairs.a_end - pairs.a_start, pairs.b_end - pairs.b_start, budget)
    front_a = rng.binomial(remove_a, 0.5)
    front_b = rng.binomial(remove_b, 0.5)
    pairs.a_start, pairs.a_end = pairs.a_start + front_a, pairs.a_end - (remove_a - front_a)
    pairs.b_start, pairs.b_end = pairs.b_start + front_b, pairs.b_end - (remove_b - front_b)
    return pairs
