"""``concat`` planned from lengths (packing/concat.ConcatPlanner) against ``ConcatPacker`` itself: for any
batches of documents, BOS/EOS, row length and overlap, the planner's runs decode to the packer's rows
(ids as positions), its batches are the packer's, and its bookkeeping and counters are the packer's."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from planned_rows import VOCABULARY, decoded, document_batches

from objcli.kernels.example_runs import ExampleRuns
from objcli.packing import PackSettings, make_packer
from objcli.packing.concat import ConcatPlanner
from objcli.rows import ColumnSpec

IDS = ColumnSpec("input_ids", "ragged", 0, 10**9, "tokens")


@settings(max_examples=200, deadline=None)
@given(
    batches=st.lists(st.lists(st.integers(0, 40), max_size=8), min_size=1, max_size=5),
    bos=st.booleans(),
    eos=st.booleans(),
    row_length=st.integers(2, 30),
    overlap=st.sampled_from([0, 1]),
)
def test_planned_rows_are_the_packers_rows(batches, bos, eos, row_length, overlap):
    """Every row made at finish, in one pass: the packer's rows, counts and counters; with ``notes_batches``
    the batches the packer wrote them in (a row step keys its draws to each)."""
    bos_id, eos_id = (1 if bos else None), (2 if eos else None)
    packer = make_packer("concat", PackSettings(row_length, (IDS,), overlap=overlap))
    planner = ConcatPlanner(row_length, overlap)
    whole = ConcatPlanner(row_length, overlap, notes_batches=False)
    made = []
    for examples, runs in document_batches(batches, bos_id, eos_id):
        rows = packer.process(examples)
        assert planner.feed(runs) is None and whole.feed(runs) is None
        made += [rows] if rows is not None else []
    assert packer.finish() is None
    at_once, batched = whole.finish(), planner.finish()
    assert {k: v for k, v in planner.counters.items() if v} == {k: v for k, v in packer.counters.items() if v}
    assert (at_once is None) == (batched is None) == (not made) and whole.counters == planner.counters
    if made:
        assert batched.batches.tolist() == [rows.num_rows for rows in made] and at_once.batches is None
        for name in ("input_ids", "segment_ids", "position_ids"):
            expected = np.concatenate([rows.columns[name] for rows in made])
            assert np.array_equal(decoded(at_once, name, row_length), expected), name
            assert np.array_equal(decoded(batched, name, row_length), expected), name
        for name in ("tokens", "padding", "documents"):
            assert np.array_equal(getattr(at_once, name), np.concatenate([getattr(r, name) for r in made])), name
        assert at_once.segments() == sum(rows.segments() for rows in made)


def test_a_worked_example():
    """Two documents of 3 and 4 tokens with EOS (id 2), rows of 4: [a0 a1 a2 EOS] [b0 b1 b2 b3], EOS left."""
    planner = ConcatPlanner(4, 0)
    assert planner.feed(ExampleRuns.of_documents(VOCABULARY + np.array([0, 3]), np.array([3, 4]), None, 2)) is None
    planned = planner.finish()
    assert decoded(planned, "input_ids", 4).tolist() == [[1000, 1001, 1002, 2], [1003, 1004, 1005, 1006]]
    assert decoded(planned, "segment_ids", 4).tolist() == [[1, 1, 1, 1], [1, 1, 1, 1]]
    assert decoded(planned, "position_ids", 4).tolist() == [[0, 1, 2, 3], [0, 1, 2, 3]]
    assert planned.documents.tolist() == [1, 1] and planned.runs["input_ids"][3].tolist() == [2, 1]
    assert planned.batches.tolist() == [2]
    assert planner.counters["tokens_dropped"] == 1 and planner.counters["documents_split"] == 0
