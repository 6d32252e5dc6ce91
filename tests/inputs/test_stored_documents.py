"""A plan run's documents keep their ids beside their store positions where the objective reads values
(``StoredDocuments.ids``): taken, sliced and joined as the run takes them (a mixture's copies, windows), every
position among some values is its token's id again, and every other value (an id an objective put in) itself."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from objcli.inputs.stored_documents import StoredDocuments
from objcli.kernels.ragged import lengths_to_offsets

VOCABULARY = 1000


def _documents(lengths, start, rng):
    offsets = lengths_to_offsets(np.array(lengths, np.int64))
    count, tokens = len(lengths), int(offsets[-1])
    ids = rng.integers(0, VOCABULARY, tokens).astype(np.int32)
    positions = np.arange(start, start + tokens, dtype=np.int32)
    measures = [np.zeros(count, np.int64), np.zeros(count, np.int64), np.zeros(count, np.uint32)]
    return StoredDocuments(positions, offsets, *measures, np.zeros(count, bool), ids=ids)


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 9), min_size=1, max_size=12),
    more=st.lists(st.integers(0, 9), min_size=1, max_size=6),
    seed=st.integers(0, 2**31),
)
def test_positions_are_their_ids_again_after_take_slice_and_concat(lengths, more, seed):
    rng = np.random.default_rng(seed)
    first = _documents(lengths, VOCABULARY, rng)
    second = _documents(more, VOCABULARY + len(first.tokens), rng)
    order = rng.permutation(len(lengths))
    joined = StoredDocuments.concat([first.take(order), second[0 : len(more)]])
    truth = dict(zip(first.tokens.tolist() + second.tokens.tolist(), first.ids.tolist() + second.ids.tolist()))
    inserted = rng.integers(0, VOCABULARY, 5).astype(np.int32)  # ids an objective put in (BOS, <mask>)
    values = rng.permutation(np.concatenate([joined.tokens, inserted])).astype(np.int32)
    expected = [truth.get(v, v) for v in values.tolist()]
    assert joined.ids_of(values).tolist() == expected
    assert np.array_equal(joined.ids, [truth[p] for p in joined.tokens.tolist()])  # aligned with the positions
