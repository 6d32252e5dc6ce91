"""Best-fit-decreasing packing: same placement as the reference, and the packing properties."""

import numpy as np
import pytest
import reference
import sentencepiece as spm
from conftest import read_output, run_transform
from hypothesis import given
from hypothesis import strategies as st
from test_end_to_end import expected_documents

from objcli.kernels.bestfit import best_fit_decreasing


@given(st.lists(st.integers(1, 32), max_size=60), st.integers(32, 40))
def test_same_placement_as_reference(lengths, capacity):
    row, offset, rows = best_fit_decreasing(np.array(lengths, dtype=np.int64), capacity)
    got = [sorted(np.flatnonzero(row == r), key=lambda i: offset[i]) for r in range(rows)]
    assert [list(map(int, r)) for r in got] == reference.best_fit_decreasing(lengths, capacity)
    for r in range(rows):  # items of a row are laid end to end and fit
        items = got[r]
        assert [int(offset[i]) for i in items] == list(np.cumsum([0] + [lengths[i] for i in items[:-1]]))
        assert sum(lengths[i] for i in items) <= capacity


def test_best_fit_clm_properties(small_corpus, sample_tokenizer, tmp_path):
    files = [small_corpus / "prose.jsonl", small_corpus / "code.jsonl"]
    seq_len = 512
    summary = run_transform(files, sample_tokenizer, tmp_path / "bf", packing="best-fit", seq_len=seq_len, pack_window=30_000)
    concat = run_transform(files, sample_tokenizer, tmp_path / "cc", seq_len=seq_len)
    _, table = read_output(tmp_path / "bf")
    sp = spm.SentencePieceProcessor(model_file=sample_tokenizer)
    documents = [sp.encode(t) + [2] for t in expected_documents(files)]
    # Gather the segments back; a document split over rows comes back as several pieces.
    pieces = []
    for ids, segments in zip(table["input_ids"], table["segment_ids"]):
        assert len(ids) == seq_len
        for s in range(1, max(segments) + 1):
            pieces.append([t for t, g in zip(ids, segments) if g == s])
    # Every token placed exactly once: the pieces are the documents cut at seq_len boundaries.
    expected_pieces = [d[i : i + seq_len] for d in documents for i in range(0, len(d), seq_len)]
    assert sorted(map(tuple, pieces)) == sorted(map(tuple, expected_pieces))
    t = summary.totals
    long_documents = sum(len(d) > seq_len for d in documents)
    assert t["documents_split"] == long_documents  # only over-long documents are split
    assert t["documents_skipped"] == 0 and t["tokens"] == sum(map(len, documents))
    assert t["documents_split"] <= concat.totals["documents_split"]
    assert abs(t["mean_segments_per_row"] - len(pieces) / t["rows"]) < 1e-9


def test_best_fit_is_deterministic_across_workers(small_corpus, sample_tokenizer, tmp_path):
    common = dict(packing="best-fit", seq_len=256, partition_bytes=30_000, pack_window=10_000)
    run_transform([small_corpus], sample_tokenizer, tmp_path / "a", workers=1, **common)
    run_transform([small_corpus], sample_tokenizer, tmp_path / "b", workers=2, **common)
    files = sorted(p.name for p in (tmp_path / "a").glob("part-*"))
    assert len(files) > 1 and all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)



@pytest.mark.parametrize("objective,extra", [("bart", {}), ("prefix-lm", {"layout": "encdec"})])
def test_trim_and_pack_gives_back_the_unpacked_examples(small_corpus, sample_tokenizer, tmp_path, objective, extra):
    files = [small_corpus / "prose.jsonl"]
    seq_len = 96
    run_transform(files, sample_tokenizer, tmp_path / "plain", objective=objective, seq_len=seq_len, **extra)
    summary = run_transform(files, sample_tokenizer, tmp_path / "packed", objective=objective, seq_len=seq_len, pack=True, **extra)

    plain, packed = read_output(tmp_path / "plain")[1], read_output(tmp_path / "packed")[1]
    expected = sorted((tuple(i[:seq_len]), tuple(lab[:seq_len])) for i, lab in zip(plain["input_ids"], plain["labels"]))
    got = []
    for ids, segs, pos, labels, lsegs, lpos in zip(packed["input_ids"], packed["segment_ids"], packed["positions"],
                                                   packed["labels"], packed["label_segment_ids"], packed["label_positions"]):
        assert len(ids) == len(labels) == seq_len
        for s in range(1, max(segs) + 1):
            inputs = [t for t, g in zip(ids, segs) if g == s]
            targets = [t for t, g in zip(labels, lsegs) if g == s]
            assert [p for p, g in zip(pos, segs) if g == s] == list(range(len(inputs)))
            assert [p for p, g in zip(lpos, lsegs) if g == s] == list(range(len(targets)))
            got.append((tuple(inputs), tuple(targets)))
        assert max(lsegs) == max(segs)
    assert sorted(got) == expected
    t = summary.totals
    assert t["mean_segments_per_row"] >= 1 and t["documents_read"] == t["documents_written"] + t["documents_skipped"]
