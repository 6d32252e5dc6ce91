"""``best-fit`` planned from lengths (``packing/best_fit.BestFitPlanner``) against ``BestFitPacker`` itself: for
any batches of documents (longer than a row too), BOS/EOS, row length and window, the planner's runs decode to
the packer's rows (ids as positions), its batches are the packer's, and its bookkeeping and counters are the
packer's."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from planned_rows import VOCABULARY, decoded, document_batches, same_as_packed

from objcli.kernels.example_runs import ExampleRuns
from objcli.packing import PackSettings, make_packer
from objcli.packing.best_fit import BestFitPlanner
from objcli.rows import ColumnSpec

IDS = ColumnSpec("input_ids", "ragged", 0, 10**9, "tokens")
PAD = 3


@settings(max_examples=200, deadline=None)
@given(
    batches=st.lists(st.lists(st.integers(0, 60), max_size=8), min_size=1, max_size=5),
    bos=st.booleans(),
    eos=st.booleans(),
    row_length=st.integers(2, 30),
    window=st.integers(1, 120),
)
def test_planned_rows_are_the_packers_rows(batches, bos, eos, row_length, window):
    bos_id, eos_id = (1 if bos else None), (2 if eos else None)
    pack_settings = PackSettings(row_length, (IDS,), pad_id=PAD, window=window)
    packer, planner = make_packer("best-fit", pack_settings), BestFitPlanner(pack_settings)
    for examples, runs in document_batches(batches, bos_id, eos_id):
        same_as_packed(planner.feed(runs), packer.process(examples), row_length)
    same_as_packed(planner.finish(), packer.finish(), row_length)
    assert {k: v for k, v in planner.counters.items() if v} == {k: v for k, v in packer.counters.items() if v}


def test_a_worked_example():
    """Documents a (5 tokens), b (1) and c (2) with EOS (id 2), rows of 4, pad 3. a's example (6 tokens) is cut
    into a row-sized piece and one of 2; best-fit-decreasing places the pieces longest first into the fullest
    row they fit: a[0:4], then c+EOS (3) in a new row, then a[4:]+EOS (2) in a new row, then b+EOS (2) beside it."""
    planner = BestFitPlanner(PackSettings(4, (IDS,), pad_id=PAD, window=1))
    planned = planner.feed(ExampleRuns.of_documents(VOCABULARY + np.array([0, 5, 6]), np.array([5, 1, 2]), None, 2))
    assert decoded(planned, "input_ids", 4).tolist() == [
        [1000, 1001, 1002, 1003],
        [1006, 1007, 2, PAD],
        [1004, 2, 1005, 2],
    ]
    assert decoded(planned, "segment_ids", 4).tolist() == [[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 2, 2]]
    assert decoded(planned, "position_ids", 4).tolist() == [[0, 1, 2, 3], [0, 1, 2, 0], [0, 1, 0, 1]]
    assert planned.documents.tolist() == [1, 1, 1] and planned.padding.tolist() == [0, 1, 0]
    assert planner.counters["documents_split"] == 1
