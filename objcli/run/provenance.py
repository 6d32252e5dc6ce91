"""``--provenance`` in one partition's chain: what each document is (its file, record, offset in the
record's text, copy) and where its tokens fall in its text; examples marked with their document and
each token's place in it, which the packers carry to every segment; rows given their spans.

A segment's span is the characters of its record's text that its tokens cover
(``Tokenizer.token_char_spans``): for a byte-level BPE exact, from each token's bytes; for others,
measured on the pieces (exact where the tokenizer's normalization leaves the text as it is). A
document is an example here (objectives whose examples are the batch's documents, one each, BOS and
EOS around them: ``Objective.provenance == "tokens"``).
"""

from __future__ import annotations

import numpy as np

from ..formats.provenance import COLUMNS
from ..inputs.token_store import StoredDocuments
from ..kernels.packing import segment_starts
from ..kernels.ragged import lengths_to_offsets
from ..rows import DOCUMENT, ColumnSpec, Ragged, RowBatch
from ..storage.remote import public_url

SOURCE, TOKEN = "__source", "__token"
SOURCE_SPEC = ColumnSpec(SOURCE, "scalar", 0, 2**31 - 1, "the example", role="per_segment")
# What the packers carry: each example's document (one value per example, per segment once packed)
# and each token's index in its example (per token; its value at a segment's first token).
EXAMPLE_SPECS = (
    ColumnSpec(SOURCE, "scalar", 0, 2**31 - 1, "the example's document", role="per_segment"),
    ColumnSpec(TOKEN, "ragged", 0, 2**31 - 1, "the token's index in its example", role="positions"),
)


class _Growing:
    """An int64 array appended to in batches, its capacity doubled (a partition's tokens, say)."""

    def __init__(self, dtype=np.int64):
        self.data, self.size = np.zeros(1024, dtype), 0

    def extend(self, values) -> int:
        start, need = self.size, self.size + len(values)
        if need > len(self.data):
            grown = np.zeros(max(need, len(self.data) * 3 // 2), self.data.dtype)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[start:need] = values
        self.size = need
        return start

    def view(self) -> np.ndarray:
        return self.data[: self.size]


class Sources:
    """The documents of one chain, by their ordinal in it. ``kind``: "tokens" (examples are the
    documents) or "stream" (examples are cut from the documents joined, ``objectives/stream.py``:
    each records the runs of documents it was cut from, and a segment's spans are its example's)."""

    def __init__(self, files: dict[str, int], tokenizer, bos: bool, kind: str = "tokens", segments: int = 1):
        self.files, self.tokenizer, self.bos, self.kind = files, tokenizer, int(bos), kind
        self.segments = segments  # segments each packed example becomes (a preference pair's two sides)
        self.examples = 0  # examples marked so far
        self.several = False  # whether an example names several documents (kind "documents", unpacked)
        self.cuts = {name: _Growing() for name in ("example", "document", "first", "end")}
        self.origins = {name: _Growing() for name in ("file", "record", "start", "copy", "length", "tokens", "base")}
        # Each document's tokens' ends, in characters of its text; and how far each token starts before
        # the end of the one before it (1 where it starts inside a character): 5 bytes a token.
        self.ends = _Growing(np.int32)
        self.back = _Growing(np.int8)

    def add(self, texts: list[str], tokens: np.ndarray, offsets: np.ndarray) -> None:
        """A batch's documents (SourcedTexts), tokenized: ``tokens``/``offsets`` as encoded."""
        counts = np.diff(offsets)
        if isinstance(texts, StoredDocuments):
            self._add_stored(texts)
            return
        self.origins["file"].extend([self.files[t.file] for t in texts])
        for name in ("record", "start", "copy"):
            self.origins[name].extend([getattr(t, name) for t in texts])
        self.origins["length"].extend([len(t) for t in texts])
        if self.kind == "documents":  # a segment's span is its whole document: no token is placed
            self.origins["tokens"].extend(np.zeros(len(texts), np.int64))
            self.origins["base"].extend(np.zeros(len(texts), np.int64))
            return
        self.origins["tokens"].extend(counts)
        ends, back = token_places(self.tokenizer, texts, tokens, offsets)
        self.back.extend(back)
        base = self.ends.extend(ends)
        self.origins["base"].extend(base + offsets[:-1])

    def _add_stored(self, texts: StoredDocuments) -> None:
        """A token store's or a tokenized input's documents, their origins carried with them: a
        store's token places as its tokenize run measured them (the same arrays ``add`` makes), a
        tokenized input's counted in ids (a token ends at its place + 1; none starts inside another)."""
        origins, count = texts.origins, len(texts)
        if count == 0:
            return
        names = np.array([self.files[public_url(name)] for name in origins.names], np.int64)
        self.origins["file"].extend(names[origins.file])
        for name, values in (("record", origins.records), ("start", origins.starts), ("length", texts.chars)):
            self.origins[name].extend(values)
        self.origins["copy"].extend(np.full(count, origins.copy, np.int64))
        counts = np.diff(texts.offsets)
        if self.kind == "documents":  # a segment's span is its whole document: no token is placed
            self.origins["tokens"].extend(np.zeros(count, np.int64))
            self.origins["base"].extend(np.zeros(count, np.int64))
            return
        self.origins["tokens"].extend(counts)
        if origins.places is None:
            ends = np.arange(1, len(texts.tokens) + 1, dtype=np.int64) - np.repeat(texts.offsets[:-1], counts)
            back = np.zeros(len(ends), np.int8)
        else:
            ends, back = origins.places[0].values, origins.places[1].values
        self.back.extend(back)
        base = self.ends.extend(np.asarray(ends, np.int32))
        self.origins["base"].extend(base + texts.offsets[:-1])

    def cut(self, first_example: int, documents: np.ndarray, places: np.ndarray, starts: np.ndarray) -> None:
        """Examples cut from the stream: tokens of ``documents`` at ``places``, an example from each
        of ``starts``; each run of one document in an example is recorded as a span."""
        run = np.zeros(len(documents), dtype=bool)
        run[starts] = True
        run[1:] |= documents[1:] != documents[:-1]
        run_starts = np.flatnonzero(run)
        run_ends = np.append(run_starts[1:], len(documents))
        self.cuts["example"].extend(first_example + np.searchsorted(starts, run_starts, side="right") - 1)
        self.cuts["document"].extend(documents[run_starts])
        self.cuts["first"].extend(places[run_starts])
        self.cuts["end"].extend(places[run_ends - 1].astype(np.int64) + 1)

    def mark(self, examples: RowBatch | None, first_document: int) -> RowBatch | None:
        """The examples of a batch with their document and token places ("tokens"), or their ordinal
        among the examples cut ("stream")."""
        if examples is None:
            return None
        local = examples.columns.pop(DOCUMENT, None)  # an objective that skips or repeats documents says which
        if isinstance(local, Ragged):  # several documents an example (pairs, views): one row each, unpacked
            self.several = True
            examples.columns[SOURCE] = Ragged(first_document + local.values, local.offsets)
            return examples
        if self.kind in ("stream", "documents"):  # the ordinal of the example, or of its document
            first = self.examples if self.kind == "stream" else first_document
            examples.columns[SOURCE] = first + (
                np.arange(examples.num_rows, dtype=np.int64) if local is None else local
            )
            self.examples += examples.num_rows
            return examples
        ids = examples.columns["input_ids"]
        lengths = np.diff(ids.offsets)
        examples.columns[SOURCE] = first_document + np.arange(len(lengths), dtype=np.int64)
        places = np.arange(len(ids.values), dtype=np.int64) - np.repeat(ids.offsets[:-1], lengths)
        examples.columns[TOKEN] = Ragged(places.astype(np.int32), ids.offsets)
        return examples

    def spans(self, rows: RowBatch | None) -> RowBatch | None:
        """The rows with their segments' spans as the ``__p_*`` columns, the packers' marks gone."""
        if rows is None:
            return None
        if self.kind == "documents":
            document, row_offsets = _per_segment(rows.columns[SOURCE])
            if self.segments > 1:  # each example's document is the span of each of its segments
                document, row_offsets = np.repeat(document, self.segments), row_offsets * self.segments
            segment = np.arange(len(document), dtype=np.int64) - np.repeat(row_offsets[:-1], np.diff(row_offsets))
            if self.several:  # a row is one example of several documents: each is a span of segment 0
                segment[:] = 0
            first = end = np.zeros(len(document), np.int64)
        elif self.kind == "stream":
            segment, document, first, end, row_offsets = self._example_runs(rows)
        else:
            document, first, length, row_offsets = _segments(rows)
            end = first + length
            segment = np.arange(len(document), dtype=np.int64) - np.repeat(row_offsets[:-1], np.diff(row_offsets))
        column = {name: grown.view()[document] for name, grown in self.origins.items()}
        t0 = np.clip(first - self.bos, 0, column["tokens"])
        t1 = np.clip(end - self.bos, t0, column["tokens"])
        c0, c1 = self._chars(column, t0, first=True), self._chars(column, t1, first=False)
        if self.kind == "documents":
            c0, c1 = np.zeros(len(document), np.int64), column["length"]
        c1 = np.maximum(c1, c0)
        values = {"segment": segment, "file": column["file"], "record": column["record"]}
        values.update(start=column["start"] + c0, end=column["start"] + c1, copy=column["copy"])
        del rows.columns[SOURCE]
        rows.columns.pop(TOKEN, None)
        for name, hidden in zip(("segment", "file", "record", "start", "end", "copy"), COLUMNS):
            rows.columns[hidden] = Ragged(np.asarray(values[name], np.int64), row_offsets)
        return rows

    def _example_runs(self, rows: RowBatch):
        """Per span: (its segment, document, first and end places), and the rows' offsets into the
        spans: every run of documents each segment's example was cut from."""
        examples, segment_offsets = _per_segment(rows.columns[SOURCE])
        table = self.cuts["example"].view()
        low, high = np.searchsorted(table, examples, "left"), np.searchsorted(table, examples, "right")
        counts = high - low
        picked = np.repeat(low, counts) + np.arange(counts.sum()) - np.repeat(lengths_to_offsets(counts)[:-1], counts)
        segment_in_row = np.arange(len(examples)) - np.repeat(segment_offsets[:-1], np.diff(segment_offsets))
        span_offsets = lengths_to_offsets(counts)[segment_offsets]
        return (
            np.repeat(segment_in_row, counts),
            self.cuts["document"].view()[picked],
            self.cuts["first"].view()[picked],
            self.cuts["end"].view()[picked],
            span_offsets,
        )

    def _chars(self, column: dict, t: np.ndarray, first: bool) -> np.ndarray:
        """Where each document's token ``t`` starts (``first``), or where its token ``t - 1`` ends, in
        characters of its text: a span holds a character whose bytes it holds part of."""
        whole = t == column["tokens"]
        chars = np.where(whole, column["length"], 0)
        inside = np.flatnonzero((t > 0) & ~whole)
        if not len(inside):
            return chars
        place = column["base"][inside] + t[inside]
        chars[inside] = self.ends.view()[place - 1] - (self.back.view()[place] if first else 0)
        return np.clip(chars, 0, column["length"])  # pieces measured past a normalized text end inside it


def token_places(tokenizer, texts: list[str], tokens: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each token's end in characters of its document's text (int32), and how far it starts before
    the end of the one before it (int8, up to 127; 1 where it starts inside a character): what a
    span's characters are found from (a store made with --provenance keeps them as the fixes of the
    tokenizer's piece table, ``kernels/places.py``)."""
    counts = np.diff(offsets)
    starts, ends = tokenizer.token_char_spans(texts, tokens, offsets)
    previous = np.concatenate([[0], ends[:-1]]).astype(np.int32)
    previous[offsets[:-1][counts > 0]] = 0  # a document's first token follows nothing
    return np.asarray(ends, np.int32), np.clip(previous - starts, 0, 127).astype(np.int8)


def _per_segment(sources) -> tuple[np.ndarray, np.ndarray]:
    """A per-example mark after packing: (its value per segment, the rows' offsets into them); one a
    row where examples were not packed."""
    if isinstance(sources, Ragged):
        return np.asarray(sources.values, np.int64), np.asarray(sources.offsets, np.int64)
    return np.asarray(sources, np.int64), np.arange(len(sources) + 1, dtype=np.int64)


def _segments(rows: RowBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per segment of the rows, in order: (its document, its first token's place in the example, its
    tokens), and the rows' offsets into the segments."""
    segment_ids, places, sources = rows.columns["segment_ids"], rows.columns[TOKEN], rows.columns[SOURCE]
    document = np.asarray(sources.values if isinstance(sources, Ragged) else sources, np.int64)
    if isinstance(segment_ids, Ragged):  # one example per row (--packing none)
        offsets = np.asarray(places.offsets)
        return (
            document,
            places.values[offsets[:-1]].astype(np.int64),
            np.diff(offsets),
            lengths_to_offsets(np.ones(len(offsets) - 1, np.int64)),
        )
    seq_len = segment_ids.shape[1]
    starts = segment_starts(segment_ids)
    position = np.flatnonzero(starts)  # row * seq_len + column of each segment's first token
    row = position // seq_len
    row_end = row * seq_len + np.asarray(rows.tokens, np.int64)[row]  # padding only ever ends a row
    end = np.where(np.append(row[1:] == row[:-1], False), np.append(position[1:], 0), row_end)
    first = np.asarray(places).reshape(-1)[position].astype(np.int64)
    return document, first, end - position, lengths_to_offsets(starts.sum(axis=1))
