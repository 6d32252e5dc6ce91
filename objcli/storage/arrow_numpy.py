"""Arrow arrays as NumPy views without pyarrow's ``to_numpy``, which imports pandas (200 ms on every
``stats``, ``verify``, ``inspect``, ``reshard`` and ``--shuffle-rows``) to answer the same question."""

from __future__ import annotations

import numpy as np

_WIDTHS = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
           "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64}


def numpy_of(array) -> np.ndarray:
    """A fixed-width integer Arrow array with no nulls as a read-only NumPy view of its buffer;
    anything else through pyarrow."""
    dtype = _WIDTHS.get(str(array.type))
    if dtype is None or array.null_count:
        return array.to_numpy(zero_copy_only=False)
    item = np.dtype(dtype).itemsize
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * item)


def list_parts(column) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets) of a list array, values as stored (offsets may not start at 0 in a slice)."""
    offsets = numpy_of(column.offsets)
    return numpy_of(column.values), offsets
