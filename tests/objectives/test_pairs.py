"""Sentence pairs: splitting, truncation, row layout, NSP/SOP/ELECTRA statistics end to end."""

import os
from contextlib import contextmanager

import numpy as np
import pytest
import reference
from click.testing import CliRunner
from conftest import folder_bytes, read_output, run_cli, run_transform
from hypothesis import given, settings
from hypothesis import strategies as st

from objcli.cli import main
from objcli.kernels.masking import draw_with_replacement
from objcli.kernels.pairs import Pairs, assemble_rows, bert_pairs, electra_first_segment, truncate_pair
from objcli.kernels.rng import derive_rng
from objcli.objectives import sentences
from objcli.objectives.sentences import ABBREVIATIONS, SENTINEL, split_batch


def test_prose_splitting_rules():
    text = (
        'Dr. Smith met J. R. Tolkien at 5 p.m. in the U.K. on Friday. "Really?" she asked. (Yes.) It was e.g. fine!'
        "\n\nNew paragraph 2 here"
    )
    assert split_batch([text], "prose")[0] == [
        "Dr. Smith met J. R. Tolkien at 5 p.m. in the U.K. on Friday.",
        '"Really?" she asked.',
        "(Yes.)",
        "It was e.g. fine!",
        "New paragraph 2 here",
    ]
    assert split_batch(["version 3.11 is out. Next"], "prose")[0] == ["version 3.11 is out.", "Next"]
    assert split_batch(["def f():\n\n    return 1\n"], "lines")[0] == ["def f():", "    return 1"]


# Texts built from the characters the rules turn on: terminators, closers, openers, abbreviations'
# letters in both cases, digits (a decimal one that is not ASCII), a non-letter word character,
# letters that are numbers or not ASCII (the Kelvin sign lower-cases to 'k'), whitespace of every
# kind, the sentinel.
SPLIT_ALPHABET = st.sampled_from(
    list(
        ".!?\"')([] \n\t\r\x0b\x1c\x85\xa0\u2028\u3000"
        "aAdDrReEgGiIsStTxX19_\u00bd\u00b2"
        "\u0663\u00e9\u00c9\u212a" + SENTINEL
    )
    + [
        "Dr. ",
        "e.g. ",
        "i.e.",
        " J. ",
        "St.",
        "\n\n",
        "\n \n",
        ". A",
        "? (B",
        '." C',
        "approx. 3",
        "U.S. A",
        "\u00c9. B",
    ]
)
SPLITTERS = ["compiled", "pure"]


@contextmanager
def splitter(path: str):
    """The compiled splitter (numba; ``make test`` installs it, so this must not fall back) or the
    regular expression, for the block."""
    saved = os.environ.get("OBJCLI_PURE_PYTHON")
    os.environ["OBJCLI_PURE_PYTHON"] = "1" if path == "pure" else "0"
    sentences._compiled_splitter.cache_clear()
    try:
        assert (sentences._compiled_splitter() is None) == (path == "pure")
        yield
    finally:
        os.environ.pop("OBJCLI_PURE_PYTHON") if saved is None else os.environ.update(OBJCLI_PURE_PYTHON=saved)
        sentences._compiled_splitter.cache_clear()


@pytest.fixture(scope="module")
def compiled_splitter_ready():
    """numba compiles the splitter (or loads it from its cache) on its first call: 1-2 s on a fresh
    clone, which a property test's per-example deadline must not see. Done once, before the tests."""
    with splitter("compiled"):
        sentences.warm_splitter()


@pytest.mark.usefixtures("compiled_splitter_ready")
@pytest.mark.parametrize("path", SPLITTERS)
@given(
    texts=st.lists(st.lists(SPLIT_ALPHABET, max_size=40).map("".join), max_size=6),
    mode=st.sampled_from(["prose", "lines"]),
)
def test_batch_splitting_matches_text_by_text_reference(path, texts, mode):
    """One pass over the joined batch, compiled or the regular expression, cuts exactly where the
    reference's candidate loop does, text by text, sentinel or not."""
    slow = {"prose": lambda t: reference.split_prose(t, set(ABBREVIATIONS)), "lines": reference.split_lines}[mode]
    expected = [slow(text) for text in texts]
    with splitter(path):
        found, counts = split_batch(texts, mode)
    assert counts.tolist() == [len(e) for e in expected]
    assert found == [s for e in expected for s in e]


def test_both_splitters_cut_the_sample_corpus_alike(sample_dir):
    """Real prose and code, ASCII batches and wider ones: the same sentences from both paths."""
    import json

    texts = [
        json.loads(line)["text"]
        for name in ("prose.jsonl", "code.jsonl")
        for line in (sample_dir / name).read_text(encoding="utf-8").splitlines()
    ]
    batches = [texts[i : i + 50] for i in range(0, len(texts), 50)] + [["plain ASCII. Only here"]]
    assert any(not "".join(b).isascii() for b in batches) and any("".join(b).isascii() for b in batches)
    results = {}
    for path in SPLITTERS:
        with splitter(path):
            results[path] = [split_batch(batch, "prose") for batch in batches]
    assert all(a[0] == b[0] and a[1].tolist() == b[1].tolist() for a, b in zip(*results.values()))
    assert sum(len(found) for found, _ in results["pure"]) > 1000


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


@pytest.mark.parametrize("draws", ["with-replacement", "exact"])
def test_electra_masking(small_corpus, sample_tokenizer, tmp_path, draws):
    run_transform(
        [small_corpus / "prose.jsonl"],
        sample_tokenizer,
        tmp_path / "out",
        objective="electra",
        seq_len=128,
        electra_draws=draws,
    )
    manifest, table = read_output(tmp_path / "out")
    mask_id = manifest["special_tokens"]["ids"]["mask"]
    max_predictions = int((0.15 + 0.005) * 128)  # 19
    masked = unchanged = 0
    for ids, labels, attention in zip(table["input_ids"], table["labels"], table["attention_mask"]):
        selected = [i for i, lab in enumerate(labels) if lab != -100]
        budget = min(max_predictions, max(1, round(sum(attention) * 0.15)))
        assert len(selected) == budget if draws == "exact" else 1 <= len(selected) <= budget
        for i in selected:
            assert ids[i] in (mask_id, labels[i])  # no random replacement
            masked += ids[i] == mask_id
            unchanged += ids[i] == labels[i]
    share = masked / (masked + unchanged)
    assert abs(share - 0.85) < 3 * np.sqrt(0.85 * 0.15 / (masked + unchanged))
    assert "next_sentence_label" not in table


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
    result = CliRunner().invoke(
        main,
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


@given(
    st.lists(st.integers(0, 30), min_size=1, max_size=12),
    st.integers(5, 80),
    st.booleans(),
    st.lists(st.floats(0, 0.999), min_size=12, max_size=12),
)
def test_electra_segments_match_the_example_builder(lengths, target, one_segment, coins):
    """Issue 13, fidelity 2: A's target is (this example's target - 3) // 2, and a sentence may join A
    after B has started; checked against a line-for-line port of ExampleBuilder._create_example."""
    sentences = [list(range(100 * i, 100 * i + n)) for i, n in enumerate(lengths)]
    in_first = electra_first_segment(
        np.array([lengths]),
        np.array([len(lengths)]),
        np.array([100_000 if one_segment else (target - 3) // 2]),
        np.array([coins]),
    )[0]
    first = [t for s, a in zip(sentences, in_first) if a for t in s]
    second = [t for s, a in zip(sentences, in_first) if not a for t in s]
    expected = reference.electra_create_example(sentences, target, 10_000, one_segment, coins)
    assert (first, second) == expected


def test_electra_worked_example():
    """Target 40 (first target 18), sentences of 10, 10, 10, 10: ELECTRA gives A = 10, B = 30 when the
    second sentence's coin says B (objcli put all 40 in A, from (seq_len - 3) // 2 at seq_len 128); with
    10, 10, 3 the third sentence joins A after B has started."""
    four = electra_first_segment(np.array([[10, 10, 10, 10]]), np.array([4]), np.array([18]), np.array([[0.9] * 4]))
    assert four.tolist() == [[True, False, False, False]]
    heads = electra_first_segment(np.array([[10, 10, 10, 10]]), np.array([4]), np.array([18]), np.array([[0.1] * 4]))
    assert heads.tolist() == [[True, True, False, False]]
    late = electra_first_segment(np.array([[10, 10, 3]]), np.array([3]), np.array([18]), np.array([[0.9] * 3]))
    assert late.tolist() == [[True, False, True]]


@given(st.lists(st.booleans(), min_size=1, max_size=40), st.integers(1, 12), st.integers(0, 2**31))
def test_electra_draws_match_pretrain_helpers(candidates, budget, seed):
    """Issue 13, fidelity 3: positions drawn with replacement, as pretrain_helpers.mask does."""
    rng = np.random.default_rng(seed)
    keys, actions = rng.random((1, 12)), rng.random((1, 12))
    selected, to_mask = draw_with_replacement(np.array([candidates]), np.array([budget]), keys, actions, 0.85)
    expected = reference.electra_mask(candidates, budget, keys[0].tolist(), actions[0].tolist())
    assert (set(np.flatnonzero(selected[0])), set(np.flatnonzero(to_mask[0]))) == expected


def test_electra_draws_give_the_expected_number_of_distinct_positions():
    """k draws with replacement among n candidates select n (1 - (1 - 1/n)^k) distinct ones on average
    (126 candidates, budget 19: 17.7, where exact selection gives 19)."""
    rows, n, k = 4000, 126, 19
    rng = np.random.default_rng(7)
    selected, _ = draw_with_replacement(
        np.ones((rows, n), dtype=bool), np.full(rows, k), rng.random((rows, k)), rng.random((rows, k)), 0.85
    )
    distinct = selected.sum(axis=1)
    expected = n * (1 - (1 - 1 / n) ** k)
    assert abs(distinct.mean() - expected) < 3 * distinct.std() / np.sqrt(rows)


@given(
    chunks=st.lists(
        st.tuples(st.lists(st.integers(0, 30), min_size=1, max_size=10), st.integers(0, 60), st.booleans()),
        min_size=1,
        max_size=8,
    ),
    seed=st.integers(0, 2**32 - 1),
)
@settings(deadline=None)  # the first example loads the compiled walk (numba)
def test_the_compiled_electra_walk_makes_the_numpy_walks_decisions(chunks, seed):
    """kernels/electra_walk.py (numba, one chunk at a time) against kernels/pairs.py's NumPy walk (every
    chunk per sentence column), on chunks of different sentence counts padded to one width, with
    one-segment chunks (a first target of 100,000) and coins that straddle 0.5."""
    from objcli.kernels.electra_walk import first_segment

    width = max(len(lengths) for lengths, _, _ in chunks)
    lengths = np.array([sizes + [0] * (width - len(sizes)) for sizes, _, _ in chunks], np.int64)
    counts = np.array([len(sizes) for sizes, _, _ in chunks], np.int64)
    first_target = np.array([100_000 if one else target for _, target, one in chunks], np.int64)
    coins = np.random.default_rng(seed).random((len(chunks), width))
    expected = electra_first_segment(lengths, counts, first_target, coins)
    assert first_segment(lengths, counts, first_target, coins).tolist() == expected.tolist()


@pytest.mark.parametrize("objective", ["electra", "nsp"])
def test_compiled_and_pure_runs_write_the_same_bytes(objective, small_corpus, sample_tokenizer, tmp_path):
    """A whole run with the compiled kernels (the splitter; ELECTRA's walk) and one with
    OBJCLI_PURE_PYTHON=1 (the regular expression, the NumPy walk) write byte-identical shards."""
    outputs = {}
    for pure in ("0", "1"):
        out = tmp_path / f"pure-{pure}"
        result = run_cli(
            "transform",
            small_corpus,
            "-t",
            sample_tokenizer,
            "-o",
            out,
            "--objective",
            objective,
            "--seq-len",
            "128",
            "-q",
            env={"OBJCLI_PURE_PYTHON": pure},
        )
        assert result.returncode == 0, result.stderr
        outputs[pure] = {k: v for k, v in folder_bytes(out).items() if k != ".objcli-lock"}
    assert outputs["0"] == outputs["1"] and any(k.endswith(".arrow") for k in outputs["0"])
