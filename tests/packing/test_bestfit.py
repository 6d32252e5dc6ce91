"""Best-fit-decreasing packing: same placement as the reference, and the packing properties."""

import numpy as np
import pytest
import reference
import sentencepiece as spm
from hypothesis import given
from hypothesis import strategies as st
from readback import expected_documents
from runs import read_output, run_transform

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
    summary = run_transform(
        files, sample_tokenizer, tmp_path / "bf", packing="best-fit", seq_len=seq_len, pack_window=30_000
    )
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
    common = dict(packing="best-fit", seq_len=256, partition_size=30_000, pack_window=10_000)
    run_transform([small_corpus], sample_tokenizer, tmp_path / "a", workers=1, **common)
    run_transform([small_corpus], sample_tokenizer, tmp_path / "b", workers=2, **common)
    files = sorted(p.name for p in (tmp_path / "a").glob("part-*"))
    assert len(files) > 1 and all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)


@pytest.mark.parametrize("objective,extra", [("bart", {}), ("prefix-lm", {"layout": "encdec"})])
def test_trim_and_pack_gives_back_the_unpacked_examples(small_corpus, sample_tokenizer, tmp_path, objective, extra):
    files = [small_corpus / "prose.jsonl"]
    seq_len = 96
    run_transform(files, sample_tokenizer, tmp_path / "plain", objective=objective, seq_len=seq_len, **extra)
    summary = run_transform(
        files, sample_tokenizer, tmp_path / "packed", objective=objective, seq_len=seq_len, pack=True, **extra
    )

    plain, packed = read_output(tmp_path / "plain")[1], read_output(tmp_path / "packed")[1]
    expected = sorted((tuple(i[:seq_len]), tuple(lab[:seq_len])) for i, lab in zip(plain["input_ids"], plain["labels"]))
    got = []
    for ids, segs, pos, labels, lsegs, lpos in zip(
        packed["input_ids"],
        packed["segment_ids"],
        packed["position_ids"],
        packed["labels"],
        packed["label_segment_ids"],
        packed["label_positions"],
    ):
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


def _document_pieces(files, tokenizer_path, seq_len):
    sp = spm.SentencePieceProcessor(model_file=tokenizer_path)
    documents = [sp.encode(t) + [2] for t in expected_documents(files)]
    return [tuple(d[i : i + seq_len]) for d in documents for i in range(0, len(d), seq_len)]


def _segments(row_values, segment_ids):
    return [[v for v, g in zip(row_values, segment_ids) if g == s] for s in range(1, max(segment_ids) + 1)]


def test_prefix_lm_decoder_pack_gives_back_one_example_per_document(small_corpus, sample_tokenizer, tmp_path):
    files = [small_corpus / "prose.jsonl", small_corpus / "code.jsonl"]
    seq_len = 256
    summary = run_transform(
        files, sample_tokenizer, tmp_path / "out", objective="prefix-lm", pack=True, seq_len=seq_len
    )
    _, table = read_output(tmp_path / "out")
    pieces = []
    for ids, labels, segments, positions, prefixes in zip(
        table["input_ids"], table["labels"], table["segment_ids"], table["position_ids"], table["prefix_lengths"]
    ):
        assert len(ids) == len(labels) == seq_len
        assert len(prefixes) == max(segments)  # one prefix length per segment
        for example, example_labels, example_positions, k in zip(
            _segments(ids, segments), _segments(labels, segments), _segments(positions, segments), prefixes
        ):
            n = len(example)
            assert example_positions == list(range(n))
            assert 1 <= k <= max(n - 1, 1)  # uniform in [1, n - 1]; a one-token example is all prefix
            assert example_labels == [-100] * k + example[k:]  # loss on the target only
            pieces.append(tuple(example))
        assert all(lab == -100 for lab, g in zip(labels, segments) if g == 0)  # no loss on padding
    # Unpacking the rows by segment gives back the documents (cut only where longer than a row):
    # no example spans two documents.
    assert sorted(pieces) == sorted(_document_pieces(files, sample_tokenizer, seq_len))
    t = summary.totals
    assert t["documents_read"] == t["documents_written"] + t["documents_skipped"]
    assert t["padding_fraction"] < 0.05


def test_prefix_lm_split_points_are_uniform(small_corpus, sample_tokenizer, tmp_path):
    run_transform(
        [small_corpus / "prose.jsonl"],
        sample_tokenizer,
        tmp_path / "out",
        objective="prefix-lm",
        pack=True,
        seq_len=256,
    )
    _, table = read_output(tmp_path / "out")
    # k / (n - 1) is uniform on (0, 1]: its mean is about 1/2 (within 3 standard errors).
    fractions = []
    for prefixes, segments in zip(table["prefix_lengths"], table["segment_ids"]):
        lengths = np.bincount(segments)[1:]
        fractions += [k / (n - 1) for k, n in zip(prefixes, lengths) if n > 1]
    fractions = np.array(fractions)
    assert abs(fractions.mean() - 0.5) < 3 * fractions.std() / np.sqrt(len(fractions))


def test_mlm_best_fit_rows_are_whole_documents_masked(small_corpus, sample_tokenizer, tmp_path):
    files = [small_corpus / "prose.jsonl", small_corpus / "code.jsonl"]
    seq_len = 256
    summary = run_transform(
        files, sample_tokenizer, tmp_path / "out", objective="mlm", packing="best-fit", seq_len=seq_len
    )
    _, table = read_output(tmp_path / "out")
    pieces, selected, valid = [], 0, 0
    for ids, labels, segments in zip(table["input_ids"], table["labels"], table["segment_ids"]):
        original = [i if lab == -100 else lab for i, lab in zip(ids, labels)]
        pieces += [tuple(p) for p in _segments(original, segments)]
        assert all(lab == -100 for lab, g in zip(labels, segments) if g == 0)  # padding is never selected
        selected += sum(lab != -100 for lab in labels)
        valid += sum(g > 0 for g in segments)
    assert sorted(pieces) == sorted(_document_pieces(files, sample_tokenizer, seq_len))
    assert abs(selected / valid - 0.15) < 0.01  # Bernoulli 15 % of the (non-special) tokens
    sp = spm.SentencePieceProcessor(model_file=sample_tokenizer)
    longer = sum(len(sp.encode(t)) + 1 > seq_len for t in expected_documents(files))
    assert summary.totals["documents_split"] == longer  # only documents longer than a row are split


def test_decoder_pack_is_deterministic_across_workers(small_corpus, sample_tokenizer, tmp_path):
    for name, extra in (
        ("prefix", {"objective": "prefix-lm", "pack": True}),
        ("mlm", {"objective": "mlm", "packing": "best-fit"}),
    ):
        common = dict(seq_len=256, partition_size=30_000, **extra)
        run_transform([small_corpus], sample_tokenizer, tmp_path / f"{name}1", workers=1, **common)
        run_transform([small_corpus], sample_tokenizer, tmp_path / f"{name}2", workers=2, **common)
        files = sorted(p.name for p in (tmp_path / f"{name}1").glob("part-*"))
        assert files and all(
            (tmp_path / f"{name}1" / f).read_bytes() == (tmp_path / f"{name}2" / f).read_bytes() for f in files
        )
