"""The packing stage on its own: SeqIO's worked example, and properties of every packer."""

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from runs import run_transform

from objcli.kernels import IGNORE
from objcli.kernels.ragged import lengths_to_offsets
from objcli.packing import PACKERS, PackSettings, make_packer
from objcli.rows import ColumnSpec, Ragged, RowBatch

IDS = ColumnSpec("input_ids", "ragged", 0, 100, "tokens")
LABELS = ColumnSpec("labels", "ragged", IGNORE, 100, "labels", role="labels", family="labels")
TAG = ColumnSpec("tag", "scalar", 0, 9, "a value per example", role="per_segment")


def _examples(lists, tags=None, labels=None) -> RowBatch:
    offsets = lengths_to_offsets(np.array([len(x) for x in lists], dtype=np.int64))
    values = np.array([t for x in lists for t in x], dtype=np.int32)
    columns = {"input_ids": Ragged(values, offsets)}
    if labels is not None:
        label_offsets = lengths_to_offsets(np.array([len(x) for x in labels], dtype=np.int64))
        columns["labels"] = Ragged(np.array([t for x in labels for t in x], dtype=np.int32), label_offsets)
    if tags is not None:
        columns["tag"] = np.array(tags, dtype=np.int32)
    count = len(lists)
    return RowBatch(columns, np.zeros(count, np.int64), np.zeros(count, np.int64), np.ones(count, np.int64))


def test_trim_and_pack_matches_seqio_worked_example():
    """seqio/utils_test.py: two examples packed into one row, each feature with its own segments."""
    packer = make_packer("trim-and-pack", PackSettings(10, (IDS, LABELS), pad_id=0, documents=False))
    rows = packer.process(_examples([[7, 8, 5, 1], [8, 4, 9, 3, 1]], labels=[[3, 9, 1], [4, 1]]))
    c = {k: np.asarray(v).tolist() for k, v in rows.columns.items()}
    assert c["input_ids"] == [[7, 8, 5, 1, 8, 4, 9, 3, 1, 0]]
    assert c["segment_ids"] == [[1, 1, 1, 1, 2, 2, 2, 2, 2, 0]]
    assert c["position_ids"] == [[0, 1, 2, 3, 0, 1, 2, 3, 4, 0]]
    assert c["labels"] == [[3, 9, 1, 4, 1] + [IGNORE] * 5]
    assert c["label_segment_ids"] == [[1, 1, 1, 2, 2, 0, 0, 0, 0, 0]]


def _segments(row_ids, row_segments):
    """The segments of a row, in order, as lists."""
    return [row_ids[row_segments == s].tolist() for s in range(1, int(row_segments.max(initial=0)) + 1)]


documents = st.lists(st.lists(st.integers(1, 99), min_size=1, max_size=40), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(documents, st.integers(4, 32))
def test_best_fit_places_every_token_once_and_splits_only_long_examples(docs, seq_len):
    tags = [i % 7 for i in range(len(docs))]
    packer = make_packer("best-fit", PackSettings(seq_len, (IDS, TAG), pad_id=0, window=10**9))
    packer.process(_examples(docs, tags))
    rows = packer.finish()
    ids, segments = rows.columns["input_ids"], rows.columns["segment_ids"]
    pieces = [p for r in range(len(ids)) for p in _segments(ids[r], segments[r])]
    expected = [d[i : i + seq_len] for d in docs for i in range(0, len(d), seq_len)]
    assert sorted(pieces) == sorted(expected)  # whole examples, or row-sized pieces of long ones
    per_segment = rows.columns["tag"]
    assert len(per_segment.values) == len(pieces)  # one tag per segment
    assert packer.counters["documents_split"] == sum(len(d) > seq_len for d in docs)


@settings(max_examples=60, deadline=None)
@given(documents, st.integers(4, 32))
def test_concat_keeps_the_stream_and_none_keeps_each_example(docs, seq_len):
    stream = [t for d in docs for t in d]
    concat = make_packer("concat", PackSettings(seq_len, (IDS,)))
    rows = concat.process(_examples(docs))
    full = len(stream) // seq_len
    got = [] if rows is None else rows.columns["input_ids"].ravel().tolist()
    assert got == stream[: full * seq_len] and concat.finish() is None
    assert concat.counters["tokens_dropped"] == len(stream) - full * seq_len
    none = make_packer("none", PackSettings(seq_len, (IDS, TAG)))
    rows = none.process(_examples(docs, tags=list(range(len(docs)))))
    ragged = rows.columns["input_ids"]
    pieces = [ragged.values[a:b].tolist() for a, b in zip(ragged.offsets[:-1], ragged.offsets[1:])]
    assert pieces == [d[i : i + seq_len] for d in docs for i in range(0, len(d), seq_len)]
    assert rows.columns["tag"].values.tolist() == [i for i, d in enumerate(docs) for _ in range(0, len(d), seq_len)]


def test_every_packer_is_registered_with_a_docstring():
    assert set(PACKERS) == {"none", "concat", "best-fit", "trim-and-pack"}
    assert all(cls.__module__ and __import__(cls.__module__, fromlist=["_"]).__doc__ for cls in PACKERS.values())


def test_text_bytes_counts_utf8_bytes_not_characters(sample_tokenizer, tmp_path):
    texts = ["数据处理与模型训练。" * 20, "plain ascii text " * 10, "naïve café — déjà vu " * 5]
    corpus = tmp_path / "cjk.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8")
    summary = run_transform([corpus], sample_tokenizer, tmp_path / "out", seq_len=16)
    assert summary.totals["text_bytes"] == sum(len(t.encode("utf-8")) for t in texts)
