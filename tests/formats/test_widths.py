"""Columns at the width of their values (issue 73): uint16 ids, positions and segments for a vocabulary
and rows under 65,536 (int16 labels with -100), declared to ``datasets`` as such, half the bytes a token
of int32; outputs written before (int32 columns) are still read, converted by ``reshard``, and never
mixed with the new widths under one manifest."""

from __future__ import annotations

import hashlib
import json
import re
import shutil

import numpy as np
import pyarrow as pa
import pytest
from runs import SAMPLE, read_output, run_cli, run_transform

from objcli.commands.verify import verify_output
from objcli.rows import ColumnSpec

SPM = SAMPLE / "tokenizer.model"


@pytest.mark.parametrize(
    ("low", "high", "width"),
    [(0, 255, "uint8"), (0, 256, "uint16"), (0, 65_535, "uint16"), (0, 65_536, "uint32"), (-100, 127, "int8"),
     (-100, 128, "int16"), (-100, 32_767, "int16"), (-100, 32_768, "int32")],
)  # fmt: skip
def test_the_narrowest_width_that_holds_the_range(low, high, width):
    assert ColumnSpec("c", "ragged", low, high).narrow_dtype() == np.dtype(width)


def test_clm_rows_take_two_bytes_a_token_and_trainers_get_int64(tmp_path):
    datasets = pytest.importorskip("datasets")
    summary = run_transform([SAMPLE / "prose.jsonl"], SPM, tmp_path / "out", seq_len=2048, output_format="hf")
    widths = {c["name"]: c["disk_dtype"] for c in summary.manifest["columns"]}
    assert widths == {"input_ids": "uint16", "segment_ids": "uint16", "position_ids": "uint16"}
    assert {c["arrow_type"] for c in summary.manifest["columns"]} == {"fixed_size_list<item: uint16>[2048]"}
    shards, tokens = summary.manifest["shards"], summary.totals["tokens"]
    batches = [b for s in shards for b in pa.ipc.open_stream(tmp_path / "out" / s["files"][0])]
    assert sum(b.nbytes for b in batches) == 6 * tokens  # 3 columns x 2 bytes, no offsets (12 bytes a row)
    written = sum(b for s in shards for b in s["bytes"].values() if b)
    assert written / tokens < 6.01  # and the stream's schema and batch headers (12.01 at int32, 6.011 as lists)
    rows = datasets.load_from_disk(str(tmp_path / "out")).with_format("torch")
    assert rows[0]["input_ids"].dtype == rows[0]["position_ids"].dtype == __import__("torch").int64
    assert rows[0:3]["input_ids"].shape == (3, 2048)  # fixed-size lists: a batch is one 2-D tensor


INT32 = pa.int32()


def _as_written_before(folder, width=INT32) -> None:
    """Rewrite an Arrow output as objcli wrote it before widths (int32 lists) or before fixed-size lists
    (lists at ``width``), the manifest to match."""
    manifest = json.loads((folder / "manifest.json").read_text())
    for shard in manifest["shards"]:
        path = folder / shard["files"][0]
        table = pa.ipc.open_stream(path.read_bytes()).read_all()  # in memory: the file is written over
        types = {f.name: f.type.value_type if width is None else width for f in table.schema}
        old = table.cast(pa.schema([pa.field(f.name, pa.list_(types[f.name]), nullable=False) for f in table.schema]))
        with pa.ipc.new_stream(str(path), old.schema) as writer:
            writer.write_table(old)
        shard["sha256"][path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
        shard["bytes"][path.name] = path.stat().st_size
    for column in manifest["columns"]:
        column.pop("length", None)
        column.update(arrow_type=f"list<item: {types[column['name']]}>", disk_dtype=str(types[column["name"]]))
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))


def test_an_output_at_the_old_widths_is_read_converted_by_reshard_and_never_mixed(tmp_path):
    run_transform([SAMPLE / "prose.jsonl"], SPM, tmp_path / "old", seq_len=256, shard_size="100")
    _, rows = read_output(tmp_path / "old")
    _as_written_before(tmp_path / "old")
    assert verify_output(tmp_path / "old").ok and read_output(tmp_path / "old")[1] == rows
    assert run_cli("stats", tmp_path / "old").returncode == 0
    run_transform([SAMPLE / "code.jsonl"], SPM, tmp_path / "new", seq_len=256)
    merged = run_cli("merge", tmp_path / "old", tmp_path / "new", "-o", tmp_path / "m")
    assert merged.returncode == 1 and f"'objcli reshard {tmp_path / 'old'} --num-shards" in merged.stderr
    appended = run_cli("transform", SAMPLE / "code.jsonl", "-o", tmp_path / "old", "--append")
    assert appended.returncode == 1 and f"converts with 'objcli reshard {tmp_path / 'old'}" in appended.stderr
    for size in ("1MB", "37"):  # the stream-copy path and the row path both convert
        out = tmp_path / f"converted-{size}"
        assert run_cli("reshard", tmp_path / "old", "--shard-size", size, "-o", out).returncode == 0
        assert verify_output(out).ok and read_output(out)[1] == rows
        columns = json.loads((out / "manifest.json").read_text())["columns"]
        assert {c["disk_dtype"] for c in columns} == {"uint8", "uint16"}
        assert {c["arrow_type"].split("<")[0] for c in columns} == {"fixed_size_list"}
    assert run_cli("merge", tmp_path / "converted-1MB", tmp_path / "new", "-o", tmp_path / "m").returncode == 0


@pytest.mark.parametrize("objective", ["clm", "mlm", "t5"])
def test_an_output_of_lists_is_read_converted_to_fixed_size_lists_and_never_mixed(tmp_path, objective):
    """Issue 73: rows of --seq-len are fixed-size lists (no offsets); an output written before, as lists at
    the same widths, is still read, refused beside the new layout by merge and --append, and converted by
    reshard (each fixed column's one row length read from its shards) to the columns a run writes now."""
    flags = {"objective": objective, "seq_len": 128, "output_format": "arrow"}
    run_transform([SAMPLE / "prose.jsonl"], SPM, tmp_path / "old", shard_size="100", **flags)
    _, rows = read_output(tmp_path / "old")
    run_transform([SAMPLE / "prose.jsonl"], SPM, tmp_path / "now", shard_size="100", **flags)
    _as_written_before(tmp_path / "old", width=None)
    assert "fixed_size_list" not in (tmp_path / "old" / "manifest.json").read_text()
    assert verify_output(tmp_path / "old").ok and read_output(tmp_path / "old")[1] == rows
    assert run_cli("stats", tmp_path / "old").returncode == 0
    merged = run_cli("merge", tmp_path / "old", tmp_path / "now", "-o", tmp_path / "m")
    assert merged.returncode == 1 and "was written before columns took their values' width" in merged.stderr
    appended = run_cli("transform", SAMPLE / "code.jsonl", "-o", tmp_path / "old", "--append")
    assert appended.returncode == 1 and "converts with 'objcli reshard" in appended.stderr, appended.stderr
    suggested = re.search(r"'objcli (reshard [^']+)'", merged.stderr).group(1).split()
    in_place = tmp_path / "in-place"
    shutil.copytree(tmp_path / "old", in_place)
    assert run_cli(*[in_place if word == str(tmp_path / "old") else word for word in suggested]).returncode == 0
    assert (
        run_cli("merge", in_place, tmp_path / "now", "-o", tmp_path / "m-advised").returncode == 0
    )  # the advice works
    assert run_cli("reshard", tmp_path / "old", "--shard-size", "100", "-o", tmp_path / "converted").returncode == 0
    converted, now = (json.loads((tmp_path / f / "manifest.json").read_text()) for f in ("converted", "now"))
    assert converted["columns"] == now["columns"] and read_output(tmp_path / "converted")[1] == rows
    assert verify_output(tmp_path / "converted").ok
    assert run_cli("merge", tmp_path / "converted", tmp_path / "now", "-o", tmp_path / "m").returncode == 0


@pytest.mark.parametrize("length", [-1, 0, 100, "256"])
def test_a_manifest_whose_row_length_disagrees_with_its_type_is_one_line(tmp_path, length):
    """A hand-edited ``length`` (negative, missing from a fixed-size list, another than the type's, a
    string) is one line naming the column for every command, never a writer's traceback in reshard."""
    run_transform([SAMPLE / "prose.jsonl"], SPM, tmp_path / "out", seq_len=256, output_format="parquet")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["columns"][0]["length"] == 256
    manifest["columns"][0]["length"] = length
    (tmp_path / "out" / "manifest.json").write_text(json.dumps(manifest))
    for command in (("verify",), ("stats",), ("reshard", "--shard-size", "50", "-o", tmp_path / "re")):
        result = run_cli(command[0], tmp_path / "out", *command[1:])
        assert result.returncode == 1 and result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
        assert "length" in result.stderr and "Traceback" not in result.stderr, result.stderr
