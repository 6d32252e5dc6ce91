"""NSP and SOP: truncation as Google's BERT truncates, the row layout, pairs that respect documents
with balanced labels, end to end (with MLM masking), and a --seq-len too short for a pair."""

import numpy as np
import pytest
import reference
from hypothesis import given
from hypothesis import strategies as st
from runs import cli, read_output, run_transform

from objcli.kernels.pairs import Pairs, assemble_rows, bert_pairs, truncate_pair
from objcli.kernels.rng import derive_rng


@given(st.integers(0, 60), st.integers(0, 60), st.integers(1, 80))
def test_truncation_counts_match_google(la, lb, budget):
    a, b = reference.truncate_seq_pair(list(range(la)), list(range(lb)), budget, lambda: False)
    remove_a, remove_b = truncate_pair(np.array([la]), np.array([lb]), budget)
    assert (remove_a[0], remove_b[0]) == (la - len(a), lb - len(b))


def test_row_layout():
    tokens = np.arange(100, 120)
    pairs = Pairs(
        np.array([0, 0]), np.array([0, 5]), np.array([3, 7]), np.array([10, 7]), np.array([12, 7]), np.array([0, 0])
    )
    ids, types, attention = assemble_rows(tokens, pairs, 10, cls_id=1, sep_id=2, pad_id=0)
    assert ids.tolist() == [[1, 100, 101, 102, 2, 110, 111, 2, 0, 0], [1, 105, 106, 2, 0, 0, 0, 0, 0, 0]]
    assert types.tolist() == [[0, 0, 0, 0, 0, 1, 1, 1, 0, 0], [0] * 10]
    assert attention.tolist() == [[1] * 8 + [0, 0], [1] * 4 + [0] * 6]


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 6), st.integers(0, 30), st.integers(0, 6)), max_size=12))
def test_rows_match_the_reference_layout(ranges):
    """Every row against BERT's layout built token by token (A of 1-6 tokens, B of 0-6)."""
    tokens = np.arange(1000, 1040, dtype=np.int32)
    seq_len = 16
    columns = [np.array([r[k] for r in ranges], dtype=np.int64).reshape(-1) for k in range(4)]
    a_start, a_len, b_start, b_len = columns
    pairs = Pairs(
        np.zeros(len(ranges), np.int64),
        a_start,
        a_start + a_len,
        b_start,
        b_start + b_len,
        np.zeros(len(ranges), np.int64),
    )
    ids, types, attention = assemble_rows(tokens, pairs, seq_len, cls_id=1, sep_id=2, pad_id=0)
    for i, (a, la, b, lb) in enumerate(ranges):
        expected = reference.pair_row(tokens[a : a + la].tolist(), tokens[b : b + lb].tolist(), seq_len, 1, 2, 0)
        assert (ids[i].tolist(), types[i].tolist(), attention[i].tolist()) == expected
    assert ids.dtype == types.dtype == attention.dtype == np.int32


def synthetic(documents=300, seed=0):
    rng = np.random.default_rng(seed)
    sentences_per_doc = rng.integers(1, 12, documents)
    lengths = rng.integers(3, 40, sentences_per_doc.sum())
    cumulative = np.concatenate([[0], np.cumsum(lengths)])
    document_sentences = np.concatenate([[0], np.cumsum(sentences_per_doc)])
    return cumulative, document_sentences


def rngs(seed):
    return {s: derive_rng(seed, 0, 0, s) for s in ("target", "split", "coin", "document", "truncate")}


@pytest.mark.parametrize("sop", [False, True])
def test_pairs_respect_documents_and_labels_balance(sop):
    from collections import Counter

    cumulative, document_sentences = synthetic()
    counters = Counter()
    pairs = bert_pairs(cumulative, document_sentences, rngs(1), 64, 0.1, sop, counters)
    doc_of_token = np.repeat(np.arange(len(document_sentences) - 1), np.diff(cumulative[document_sentences]))
    total = len(pairs.label)
    for i in range(total):
        a_doc = doc_of_token[pairs.a_start[i]]
        b_doc = doc_of_token[pairs.b_start[i]] if pairs.b_end[i] > pairs.b_start[i] else a_doc
        assert pairs.document[i] == a_doc or (sop and pairs.label[i] == 1)
        assert (pairs.a_end[i] - pairs.a_start[i]) + (pairs.b_end[i] - pairs.b_start[i]) <= 61
        if sop:
            assert b_doc == a_doc  # SOP never leaves the document
            if pairs.label[i] == 1:
                assert pairs.b_end[i] <= pairs.a_start[i]  # swapped: B comes first in the text
            else:
                assert pairs.a_end[i] <= pairs.b_start[i]
        elif pairs.label[i] == 1:
            assert b_doc != a_doc  # negatives never from the same document
        else:
            assert b_doc == a_doc and pairs.a_end[i] <= pairs.b_start[i]
    # Label balance within 3 sigma of 1/2. NSP always uses a random B for a one-sentence chunk
    # (Google BERT does too); those forced negatives are counted and left out of the balance.
    forced = counters["single_sentence_negatives"]
    share = (pairs.label.sum() - forced) / (total - forced)
    assert abs(share - 0.5) < 3 * np.sqrt(0.25 / (total - forced))
    assert sop == (forced == 0)
    assert list(pairs.document) == sorted(pairs.document)  # document order


@pytest.mark.parametrize("objective", ["nsp", "sop"])
def test_nsp_and_sop_end_to_end(small_corpus, sample_tokenizer, tmp_path, objective):
    summary = run_transform(
        [small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path / "out", objective=objective, seq_len=128
    )
    manifest, table = read_output(tmp_path / "out")
    ids = manifest["special_tokens"]["ids"]
    assert (ids["cls"], ids["sep"]) == (8000, 8001)  # allocated after the vocabulary
    label = "next_sentence_label" if objective == "nsp" else "sentence_order_label"
    for row, types, attention in zip(table["input_ids"], table["token_type_ids"], table["attention_mask"]):
        n = sum(attention)
        assert len(row) == 128 and row[0] == 8000 and row[n - 1] == 8001 and row.count(8001) == 2
        first_sep = row.index(8001)
        assert types[: first_sep + 1] == [0] * (first_sep + 1) and types[first_sep + 1 : n] == [1] * (n - first_sep - 1)
        assert set(row[n:]) <= {3}
    n = len(table[label])
    assert abs(np.mean(table[label]) - 0.5) < 3 * np.sqrt(0.25 / n) + (0.2 if objective == "nsp" else 0)
    t = summary.totals
    assert t["documents_read"] == t["documents_written"] + t["documents_skipped"]


def test_nsp_with_mlm_masking(small_corpus, sample_tokenizer, tmp_path):
    run_transform(
        [small_corpus / "prose.jsonl"],
        sample_tokenizer,
        tmp_path / "out",
        objective="nsp",
        seq_len=64,
        mlm=True,
        count="exact",
    )
    manifest, table = read_output(tmp_path / "out")
    special = {manifest["special_tokens"]["ids"][k] for k in ("cls", "sep", "pad")}
    for labels, attention in zip(table["labels"], table["attention_mask"]):
        selected = [lab for lab in labels if lab != -100]
        assert len(selected) == max(1, round(sum(attention) * 0.15))
        assert not special & set(selected)


def test_seq_len_too_short_for_a_pair(small_corpus, sample_tokenizer, tmp_path):
    result = cli(
        [
            "transform",
            str(small_corpus),
            "-t",
            sample_tokenizer,
            "-o",
            str(tmp_path / "o"),
            "--objective",
            "nsp",
            "--seq-len",
            "4",
        ],
    )
    assert (result.exit_code, result.output) == (
        1,
        "Error: --seq-len 4: [CLS] A [SEP] B [SEP] needs at least 5 tokens\n",
    )
