"""ELECTRA: segments as its example builder makes them, masking draws as its pretrain helpers
draw them, the compiled walk against the NumPy one, end to end."""

import numpy as np
import pytest
import reference
from hypothesis import given, settings
from hypothesis import strategies as st
from runs import folder_bytes, read_output, run_cli, run_transform

from objcli.kernels.masking import draw_with_replacement
from objcli.kernels.pairs import electra_first_segment


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
