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
