"""The keyed permutation ``--shuffle-rows`` writes in and a plan reads in (``kernels/permutation.py``)."""

from __future__ import annotations

import numpy as np
import reference
from hypothesis import given, settings
from hypothesis import strategies as st

from objcli.kernels.permutation import ROUNDS, permutation_keys, permuted


@given(st.integers(1, 3000), st.integers(0, 2**32))
@settings(max_examples=80, deadline=None)
def test_a_permutation_of_every_index_equal_to_the_reference_loop(count, seed):
    keys = permutation_keys(np.random.default_rng(seed))
    assert len(keys) == ROUNDS
    made = permuted(np.arange(count), count, keys)
    assert sorted(made.tolist()) == list(range(count))  # each index once: a permutation
    picks = np.random.default_rng(seed).integers(0, count, size=min(count, 40))
    expected = [reference.keyed_permutation(int(i), count, [int(k) for k in keys]) for i in picks]
    assert permuted(picks, count, keys).tolist() == expected == made[picks].tolist()  # one index, as all


def test_other_keys_give_other_orders_and_none_is_near_the_identity():
    count = 10_000
    orders = [permuted(np.arange(count), count, permutation_keys(np.random.default_rng(s))) for s in range(4)]
    for k, order in enumerate(orders):
        assert np.mean(order == np.arange(count)) < 0.01  # hardly a row left in place
        assert abs(np.corrcoef(order, np.arange(count))[0, 1]) < 0.05  # no trace of the order in
        for other in orders[k + 1 :]:
            assert np.mean(order == other) < 0.01
