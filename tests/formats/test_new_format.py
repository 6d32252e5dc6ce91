"""A new output format is one module: a throwaway format registered here (rows as JSON lines, in 40
lines) works with transform, verify, inspect, stats, merge, reshard, --append and --shuffle-rows with
nothing else written, and stores exactly the rows the Arrow format stores."""

import json

import numpy as np
import pytest
from readback import output_rows
from runs import cli, folder_bytes, run_transform

from objcli import formats
from objcli.commands.show import inspect_output
from objcli.commands.stats import compute_stats
from objcli.commands.verify import verify_output
from objcli.formats import Column, OutputFormat
from objcli.formats.base import commit, temp_file
from objcli.recipe import config_from_values
from objcli.rows import Ragged
from objcli.run.append import appended_values
from objcli.transform import transform

NAME = "rows-jsonl-test"


class _JsonRowsWriter:
    def __init__(self, base, columns):
        self.columns, self.temp = columns, temp_file(base, ".rows.jsonl")

    def write(self, rows):
        for i in range(rows.num_rows):
            row = {}
            for spec in self.columns:
                column = rows.columns[spec.name]
                if isinstance(column, Ragged):
                    row[spec.name] = column.values[column.offsets[i] : column.offsets[i + 1]].tolist()
                else:
                    row[spec.name] = column[i].tolist()
            self.temp.write((json.dumps(row) + "\n").encode())

    def close(self):
        return [commit(self.temp)]


class _JsonRowsFormat(OutputFormat):
    name = NAME
    writer = _JsonRowsWriter

    def read_columns(self, folder, manifest, shard):
        rows = [json.loads(line) for line in (folder / shard.files[0]).read_text().splitlines()]
        columns = {}
        for spec in manifest.columns:
            values = [row[spec.name] for row in rows]
            if spec.kind == "scalar":
                columns[spec.name] = Column.of_rows(np.array(values, dtype=np.int64))
            else:
                lengths = [len(v) for v in values]
                flat = np.array([x for v in values for x in v], dtype=np.int64)
                columns[spec.name] = Column(flat, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
        return columns


@pytest.fixture
def registered():
    formats.register(_JsonRowsFormat())
    yield NAME
    formats.FORMATS.unregister(NAME)


@pytest.mark.parametrize(
    ("objective", "packing"), [("clm", "best-fit"), ("mlm", "concat"), ("span-corruption", "none")]
)
def test_a_format_registered_in_a_test_works_with_every_command(
    registered, objective, packing, small_corpus, sample_tokenizer, tmp_path
):
    options = {"objective": objective, "packing": packing, "seq_len": 64, "shard_size": "40", "pool": "threads"}
    run_transform([small_corpus], sample_tokenizer, tmp_path / "new", output_format=NAME, **options)
    run_transform([small_corpus], sample_tokenizer, tmp_path / "arrow", output_format="arrow", **options)
    written = sorted(p.name for p in (tmp_path / "new").iterdir())
    assert len([n for n in written if n.endswith(".rows.jsonl")]) > 2 and "manifest.json" in written
    assert verify_output(tmp_path / "new").ok
    assert output_rows(tmp_path / "new") == output_rows(tmp_path / "arrow")  # the same rows, stored another way
    assert compute_stats(tmp_path / "new")["rows"] == compute_stats(tmp_path / "arrow")["rows"]
    assert (
        compute_stats(tmp_path / "new")["supervised_tokens"] == compute_stats(tmp_path / "arrow")["supervised_tokens"]
    )
    shown = ["\n".join(inspect_output(str(tmp_path / f), 2, None, False)) for f in ("new", "arrow")]
    assert shown[0].replace(".rows.jsonl", ".arrow") == shown[1]

    run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path / "more", output_format=NAME, **options)
    merged = cli(["merge", str(tmp_path / "new"), str(tmp_path / "more"), "-o", str(tmp_path / "m")])
    assert merged.exit_code == 0, merged.output
    assert verify_output(tmp_path / "m").ok and output_rows(tmp_path / "m") == output_rows(
        tmp_path / "new"
    ) + output_rows(tmp_path / "more")

    resharded = cli(["reshard", str(tmp_path / "new"), "--num-shards", "2", "-o", str(tmp_path / "r")])
    assert resharded.exit_code == 0, resharded.output
    assert verify_output(tmp_path / "r").ok and output_rows(tmp_path / "r") == output_rows(tmp_path / "new")
    assert len(json.loads((tmp_path / "r" / "manifest.json").read_text())["shards"]) == 2


def test_a_registered_format_takes_the_row_shuffle(registered, small_corpus, sample_tokenizer, tmp_path):
    options = {"seq_len": 64, "shard_size": "40", "pool": "threads", "packing": "concat", "shuffle_rows": True}
    run_transform([small_corpus], sample_tokenizer, tmp_path / "new", output_format=NAME, **options)
    run_transform([small_corpus], sample_tokenizer, tmp_path / "arrow", output_format="arrow", **options)
    assert verify_output(tmp_path / "new").ok and output_rows(tmp_path / "new") == output_rows(tmp_path / "arrow")


def test_a_registered_format_takes_an_append(registered, small_corpus, sample_tokenizer, tmp_path):
    """B appended to an output of A holds the rows of the run over A then B."""
    lines = (small_corpus / "prose.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "a.jsonl").write_text("".join(lines[:70]), encoding="utf-8")
    (tmp_path / "b.jsonl").write_text("".join(lines[70:]), encoding="utf-8")
    a, b = str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")
    common = {"tokenizer": str(sample_tokenizer), "partition_size": "16KiB", "seq_len": 64, "output_format": NAME}
    whole = {**common, "inputs": [a, b], "input_breaks": [1], "output": str(tmp_path / "whole")}
    transform(config_from_values(whole), workers=1, pool="threads")
    transform(
        config_from_values({**common, "inputs": [a], "output": str(tmp_path / "grown")}), workers=1, pool="threads"
    )
    values, manifest = appended_values(
        {"inputs": [b], "output": str(tmp_path / "grown"), "tokenizer": common["tokenizer"]}, {}
    )
    transform(config_from_values(values), workers=1, pool="threads", append=manifest)
    assert verify_output(tmp_path / "grown").ok
    assert folder_bytes(tmp_path / "grown") == folder_bytes(tmp_path / "whole")


POSITIONS_FORMAT = '''
"""A throwaway format of its own columns: JSON lines of each row's ids and their positions, restarting at each
packed sequence (what a padding-free trainer takes instead of segment ids); only next-token rows fit it."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np

from ..rows import ColumnSpec, Ragged
from ..storage.manifest import ColumnInfo
from .base import Column, OutputFormat, commit, register, temp_file


def _rows(column, count):
    if isinstance(column, Ragged):
        return [column.values[a:b] for a, b in zip(column.offsets[:-1], column.offsets[1:])]
    return [column[i] for i in range(count)]


class PositionsWriter:
    def __init__(self, base, columns):
        self.temp = temp_file(base, ".positions.jsonl")

    def write(self, rows):
        count = len(rows.tokens)
        ids = _rows(rows.columns["input_ids"], count)
        segments = _rows(rows.columns["segment_ids"], count) if "segment_ids" in rows.columns else None
        for i, row in enumerate(ids):
            seg = np.ones(len(row), np.int64) if segments is None else np.asarray(segments[i])
            starts = np.flatnonzero(np.concatenate([[True], seg[1:] != seg[:-1]]))
            positions = np.arange(len(row)) - np.repeat(starts, np.diff(np.append(starts, len(row))))
            line = {"input_ids": np.asarray(row).tolist(), "position_ids": positions.tolist()}
            self.temp.write((json.dumps(line) + "\\n").encode())

    def close(self):
        return [commit(self.temp)]


class PositionsFormat(OutputFormat):
    name = "positions-jsonl-test"
    writer = PositionsWriter
    help = "JSON lines of input_ids and position_ids"

    def refuses(self, objective, columns):
        if objective.next_token_rows and not any(c.role == "labels" for c in columns):
            return None
        return (f"--format {self.name} holds next-token rows (ids and their positions), and {objective.name}'s "
                "rows are not; choose --format arrow")

    def recorded_columns(self, columns):
        ids = replace(next(c for c in columns if c.name == "input_ids"), kind="ragged", length=0)  # a list a row
        positions = ColumnSpec("position_ids", "ragged", 0, 2**31 - 1, "each id's place in its sequence",
                               role="positions")
        return [ColumnInfo.of(ids, np.dtype(np.int64), "json"), ColumnInfo.of(positions, np.dtype(np.int64), "json")]

    def read_columns(self, folder, manifest, shard):
        rows = [json.loads(line) for line in (folder / shard.files[0]).read_text().splitlines()]
        columns = {}
        for spec in manifest.columns:
            values = [row[spec.name] for row in rows]
            offsets = np.concatenate([[0], np.cumsum([len(v) for v in values])]).astype(np.int64)
            columns[spec.name] = Column(np.array([x for v in values for x in v], np.int64), offsets)
        return columns


POSITIONS = register(PositionsFormat())
'''


def test_a_format_of_its_own_columns_and_refusals_is_one_module_as_the_page_says(tmp_path):
    """The output-format recipe of architecture.md, followed in a copy of the package: a format storing columns
    the objective does not make (positions from the packer's segments) and refusing rows it cannot hold, in one
    module; the run, verify, inspect and stats take it, its refusal is one line, nothing else is edited."""
    from package_copies import copy_package, edited_modules, run_in
    from runs import ROOT, SAMPLE, read_output

    steps = (ROOT / "objcli" / "docs" / "architecture.md").read_text().split("## Adding an output format")[1]
    assert "refuses(objective, columns)" in steps.split("\n## ")[0] and "recorded_columns" in steps
    package = copy_package(tmp_path / "pkg")
    (package / "objcli" / "formats" / "positions_jsonl.py").write_text(POSITIONS_FORMAT)

    def objcli(*args):
        return run_in(package, "-m", "objcli", *args)

    common = [SAMPLE / "prose.jsonl", "-t", SAMPLE / "tokenizer.model", "--seq-len", "128", "--packing", "best-fit"]
    done = [objcli("transform", *common, "--format", f, "-o", tmp_path / f, "-q") for f in ("positions-jsonl-test",
                                                                                        "arrow")]  # fmt: skip
    assert all(d.returncode == 0 for d in done), [d.stderr for d in done]
    manifest, arrow = read_output(tmp_path / "arrow")
    written = [json.loads(line) for p in sorted((tmp_path / "positions-jsonl-test").glob("*.positions.jsonl"))
               for line in p.read_text().splitlines()]  # fmt: skip
    assert [r["input_ids"] for r in written] == arrow["input_ids"]
    for row, segments in zip(written, arrow["segment_ids"]):  # each sequence counts from 0, padding its own run
        run_start = [i == 0 or segments[i] != segments[i - 1] for i in range(len(segments))]
        expected = [0 if run_start[i] else None for i in range(len(segments))]
        for i in range(1, len(segments)):
            expected[i] = 0 if run_start[i] else expected[i - 1] + 1
        assert row["position_ids"] == expected
    recorded = json.loads((tmp_path / "positions-jsonl-test" / "manifest.json").read_text())["columns"]
    assert [(c["name"], c["role"]) for c in recorded] == [("input_ids", "tokens"), ("position_ids", "positions")]
    for command in ("verify", "inspect"):
        shown = objcli(command, tmp_path / "positions-jsonl-test")
        assert shown.returncode == 0, command + shown.stdout + shown.stderr
    figures = [json.loads(objcli("stats", tmp_path / f, "--json").stdout) for f in ("positions-jsonl-test", "arrow")]
    assert figures[0]["rows"] == figures[1]["rows"] == len(written) and figures[0]["tokens"] == figures[1]["tokens"]

    refused = objcli("transform", *common[:3], "--objective", "span-corruption", "--format", "positions-jsonl-test",
                     "-o", tmp_path / "t5")  # fmt: skip
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert "--format positions-jsonl-test holds next-token rows" in refused.stderr
    assert "span-corruption's rows are not" in refused.stderr and not (tmp_path / "t5" / "manifest.json").exists()
    assert edited_modules(package) == ["formats/positions_jsonl.py"]
