"""Contrastive pairs' views (``objectives/contrastive.py``): a batch cut into units (sentence windows
or blocks of whole sentences that fit a row), and each kind of pair built from them: crops of one unit,
the same unit twice (dropout), a sentence and its context (ICT), neighbouring units (adjacent)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels.contrastive import crop, rank_within_groups
from ..kernels.pairs import document_steps
from ..kernels.ragged import range_indices


@dataclass
class Units:
    """Units of one batch: the token array, and per unit its range, document and sentences."""

    tokens: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    documents: np.ndarray
    sentence_starts: np.ndarray | None = None  # ict: token offsets of each unit's sentences, flat
    sentence_units: np.ndarray | None = None  # ict: the unit of each sentence


def single_views(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    zeros = np.zeros_like(starts)
    return np.stack([starts, lengths, zeros, zeros], axis=1).astype(np.int64)


def capped(views: np.ndarray, room: int) -> np.ndarray:
    """Views cut to ``room`` tokens (a window of long sentences)."""
    first = np.minimum(views[:, 1], room)
    return np.stack([views[:, 0], first, views[:, 2], np.minimum(views[:, 3], room - first)], axis=1)


def windows(tokens, cumulative, document_sentences, size: int) -> Units:
    counts = np.diff(document_sentences)
    per_document = -(-counts // size)
    documents = np.repeat(np.arange(len(counts)), per_document)
    rank = np.arange(len(documents)) - np.repeat(np.concatenate([[0], np.cumsum(per_document)[:-1]]), per_document)
    first = document_sentences[:-1][documents] + rank * size
    last = np.minimum(first + size, document_sentences[1:][documents])
    return Units(tokens, cumulative[first], cumulative[last] - cumulative[first], documents)


def blocks(tokens, cumulative, document_sentences, room: int) -> Units:
    """Greedy blocks of whole sentences of at most ``room`` tokens (a longer sentence alone)."""
    starts, stops = document_sentences[:-1], document_sentences[1:]
    firsts, lasts, documents = [], [], []
    for _, active, position in document_steps(starts, stops):
        p = position[active]
        end = np.searchsorted(cumulative, cumulative[p] + room, side="right") - 1
        end = np.clip(end, p + 1, stops[active])
        firsts.append(p)
        lasts.append(end)
        documents.append(active)
        position[active] = end
    first, last, document = (np.concatenate(x) if x else np.zeros(0, np.int64) for x in (firsts, lasts, documents))
    order = np.lexsort((first, document))
    first, last, document = first[order], last[order], document[order]
    sentences = last - first
    sentence_units = np.repeat(np.arange(len(first)), sentences)
    sentence_index = range_indices(first, sentences)
    return Units(
        tokens,
        cumulative[first],
        cumulative[last] - cumulative[first],
        document,
        cumulative[sentence_index],
        sentence_units,
    )


def _crop_pairs(part, units: Units, key: int):
    o = part.o.options
    repeat = np.repeat(np.arange(len(units.starts)), o.pairs_per_document)
    starts, lengths = units.starts[repeat], units.lengths[repeat]
    views = []
    for name in ("anchor", "positive"):
        rng = part.rng(key, f"crop/{name}")
        views.append(
            single_views(
                *crop(starts, lengths, rng.random(len(repeat)), rng.random(len(repeat)), o.min_crop, o.max_crop)
            )
        )
    # A span is an anchor once: a repeated (unit, start, length) anchor is dropped.
    _, first = np.unique(np.stack([repeat, views[0][:, 0], views[0][:, 1]], axis=1), axis=0, return_index=True)
    keep = np.sort(first)
    return views[0][keep], views[1][keep], repeat[keep]


def _dropout_pairs(part, units: Units, key: int):
    view = single_views(units.starts, units.lengths)
    return view, view.copy(), np.arange(len(units.starts))


def _ict_pairs(part, units: Units, key: int):
    o = part.o.options
    sentence_ends = np.append(units.sentence_starts[1:], 0)
    last_of_unit = np.append(units.sentence_units[1:] != units.sentence_units[:-1], True)
    sentence_ends[last_of_unit] = (units.starts + units.lengths)[units.sentence_units[last_of_unit]]
    per_unit = np.bincount(units.sentence_units, minlength=len(units.starts))
    rng = part.rng(key, "ict")
    rank = rank_within_groups(units.sentence_units, rng.random(len(units.sentence_units)))  # per unit, by key
    chosen = np.flatnonzero((rank < o.pairs_per_document) & (per_unit[units.sentence_units] >= 2))
    unit = units.sentence_units[chosen]
    s_start, s_end = units.sentence_starts[chosen], sentence_ends[chosen]
    anchors = single_views(s_start, s_end - s_start)
    cut = rng.random(len(chosen)) >= o.ict_keep
    u_start, u_end = units.starts[unit], units.starts[unit] + units.lengths[unit]
    positives = np.where(
        cut[:, None],
        np.stack([u_start, s_start - u_start, s_end, u_end - s_end], axis=1),
        single_views(u_start, u_end - u_start),
    )
    part.counters["ict_sentence_cut"] += int(cut.sum())
    return anchors, positives, unit


def _adjacent_pairs(part, units: Units, key: int):
    o = part.o.options
    has_next = np.append(units.documents[1:] == units.documents[:-1], False)
    candidates = np.flatnonzero(has_next)
    documents = units.documents[candidates]
    tokens = np.bincount(units.documents, weights=units.lengths, minlength=int(units.documents.max(initial=0)) + 1)
    quota = o.pairs_per_document * np.maximum(1, -(-tokens.astype(np.int64) // part.o.room))
    rank = rank_within_groups(documents, part.rng(key, "adjacent").random(len(candidates)))
    anchor = candidates[rank < quota[documents]]
    room = part.o.room
    return (
        capped(single_views(units.starts[anchor], units.lengths[anchor]), room),
        capped(single_views(units.starts[anchor + 1], units.lengths[anchor + 1]), room),
        anchor,
    )


PAIR_BUILDERS = {"crop": _crop_pairs, "ict": _ict_pairs, "adjacent": _adjacent_pairs, "dropout": _dropout_pairs}
