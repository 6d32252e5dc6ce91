"""Slow, obviously-correct reference versions of the kernels: plain loops over Python lists."""

from __future__ import annotations


def add_boundary_tokens(docs: list[list[int]], bos, eos) -> list[list[int]]:
    out = []
    for doc in docs:
        row = list(doc)
        if bos is not None:
            row = [bos] + row
        if eos is not None:
            row = row + [eos]
        out.append(row)
    return out


def pack_concat(docs: list[list[int]], seq_len: int, pad_id=None):
    """Rows of (input_ids, segment_ids, positions) and the leftover tokens, one token at a time."""
    stream = [(token, d, i == 0) for d, doc in enumerate(docs) for i, token in enumerate(doc)]
    rows = []
    while len(stream) >= seq_len or (pad_id is not None and stream):
        chunk, stream = stream[:seq_len], stream[seq_len:]
        ids, segs, pos, started = [], [], [], 0
        segment, position, previous_doc = 0, 0, None
        for token, doc, first in chunk:
            if doc != previous_doc:
                segment += 1
                position = 0
                previous_doc = doc
            ids.append(token)
            segs.append(segment)
            pos.append(position)
            position += 1
            started += first
        while len(ids) < seq_len:
            ids.append(pad_id)
            segs.append(0)
            pos.append(0)
        rows.append((ids, segs, pos, started))
    return rows, [token for token, _, _ in stream]


def split_long(docs: list[list[int]], max_length: int) -> list[tuple[int, list[int]]]:
    """(source document, piece) for every piece of at most ``max_length`` tokens."""
    pieces = []
    for d, doc in enumerate(docs):
        if not doc:
            pieces.append((d, []))
        for start in range(0, len(doc), max_length):
            pieces.append((d, doc[start : start + max_length]))
    return pieces
