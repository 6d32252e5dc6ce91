"""T5 span corruption: the planner against REFERENCE §5, kernels against reference loops."""

import numpy as np
import pytest
import reference
from hypothesis import given, settings
from hypothesis import strategies as st

from objcli.kernels.spans import (
    composition_from_keys,
    corrupt_spans,
    example_lengths,
    noise_mask_from_spans,
    random_spans_noise_mask,
    span_counts,
    t5_raw_lengths,
)

# REFERENCE §5: (mu, r) -> {I: (T, targets)}
PLANNER_TABLE = {
    (3, 0.15): {512: (568, 114), 1024: (1137, 229), 2048: (2274, 456)},
    (8, 0.15): {512: (588, 100), 1024: (1178, 200), 2048: (2357, 399)},
    (3, 0.5): {512: (766, 512), 1024: (1534, 1024), 2048: (3070, 2048)},
    (8, 0.5): {512: (908, 512), 1024: (1818, 1024), 2048: (3638, 2048)},
    (64, 0.15): {512: (600, 92), 1024: (1200, 184), 2048: (2401, 367)},
    (64, 0.5): {512: (1006, 512), 1024: (2014, 1024), 2048: (4030, 2048)},
}


@pytest.mark.parametrize(
    "mu,r,inputs,expected",
    [(mu, r, i, e) for (mu, r), row in PLANNER_TABLE.items() for i, e in row.items()],
)
def test_planner_reproduces_every_reference_value(mu, r, inputs, expected):
    assert t5_raw_lengths(inputs, r, mu) == expected
    raw, targets = expected
    if not (r == 0.5 and example_lengths(raw + 1, r, mu)[1] > inputs):  # the r = 0.5 hack shortens T
        assert example_lengths(raw, r, mu) == (inputs, targets)


@given(st.integers(8, 3000), st.sampled_from([0.1, 0.15, 0.3, 0.5]), st.sampled_from([1, 2, 3, 8, 64]))
def test_planner_matches_the_transcribed_t5_helper(inputs, r, mu):
    assert t5_raw_lengths(inputs, r, mu) == reference.t5_raw_lengths(inputs, r, mu)


def test_worked_example_from_the_docstring():
    tokens = np.arange(10, 20)[None, :]
    nonnoise, noise = np.array([[4, 3]]), np.array([[1, 2]])
    mask = noise_mask_from_spans(nonnoise, noise)
    assert mask[0].astype(int).tolist() == [0, 0, 0, 0, 1, 0, 0, 0, 1, 1]
    inputs, targets = corrupt_spans(tokens, nonnoise, noise, np.array([99, 98]), eos_id=1)
    assert inputs.tolist() == [[10, 11, 12, 13, 99, 15, 16, 17, 98, 1]]
    assert targets.tolist() == [[99, 14, 98, 18, 19, 1]]
    assert span_counts(10, 0.3, 1.5) == (3, 2)


@given(st.integers(2, 60), st.data())
def test_composition_matches_reference(total, data):
    parts = data.draw(st.integers(1, total))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32)))
    keys = rng.random((5, total - 1))
    got = composition_from_keys(keys, parts)
    assert got.tolist() == [reference.composition(list(k), parts) for k in keys]
    assert np.all(got >= 1) and np.all(got.sum(axis=1) == total)


@settings(max_examples=150)
@given(
    st.integers(2, 300), st.sampled_from([0.05, 0.15, 0.5, 0.8]), st.sampled_from([1, 3, 8, 64]), st.integers(0, 2**32)
)
def test_kernels_match_reference_and_keep_every_token(length, density, mean_span, seed):
    rows = 4
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, 5, size=(rows, length))  # small ids: 0 must survive, repeats are common
    num_noise, num_spans = span_counts(length, density, mean_span)
    noise_keys = rng.random((rows, num_noise - 1))
    nonnoise_keys = rng.random((rows, length - num_noise - 1))
    noise = composition_from_keys(noise_keys, num_spans)
    nonnoise = composition_from_keys(nonnoise_keys, num_spans)
    mask = noise_mask_from_spans(nonnoise, noise)
    sentinels = np.arange(1000, 1000 - num_spans, -1)
    inputs, targets = corrupt_spans(tokens, nonnoise, noise, sentinels, eos_id=7)
    for row in range(rows):
        expected_mask = reference.noise_mask(
            reference.composition(list(nonnoise_keys[row]), num_spans),
            reference.composition(list(noise_keys[row]), num_spans),
        )
        assert mask[row].tolist() == expected_mask
        ref_inputs, ref_targets = reference.corrupt(tokens[row].tolist(), expected_mask, sentinels.tolist(), 7)
        assert inputs[row].tolist() == ref_inputs and targets[row].tolist() == ref_targets
        # Exact counts; starts with non-noise, ends with noise.
        assert mask[row].sum() == num_noise and not mask[row][0] and mask[row][-1]
        assert np.sum(np.diff(mask[row].astype(int)) == 1) == num_spans
        # Every sentinel used once and in order, in both inputs and targets.
        in_sentinels = [t for t in inputs[row] if t >= 1000 - num_spans + 1]
        out_sentinels = [t for t in targets[row] if t >= 1000 - num_spans + 1]
        assert in_sentinels == out_sentinels == sentinels.tolist()
        # Reconstruction: fill each input sentinel with the target span it names.
        spans, current = {}, None
        for t in targets[row][:-1]:
            if t in sentinels:
                current = t
                spans[current] = []
            else:
                spans[current].append(t)
        rebuilt = [x for t in inputs[row][:-1] for x in (spans[t] if t in sentinels else [t])]
        assert rebuilt == tokens[row].tolist()
    assert (inputs.shape[1], targets.shape[1]) == example_lengths(length, density, mean_span)


def test_noise_density_over_many_examples():
    rng_a, rng_b = np.random.default_rng(1), np.random.default_rng(2)
    mask = random_spans_noise_mask(2000, 568, 0.15, 3, rng_a, rng_b)
    assert mask.sum(axis=1).tolist() == [85] * 2000  # exact per example: round(568 * 0.15)
    # Span lengths average mu = 85 / 28; their positions are spread: each position is noise
    # about 15 % of the time (3 sigma band over 2000 examples).
    per_position = mask.mean(axis=0)[1:-1]
    sigma = np.sqrt(0.15 * 0.85 / 2000)
    assert np.mean(np.abs(per_position - 85 / 568) < 4 * sigma) > 0.97


@given(st.integers(2, 40), st.data())
def test_composition_with_tied_keys_ranks_ties_by_position(total, data):
    parts = data.draw(st.integers(1, total))
    keys = np.array(
        data.draw(st.lists(st.lists(st.integers(0, 2), min_size=total - 1, max_size=total - 1), min_size=1, max_size=4))
    )
    keys = keys.reshape(-1, total - 1).astype(np.uint32)
    assert composition_from_keys(keys, parts).tolist() == [reference.composition(list(k), parts) for k in keys]
