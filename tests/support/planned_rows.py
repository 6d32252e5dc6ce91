"""A planner's rows (``PlannedRows``: runs, no array a token) against a packer's: shared by the planners' tests."""

import numpy as np

from objcli.kernels.runs import decode_runs


def decoded(planned, name: str, width: int) -> np.ndarray:
    """Column ``name`` of planned rows, decoded from its runs to (rows, width); the runs well formed."""
    first, steps, lengths, per_row = planned.runs[name]
    assert per_row.sum() == len(first) and len(per_row) == planned.num_rows
    assert np.all(lengths > 0) and np.all(np.isin(steps, (0, 1)))
    return decode_runs(first, steps, lengths).reshape(-1, width)


def same_as_packed(planned, rows, row_length: int) -> None:
    """Planned rows are the packer's rows: ids (as positions), segments, positions, and the bookkeeping."""
    assert (rows is None) == (planned is None)
    if rows is None:
        return
    for name in ("input_ids", "segment_ids", "position_ids"):
        assert np.array_equal(decoded(planned, name, row_length), rows.columns[name]), name
    for name in ("tokens", "padding", "documents"):
        assert np.array_equal(getattr(planned, name), getattr(rows, name)), name
    assert planned.segments() == rows.segments()


VOCABULARY = 1000  # positions are stored as VOCABULARY + position, as a plan's are


def document_batches(batches, bos_id, eos_id):
    """Each batch of document lengths, its tokens their store positions (one after another over the batches):
    (the examples a packer takes, the ``ExampleRuns`` a planner takes)."""
    from objcli.kernels.example_runs import ExampleRuns
    from objcli.kernels.ragged import lengths_to_offsets
    from objcli.objectives.base import DocumentBatch, document_examples

    start = VOCABULARY
    for lengths in batches:
        offsets = lengths_to_offsets(np.array(lengths, dtype=np.int64))
        tokens = np.arange(start, start + offsets[-1], dtype=np.int32)
        runs = ExampleRuns.of_documents(start + offsets[:-1], np.diff(offsets), bos_id, eos_id)
        start += int(offsets[-1])
        yield document_examples(DocumentBatch([], tokens, offsets, 0, 0), bos_id, eos_id), runs
