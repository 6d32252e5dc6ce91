"""Examples as runs: what a plan's packer works from (``packing/best_fit.BestFitPlanner``,
``packing/concat.ConcatPlanner``). An example is its length and, for each token column, runs
(first value, step 0 or 1, length) that cover it end to end: a document with BOS and EOS is three runs
(``of_documents``), a conversation's labels a run a supervised stretch and one between (``in_ranges``).
A packer cuts its pieces out of them (``cut``), so no array has an element a token."""

from __future__ import annotations

import numpy as np

from .ragged import lengths_to_offsets

Runs = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # (example, first value, step, length) a run


class ExampleRuns:
    """A batch's examples: their lengths, the documents each counts as starting, and each column's runs in
    order (an example of no tokens has none). Documents (``of_documents``) keep their first values and
    lengths until their runs are asked for, and join as such (``concat``): a planner that gathers a window
    or a partition of batches makes their runs once, not a batch at a time."""

    def __init__(
        self,
        lengths: np.ndarray,
        documents: np.ndarray,
        columns: dict[str, Runs] | None = None,
        made_of=None,
        records: np.ndarray | None = None,
    ):
        self.lengths = lengths  # int64, an example
        self.documents = documents  # int64, an example: 1 where it starts a document (a record at its first example)
        self._columns = columns
        self._made_of = made_of  # documents': (first values, stored lengths, BOS id, EOS id)
        self.records = records  # where known: each example's document in its batch, not decreasing

    def slice(self, lo: int, hi: int) -> ExampleRuns:
        """Examples ``lo:hi`` (their runs: views), as if made alone."""
        if self._columns is None:
            made_of = (self._made_of[0][lo:hi], self._made_of[1][lo:hi], *self._made_of[2:])
            return ExampleRuns(self.lengths[lo:hi], self.documents[lo:hi], made_of=made_of)
        columns = {}
        for name, (example, values, steps, lengths) in self._columns.items():
            a, b = np.searchsorted(example, [lo, hi]).tolist()  # a column's runs come example by example
            columns[name] = (example[a:b] - lo, values[a:b], steps[a:b], lengths[a:b])
        return ExampleRuns(self.lengths[lo:hi], self.documents[lo:hi], columns)

    @property
    def columns(self) -> dict[str, Runs]:
        if self._columns is None:
            self._columns = {"input_ids": _document_runs(*self._made_of)}
        return self._columns

    @classmethod
    def of_documents(cls, firsts: np.ndarray, stored: np.ndarray, bos_id: int | None, eos_id: int | None):
        """Documents (``firsts``: each one's first token's value, its values counting up from it; ``stored``:
        their lengths) as examples: BOS, the document's values, EOS."""
        stored = stored.astype(np.int64)
        around = (bos_id is not None) + (eos_id is not None)
        made_of = (firsts.astype(np.int64), stored, bos_id, eos_id)
        return cls(stored + around, np.ones(len(stored), np.int64), made_of=made_of)

    @classmethod
    def concat(cls, parts: list[ExampleRuns]) -> ExampleRuns:
        lengths = np.concatenate([p.lengths for p in parts])
        documents = np.concatenate([p.documents for p in parts])
        kinds = {p._made_of[2:] if p._made_of is not None else None for p in parts}
        if len(kinds) == 1 and None not in kinds:  # documents with the same BOS and EOS: joined as such
            made_of = tuple(np.concatenate([p._made_of[k] for p in parts]) for k in (0, 1))
            return cls(lengths, documents, made_of=(*made_of, *kinds.pop()))
        shifts = lengths_to_offsets(np.array([len(p.lengths) for p in parts], np.int64))
        columns = {}
        for name in parts[0].columns:
            pieces = [p.columns[name] for p in parts]
            example = np.concatenate([runs[0] + shift for runs, shift in zip(pieces, shifts)])
            columns[name] = (example, *(np.concatenate([runs[k] for runs in pieces]) for k in (1, 2, 3)))
        return cls(lengths, documents, columns)

    def cut(self, name: str, starts: np.ndarray, lengths: np.ndarray, owners: np.ndarray | None = None):
        """Column ``name``'s runs inside pieces (``starts``: each piece's first token in the examples joined
        end to end; ``lengths``; ``owners``, where known: the example each piece is cut from): (each run's
        piece, first value, step, length), pieces in the order given, each piece's runs in order; a run of
        one token steps 0. A piece that is its whole example takes that example's runs as they are; the rest
        are searched for (a packer's pieces come in row order: two searches at random places were most of
        a chat plan's cut, 0.33 ms each for 4,000 pieces over 20,000 runs)."""
        example, values, steps, run_lengths = self.columns[name]
        run_ends = np.cumsum(run_lengths)
        run_starts = run_ends - run_lengths
        ends = starts + lengths
        lo, hi = _whole_examples(self.lengths, example, starts, lengths, owners)
        searched = np.flatnonzero(lo < 0)
        lo[searched] = np.searchsorted(run_ends, starts[searched], side="right")  # the first run ending past it
        hi[searched] = np.searchsorted(run_starts, ends[searched], side="left")
        per_piece = hi - lo
        piece = np.repeat(np.arange(len(starts)), per_piece)
        run = np.arange(int(per_piece.sum())) - np.repeat(np.cumsum(per_piece) - per_piece, per_piece) + lo[piece]
        cut_lo = np.maximum(run_starts[run], starts[piece])
        cut_length = np.minimum(run_ends[run], ends[piece]) - cut_lo
        first = values[run] + steps[run] * (cut_lo - run_starts[run])
        return piece, first, steps[run] * (cut_length > 1), cut_length


def _whole_examples(example_lengths, run_example, starts, lengths, owners) -> tuple[np.ndarray, np.ndarray]:
    """Each piece's runs (first, one past the last) where the piece is its whole example, else -1."""
    lo = np.full(len(starts), -1, np.int64)
    hi = lo.copy()
    if owners is None:
        return lo, hi
    whole = np.flatnonzero(
        (lengths == example_lengths[owners]) & (starts == lengths_to_offsets(example_lengths)[owners])
    )
    runs_before = lengths_to_offsets(np.bincount(run_example, minlength=len(example_lengths)))
    lo[whole] = runs_before[owners[whole]]
    hi[whole] = runs_before[owners[whole] + 1]
    return lo, hi


def _document_runs(firsts: np.ndarray, stored: np.ndarray, bos_id: int | None, eos_id: int | None) -> Runs:
    """Each document's runs: its BOS, its values from its first, its EOS (runs of no token left out)."""
    count = len(stored)
    bos, eos = int(bos_id is not None), int(eos_id is not None)
    lengths = np.stack([np.full(count, bos), stored, np.full(count, eos)], axis=1)
    values = np.stack([np.full(count, bos_id or 0), firsts, np.full(count, eos_id or 0)], axis=1)
    steps = np.broadcast_to(np.array([0, 1, 0], np.int64), lengths.shape)
    example = np.broadcast_to(np.arange(count, dtype=np.int64)[:, None], lengths.shape)
    keep = lengths > 0
    return example[keep], values[keep], steps[keep], lengths[keep]


def in_ranges(
    lengths: np.ndarray,
    starts: np.ndarray,
    ranges: tuple[np.ndarray, np.ndarray, np.ndarray],
    firsts: np.ndarray,
    outside: int,
) -> Runs:
    """Runs of examples (``lengths``; ``starts``: their first tokens' places) holding their values inside
    ``ranges`` (each one's example, first token and one past its last, in that coordinate, inside its
    example; overlapping ones merge) and ``outside`` elsewhere. An example's values count up by one from
    ``firsts`` (its first token's), so a range is one run."""
    owner, first, stop = _merged(*ranges)
    head = np.ones(len(owner), dtype=bool)  # the example's first range
    head[1:] = owner[1:] != owner[:-1]
    gap_from = np.where(head, starts[owner], np.concatenate([[0], stop[:-1]]))
    tail_from = starts.copy()  # after each example's last range, or all of it
    tail = np.append(head[1:], True)[: len(owner)]
    tail_from[owner[tail]] = stop[tail]
    examples = np.arange(len(lengths), dtype=np.int64)
    at = np.concatenate([gap_from, first, tail_from])
    length = np.concatenate([first - gap_from, stop - first, starts + lengths - tail_from])
    inside = firsts[owner] + first - starts[owner]
    value = np.concatenate([np.full(len(owner), outside), inside, np.full(len(lengths), outside)])
    step = np.concatenate(
        [np.zeros(len(owner), np.int64), np.ones(len(owner), np.int64), np.zeros(len(lengths), np.int64)]
    )
    example = np.concatenate([owner, owner, examples])
    keep = np.flatnonzero(length > 0)
    order = keep[np.argsort(at[keep], kind="stable")]  # runs of tokens are distinct places: their order
    return example[order], value[order].astype(np.int64), step[order], length[order]


def _merged(owner: np.ndarray, first: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, ...]:
    """Ranges (example, first, stop) in order, those that overlap merged (ranges of two examples never do)."""
    order = np.argsort(first, kind="stable")
    owner, first, stop = owner[order].astype(np.int64), first[order].astype(np.int64), stop[order].astype(np.int64)
    if not len(first):
        return owner, first, stop
    reach = np.maximum.accumulate(stop)
    opens = np.ones(len(first), dtype=bool)
    opens[1:] = first[1:] >= reach[:-1]
    ends = np.append(np.flatnonzero(opens)[1:] - 1, len(first) - 1)
    return owner[opens], first[opens], reach[ends]
