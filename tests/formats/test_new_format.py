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
