"""Every objective × every packer it accepts × every format, from the registry (no hand-written
lists): each output passes ``verify``, and ``stats`` and ``inspect`` read it through column roles.
A throwaway objective registered here gets the same for free; ``--help`` and recipes are checked
for every objective."""

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from chat_data import TEMPLATES, record_folders
from objective_variants import variants
from runs import cli, folder_bytes, run_transform

from objcli.commands.show import inspect_output
from objcli.commands.stats import compute_stats
from objcli.commands.verify import verify_output
from objcli.config import OUTPUT_FORMATS
from objcli.errors import ObjcliError
from objcli.formats import FORMATS, whole_document_formats
from objcli.formats.nemo_packed import NemoPackedFormat
from objcli.objectives import REGISTRY
from objcli.objectives.base import Objective, PartitionExamples, register
from objcli.options import NoOptions, option_fields
from objcli.rows import ColumnSpec, Ragged, RowBatch

COMBINATIONS = [
    pytest.param(
        name, options, packer, fmt, id=f"{name}-{'-'.join(map(str, options.values())) or 'default'}-{packer}-{fmt}"
    )
    for name, options in variants()
    for packer in REGISTRY.named(name).packers(REGISTRY.named(name).options_type(**options))
    for fmt in OUTPUT_FORMATS
]


@pytest.fixture(scope="module")
def corpus(small_corpus, tmp_path_factory):
    folder = tmp_path_factory.mktemp("registry")
    prose = (small_corpus / "prose.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (folder / "prose.jsonl").write_text("".join(prose[:40]), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """Conversations and preference pairs, for objectives that read whole records."""
    return record_folders(tmp_path_factory.mktemp("records"))


def inputs_for(name: str, corpus, records, options=None) -> tuple:
    """(input folder, options) an objective reads: text, or the records it reads (conversations,
    pairs) with a template (the sample SentencePiece model ships none)."""
    objective = REGISTRY.named(name)
    reads = objective.reads(objective.options_type(**(options or {})))
    if reads.records:
        return records[reads.needs], {"chat_template": str(TEMPLATES / "mistral.jinja")}
    return corpus, {}


def cli_inputs(name: str, corpus, records) -> list[str]:
    folder, options = inputs_for(name, corpus, records)
    return [str(folder), *(a for key, value in options.items() for a in ("--" + key.replace("_", "-"), value))]


def _width(column: dict) -> str:
    """The narrowest integer holding the column's range (a reference for ``ColumnSpec.narrow_dtype``)."""
    for name in ("uint8", "uint16", "uint32") if column["min_value"] >= 0 else ("int8", "int16", "int32"):
        info = np.iinfo(name)
        if info.min <= column["min_value"] and column["max_value"] <= info.max:
            return name
    return "int64"


@pytest.mark.parametrize("objective, options, packer, fmt", COMBINATIONS)
def test_every_objective_packer_and_format(
    objective, options, packer, fmt, corpus, records, sample_tokenizer, tmp_path
):
    out = tmp_path / "out"
    folder, needed = inputs_for(objective, corpus, records)
    options = {**options, **needed}
    try:
        summary = run_transform(
            [folder],
            sample_tokenizer,
            out,
            objective=objective,
            seq_len=96,
            packing=packer,
            output_format=fmt,
            **options,
        )
    except ObjcliError as error:  # only formats of whole token documents refuse: other columns, or packed rows
        message = str(error)
        if FORMATS[fmt].packs_positions:  # a plan is made over a token store (tests/reading/test_plan_parity.py)
            assert message.startswith(f"--format {fmt}: "), message
            assert "token stores' ids" in message or "written, not planned" in message, message  # its options
            return
        if not FORMATS[fmt].stores_values and message.startswith(f"--format {fmt} stores integer columns"):
            return  # an objective of value columns (strings, records): the Arrow formats hold them
        if message.startswith(f"--format {fmt} holds next-token rows"):  # a layout of next-token rows only
            assert isinstance(FORMATS[fmt], NemoPackedFormat) and objective not in ("chat", "clm"), message
            return
        assert fmt in whole_document_formats(), message
        assert message.startswith(f"--format {fmt} stores input_ids only") or (
            packer != "none" and message.startswith(f"--format {fmt} writes whole documents")
        ), message
        return
    manifest = summary.manifest
    t = manifest["totals"]
    assert t["rows"] > 0 and t["documents_read"] == t["documents_written"] + t["documents_skipped"]
    report = verify_output(out)
    assert report.ok, report.problems
    roles = {c["role"] for c in manifest["columns"]}
    if fmt == "megatron":  # the manifest lists what the shards store: Megatron keeps the tokens (chat: its mask)
        masked = REGISTRY.named(objective).labels_are_inputs
        assert roles == ({"tokens", "loss_mask"} if masked else {"tokens"})
        assert manifest["columns"][0]["disk_dtype"] in ("uint16", "int32")
    elif isinstance(FORMATS[fmt], NemoPackedFormat):  # sequences said by their starts, the loss by its mask
        assert roles == {"tokens", "loss_mask", "sequence_starts"}
    elif packer in ("concat", "best-fit", "trim-and-pack"):
        assert {"segment_ids", "positions"} <= roles
    if fmt in ("arrow", "parquet"):  # at the values' width; a named category, a row's ClassLabel for datasets: int64
        labels = {c["name"] for c in manifest["columns"] if c["role"] == "category" and c["kind"] == "scalar"}
        assert {c["name"]: c["disk_dtype"] for c in manifest["columns"]} == {
            c["name"]: "object" if c["kind"] == "value" else "int64" if c["name"] in labels else _width(c)
            for c in manifest["columns"]
        }
        for c in manifest["columns"]:  # rows of one length: fixed-size lists (no offsets), each as long as said
            assert (c["kind"] == "fixed") == ("length" in c) == c["arrow_type"].startswith("fixed_size_list"), c
    stats = compute_stats(out)
    assert stats["rows"] == t["rows"] and stats["tokens"] == t["tokens"]
    if stats["supervised_tokens"] is not None:
        assert 0 <= stats["supervised_tokens"] <= stats["tokens"] + stats["padding_tokens"]
    shown = list(inspect_output(str(out), 2, None, False))
    values = [c["name"] for c in manifest["columns"] if c["kind"] == "value"]
    if len(values) == len(manifest["columns"]):  # rows of values (RL prompts): each value shown as its JSON
        assert (
            shown[0].startswith("── row 0 ·") and [line.split(": ")[0] for line in shown[1 : 1 + len(values)]] == values
        )
    else:
        assert shown[0].startswith("── row 0 ·") and "tokens" in shown[0]


@pytest.mark.parametrize(
    "objective, options, packer",
    [
        pytest.param(name, options, packer, id=f"{name}-{'-'.join(map(str, options.values())) or 'default'}-{packer}")
        for name, options in variants()
        for packer in REGISTRY.named(name).packers(REGISTRY.named(name).options_type(**options))
    ],
)
def test_every_objective_and_packer_records_where_rows_come_from(
    objective, options, packer, corpus, records, sample_tokenizer, tmp_path
):
    """--provenance, every objective and packer it takes: the shards are a plain run's bytes, and
    every row names at least one span inside a record of its input file (empty where a segment is
    only its EOS)."""
    folder, needed = inputs_for(objective, corpus, records)
    common = dict(objective=objective, seq_len=96, packing=packer, shard_size="25", **options, **needed)
    run_transform([folder], sample_tokenizer, tmp_path / "plain", **common)
    run_transform([folder], sample_tokenizer, tmp_path / "out", provenance=True, **common)
    assert verify_output(tmp_path / "out").ok
    shards = {k: v for k, v in folder_bytes(tmp_path / "out").items() if k.endswith(".arrow")}
    assert shards and shards == {k: v for k, v in folder_bytes(tmp_path / "plain").items() if k.endswith(".arrow")}
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    lengths = {}
    for shard in manifest["shards"]:
        table = pq.read_table(tmp_path / "out" / shard["files"][-1]).to_pylist()
        assert {span["row"] for span in table} == set(range(shard["rows"]))
        for span in table:
            if span["file"] not in lengths:
                lines = (folder / Path(span["file"]).name).read_text(encoding="utf-8").splitlines()
                lengths[span["file"]] = [
                    len(json.loads(line)["text"]) if "text" in line[:9] else len(line) for line in lines
                ]
            assert 0 <= span["start"] <= span["end"] <= lengths[span["file"]][span["record"]], span


def test_every_objective_help_is_short_and_its_own(sample_tokenizer):
    owners = {f.name: n for n in REGISTRY.names() for f in option_fields(REGISTRY.named(n).options_type)}
    for name in REGISTRY.names():
        text = cli(["transform", "--objective", name, "--help"]).output
        # One screen, in sections; the objective's own options in a section named after it.
        assert len(text.splitlines()) < 80, name
        headings = [line for line in text.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
        assert headings == [
            "Input:",
            "Objective and rows:",
            *([f"{name} options:"] if option_fields(REGISTRY.named(name).options_type) else []),
            "Order, splits and mixture:",
            "Output:",
            "Execution:",
        ], name
        own = {f.name for f in option_fields(REGISTRY.named(name).options_type)}
        for field_name in owners:
            flag = "--" + field_name.replace("_", "-") + " "
            assert (flag in text) == (field_name in own), (name, flag)  # its own options, and no other's


@pytest.mark.parametrize("name", REGISTRY.names())
def test_a_manifest_is_a_recipe_that_repeats_the_run(name, corpus, records, sample_tokenizer, tmp_path):
    first = tmp_path / "first"
    run = cli(
        [
            "transform",
            *cli_inputs(name, corpus, records),
            "-t",
            sample_tokenizer,
            "-o",
            str(first),
            "--objective",
            name,
            "--seq-len",
            "96",
            "--seed",
            "5",
            "-q",
        ],
    )
    assert run.exit_code == 0, run.output
    again = cli(["transform", "--recipe", str(first / "manifest.json"), "-o", str(tmp_path / "again"), "-q"])
    assert again.exit_code == 0, again.output
    shards = sorted(p.name for p in first.glob("part-*"))
    assert shards and all((first / s).read_bytes() == (tmp_path / "again" / s).read_bytes() for s in shards)


def test_print_recipe_round_trips_and_command_line_wins(corpus, sample_tokenizer, tmp_path):
    args = [
        "transform",
        str(corpus),
        "-t",
        sample_tokenizer,
        "-o",
        str(tmp_path / "o"),
        "--objective",
        "mlm",
        "--whole-word",
        "--seq-len",
        "64",
    ]
    text = cli([*args, "--print-recipe"]).output
    recipe = tmp_path / "run.toml"
    recipe.write_text(text)
    assert 'objective = "mlm"' in text and "whole-word = true" in text and "seq-len = 64" in text
    resolved = cli(["transform", "--recipe", str(recipe), "--seq-len", "32", "--print-recipe"]).output
    assert "seq-len = 32" in resolved and "whole-word = true" in resolved


def test_unknown_recipe_key_names_the_closest(tmp_path):
    recipe = tmp_path / "bad.toml"
    recipe.write_text('objective = "clm"\nseq_len = 12\n')
    result = cli(["transform", "--recipe", str(recipe), "--print-recipe"])
    assert result.exit_code == 1
    assert result.output == f"Error: --recipe {recipe}: unknown key 'seq_len'; did you mean 'seq-len'?\n"


def test_a_packer_an_objective_does_not_take_is_refused_in_one_line(corpus, records, sample_tokenizer, tmp_path):
    for name in REGISTRY.names():
        taken = REGISTRY.named(name).packers(REGISTRY.named(name).options_type())
        refused = [p for p in ("none", "concat", "best-fit", "trim-and-pack") if p not in taken]
        for packer in refused:
            result = cli(
                [
                    "transform",
                    *cli_inputs(name, corpus, records),
                    "-t",
                    sample_tokenizer,
                    "-o",
                    str(tmp_path / "o"),
                    "--objective",
                    name,
                    "--packing",
                    packer,
                ],
            )
            assert result.exit_code == 1
            assert result.output.startswith(f"Error: --packing {packer}: {name} takes {', '.join(taken)}")


@dataclass(frozen=True)
class _ReverseOptions(NoOptions):
    pass


def test_a_new_objective_is_one_class_and_every_tool_picks_it_up(corpus, sample_tokenizer, tmp_path):
    """An objective written here, in 20 lines: two ragged columns (each document and its reverse)."""

    class _Reverse(PartitionExamples):
        def __init__(self):
            self.counters = {}

        def examples(self, batch):
            lengths = np.diff(batch.offsets)
            reversed_tokens = np.concatenate(
                [batch.tokens[a:b][::-1] for a, b in zip(batch.offsets[:-1], batch.offsets[1:])]
            )
            return RowBatch(
                {
                    "input_ids": Ragged(batch.tokens, batch.offsets),
                    "labels": Ragged(reversed_tokens.astype(np.int32), batch.offsets),
                },
                tokens=2 * lengths,
                padding=np.zeros(len(lengths), np.int64),
                documents=np.ones(len(lengths), np.int64),
            )

    @register("reverse-test")
    class Reverse(Objective):
        options_type = _ReverseOptions

        def __init__(self, config, tokenizer):
            super().__init__(config, tokenizer)
            self.pad_id = tokenizer.resolve("pad")
            self.top = tokenizer.total_vocab_size - 1

        @classmethod
        def packers(cls, options):
            return ("none", "trim-and-pack")

        def example_columns(self):
            return [
                ColumnSpec("input_ids", "ragged", 0, self.top, "a document"),
                ColumnSpec("labels", "ragged", 0, self.top, "its reverse", role="labels", family="labels"),
            ]

        def partition_examples(self, partition_index):
            return _Reverse()

    try:
        for packer in ("none", "trim-and-pack"):
            out = tmp_path / packer
            run_transform(
                [corpus], sample_tokenizer, out, objective="reverse-test", seq_len=64, packing=packer, pool="threads"
            )
            assert verify_output(out).ok
            stats = compute_stats(out)
            assert stats["supervised_tokens"] > 0 and stats["rows"] > 0
            assert "labels:" in "\n".join(inspect_output(str(out), 1, None, False))
            manifest = json.loads((out / "manifest.json").read_text())
            assert [c["role"] for c in manifest["columns"]][:2] == [
                "tokens",
                "segment_ids" if packer != "none" else "labels",
            ]
        help_text = cli(["transform", "--objective", "reverse-test", "--help"]).output
        assert "--packing" in help_text and len(help_text.splitlines()) < 80
    finally:
        REGISTRY.unregister("reverse-test")
        assert dataclasses.is_dataclass(_ReverseOptions)
