"""Writing and reading Arrow, Parquet, token stores and provenance never imports pandas.

pyarrow's own conversions (``pa.array`` of NumPy, ``to_numpy``, ``pq.read_table``) import it where it is
installed (``datasets`` installs it): 0.3 s of CPU in every objcli process and every pool worker that
wrote a store or read a shard. objcli builds its arrays from buffers instead (``formats/_arrow_columns``);
this test runs the commands that touch Arrow in one fresh interpreter, pool workers as threads in it.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runs import SAMPLE

IDS_PARQUET = Path(__file__).resolve().parents[1] / "data" / "token_files" / "mapped.parquet"

SCRIPT = """
import sys
from objcli.cli import main

def run(*args):
    try:
        main(list(args), standalone_mode=False)
    except SystemExit as done:
        assert not done.code, (args, done.code)

tokenizer, corpus, ids, out = sys.argv[1:5]
common = ["-t", tokenizer, "--pool", "threads", "--workers", "2", "--partition-size", "64KiB", "-q"]
run("tokenize", corpus, *common, "--provenance", "-o", out + "/store")
run("transform", out + "/store", *common, "--objective", "clm", "--seq-len", "128", "--format", "parquet",
    "--provenance", "-o", out + "/parquet")
run("transform", out + "/store", *common, "--objective", "span-corruption", "--seq-len", "128", "--format",
    "arrow", "--shuffle-rows", "--provenance", "-o", out + "/arrow")
run("transform", ids, *common, "--input-format", "input-ids", "--objective", "clm", "--seq-len", "64",
    "-o", out + "/from-ids")
run("verify", out + "/parquet")
run("verify", out + "/arrow")
run("trace", out + "/parquet", "3")
run("trace", out + "/arrow", "3")
print("pandas" in sys.modules, "pyarrow" in sys.modules)
"""


def test_arrow_parquet_stores_and_provenance_are_written_and_read_without_pandas(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, SAMPLE / "tokenizer.model", SAMPLE / "prose.jsonl", IDS_PARQUET, tmp_path],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[-1] == "False True", result.stdout[-2000:]  # pyarrow used, pandas never


DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(DTYPES), st.lists(st.integers(0, 255), max_size=70), st.data())
def test_arrays_from_buffers_are_pyarrows_own(dtype, values, data):
    """``int_array`` (NumPy to Arrow from the buffer, booleans packed to bits) and ``numpy_of`` (back, slices
    at any offset) give what pyarrow's own conversions give, dtype for dtype."""
    from objcli.formats._arrow_columns import int_array, numpy_of

    array = np.array(values).astype(dtype)
    built = int_array(array, dtype)
    assert built.equals(pa.array(array)) and built.type == pa.from_numpy_dtype(np.dtype(dtype))
    start = data.draw(st.integers(0, len(values)))
    back = numpy_of(built.slice(start))
    assert (
        back.dtype == np.dtype(dtype)
        and back.tolist() == pa.array(array).slice(start).to_numpy(zero_copy_only=False).tolist()
    )


@pytest.mark.parametrize(
    "kind",
    [
        pa.int64(),
        pa.uint16(),
        pa.bool_(),
        pa.list_(pa.int32()),
        pa.large_list(pa.int8()),
        pa.string(),
        pa.dictionary(pa.int32(), pa.string()),
    ],
    ids=str,
)
def test_a_column_of_no_chunks_is_an_empty_array_of_its_type(kind, tmp_path):
    """An empty Parquet file's columns can come back with no chunks (a dictionary column of the provenance
    file's kind does): ``single_array`` gives an empty array of the type, never a process abort."""
    from objcli.formats._arrow_columns import single_array

    array = single_array(pa.chunked_array([], type=kind))
    assert len(array) == 0 and array.type == kind
