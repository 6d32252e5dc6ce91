"""A plan's rows made (formats/row_plan.with_ids): a column's store positions become the ids at them, every
other value (an id below the vocabulary, -100) itself, against a loop over the values
(tests/support/reference.py); a position past the partition's ids is refused."""

import numpy as np
import pytest
import reference
from hypothesis import given, settings
from hypothesis import strategies as st

from objcli.formats.row_plan import with_ids
from objcli.rows import Ragged

VOCABULARY = 50


class _Partition:  # a store partition's ids, taken by position (reading/store_tokens.PartitionIds)
    def __init__(self, ids):
        self.ids = np.asarray(ids, np.uint16)

    def __len__(self):
        return len(self.ids)

    def take(self, positions):
        return self.ids[positions]


@st.composite
def columns(draw):
    ids = draw(st.lists(st.integers(0, VOCABULARY - 1), min_size=1, max_size=60))
    own = st.one_of(st.integers(0, VOCABULARY - 1), st.just(-100))
    place = st.integers(0, len(ids) - 1).map(lambda p: p + VOCABULARY)
    return ids, np.array(draw(st.lists(st.one_of(own, place), max_size=40)), np.int32)


@settings(max_examples=200, deadline=None)
@given(columns(), st.integers(0, 3))
def test_positions_become_the_ids_at_them(case, rows):
    ids, values = case
    expected = reference.with_ids_reference(values.tolist(), ids, VOCABULARY)
    made = with_ids(values, _Partition(ids), VOCABULARY)
    assert made.dtype == np.int32 and made.tolist() == expected
    offsets = np.linspace(0, len(values), rows + 2).astype(np.int64)
    ragged = with_ids(Ragged(values, offsets), _Partition(ids), VOCABULARY)
    assert ragged.values.tolist() == expected and ragged.offsets is offsets


def test_a_position_past_the_ids_is_refused():
    ids = _Partition([7, 8, 9])
    assert with_ids(np.array([2, VOCABULARY + 2, -100], np.int32), ids, VOCABULARY).tolist() == [2, 9, -100]
    with pytest.raises(ValueError, match="past its store partition's 3"):
        with_ids(np.array([VOCABULARY + 3], np.int32), ids, VOCABULARY)
