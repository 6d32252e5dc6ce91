"""The recipes of ``objcli/docs/architecture.md`` work when followed literally (issue 54): a throwaway
objective, engine and command, added in a temporary copy of the package exactly as the page says, are
taken by the command line, ``--help``, the options page and a run. (The format recipe is followed by
``tests/formats/test_new_format.py``, by registration.)"""

from __future__ import annotations

import json
import re

import pytest
from package_copies import copy_package, run_in
from runs import ROOT, SAMPLE

PAGE = (ROOT / "objcli" / "docs" / "architecture.md").read_text()

OBJECTIVE = '''
"""A throwaway objective: each document's tokens, reversed (what the recipe asks: one file)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..options import Options, option
from ..rows import ColumnSpec
from .base import DocumentBatch, Objective, PartitionExamples, document_examples, register


@dataclass(frozen=True)
class BackwardsOptions(Options):
    backwards_copies: int = option(1, "Copies of each reversed document.", minimum=1, maximum=4)


@register("backwards-test")
class Backwards(Objective):
    options_type = BackwardsOptions
    provenance = None
    examples_are_documents = True
    supervision = "next-token"
    next_token_rows = True
    plans_rows = True  # its examples only move tokens (reversed): a run over a store can write its plan

    def __init__(self, context, tokenizer):
        super().__init__(context, tokenizer)
        self.vocab_size = tokenizer.total_vocab_size

    @classmethod
    def packers(cls, options) -> tuple[str, ...]:
        return ("concat", "none")

    def example_columns(self) -> list[ColumnSpec]:
        return [ColumnSpec("input_ids", "ragged", 0, self.vocab_size - 1, "token ids, reversed")]

    def partition_examples(self, partition_index: int) -> PartitionExamples:
        return _Reversed(self.options.backwards_copies)


class _Reversed(PartitionExamples):
    def __init__(self, copies: int):
        super().__init__()
        self.copies = copies

    def examples(self, batch: DocumentBatch):
        import numpy as np

        pieces = [batch.tokens[a:b][::-1] for a, b in zip(batch.offsets[:-1], batch.offsets[1:])] * self.copies
        offsets = np.concatenate([[0], np.cumsum([len(p) for p in pieces])]).astype(np.int64)
        tokens = np.concatenate(pieces) if pieces else batch.tokens[:0]
        texts = batch.texts * self.copies if self.copies > 1 else batch.texts  # a store's batch: one copy
        copied = replace(batch, texts=texts, tokens=tokens, offsets=offsets)
        return document_examples(copied, None, None)
'''


@pytest.fixture
def package_copy(tmp_path):
    return copy_package(tmp_path)


def test_a_new_objective_is_one_file_as_the_page_says(package_copy, tmp_path):
    steps = PAGE.split("## Adding an objective")[1].split("\n## ")[0]
    assert "objectives/NAME.py" in steps and "__init__.py" not in steps  # nothing else to edit
    (package_copy / "objcli" / "objectives" / "backwards.py").write_text(OBJECTIVE)
    where = run_in(package_copy, "-c", "import objcli; print(objcli.__file__)")
    assert where.stdout.strip().startswith(str(package_copy)), where.stdout + where.stderr
    shown = run_in(package_copy, "-m", "objcli", "transform", "--help")
    assert re.search(r"--objective.*backwards-test", shown.stdout.replace("\n", " ")), shown.stdout
    own = run_in(package_copy, "-m", "objcli", "transform", "--objective", "backwards-test", "--help")
    assert "--backwards-copies" in own.stdout, own.stdout
    assert run_in(package_copy, "-m", "objcli.docs").returncode == 0  # the step that regenerates the page
    assert "--backwards-copies" in (package_copy / "objcli" / "docs" / "options.md").read_text()
    out = tmp_path / "out"
    args = [SAMPLE / "prose.jsonl", "-t", SAMPLE / "tokenizer.model", "--objective", "backwards-test"]
    done = run_in(package_copy, "-m", "objcli", "transform", *args, "--backwards-copies", "2", "-o", out, "-q")
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["objective"] == "backwards-test" and manifest["totals"]["rows"] > 0
    verified = run_in(package_copy, "-m", "objcli", "verify", out)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_new_objective_plans_its_rows_as_the_page_says(package_copy, tmp_path):
    """An objective that only moves tokens says so (``plans_rows``) in its own module: a run over a store writes
    its plan, and ``objcli.reading.Rows`` makes the rows the same run writes as Arrow, row for row."""
    steps = PAGE.split("## Adding an objective")[1].split("\n## ")[0]
    assert "plans_rows" in steps and "--format plan" in steps
    (package_copy / "objcli" / "objectives" / "backwards.py").write_text(OBJECTIVE)
    store, common = tmp_path / "store", ["--objective", "backwards-test", "--seq-len", "256", "-q"]
    made = run_in(package_copy, "-m", "objcli", "tokenize", SAMPLE / "prose.jsonl", "-t", SAMPLE / "tokenizer.model",
                    "-o", store, "-q")  # fmt: skip
    assert made.returncode == 0, made.stderr
    for fmt in ("plan", "arrow"):
        out = tmp_path / fmt
        done = run_in(package_copy, "-m", "objcli", "transform", store, *common, "--format", fmt, "-o", out)
        assert done.returncode == 0, done.stderr
    compare = (
        "import sys, numpy as np; from objcli.reading import Rows; "
        "plan, arrow = Rows(sys.argv[1]), Rows(sys.argv[2]); "
        "assert len(plan) == len(arrow) > 0; "
        "assert all(np.array_equal(plan[i]['input_ids'], arrow[i]['input_ids']) for i in range(len(arrow))); "
        "print(len(arrow))"
    )
    same = run_in(package_copy, "-c", compare, tmp_path / "plan", tmp_path / "arrow")
    assert same.returncode == 0 and int(same.stdout) > 0, same.stderr


def test_a_new_engine_is_taken_as_the_page_says(package_copy, tmp_path):
    """A throwaway engine (the stable library under another name), added as the page says: its module,
    the kind's engine_order and make_engine, ENGINE_CHOICES; the probe then checks it and a run names it."""
    steps = PAGE.split("## Adding a tokenizer engine")[1].split("\n## ")[0]
    for step in ("engine_order()", "make_engine(name)", "ENGINE_CHOICES", "python -m objcli.docs"):
        assert step in steps
    tokenizers = package_copy / "objcli" / "tokenizers"
    (tokenizers / "echo_engine.py").write_text(
        "from .engines import TokenizersEngine\n\n\n"
        "class EchoEngine(TokenizersEngine):\n"
        '    name = "echo-test"\n\n'
        "    def __init__(self, path):\n"
        "        super().__init__(path)\n"
        "        self.reference = False  # probed, as any engine that is not the file's own library\n"
    )
    hf = (tokenizers / "huggingface.py").read_text()
    hf = hf.replace('return ["quicktok", "gigatoken", "tokenizers", "python"]', 'return ["echo-test", "tokenizers"]')
    hf = hf.replace(
        '        if name == "gigatoken":',
        '        if name == "echo-test":\n            from .echo_engine import EchoEngine\n\n'
        "            return EchoEngine(self.path)\n"
        '        if name == "gigatoken":',
    )
    hf = hf.replace(
        'if name not in ("quicktok", "gigatoken", "python"):',
        'if name not in ("quicktok", "gigatoken", "python", "echo-test"):',
    )
    (tokenizers / "huggingface.py").write_text(hf)
    config = (package_copy / "objcli" / "config.py").read_text()
    (package_copy / "objcli" / "config.py").write_text(config.replace('"python")', '"python", "echo-test")', 1))
    assert run_in(package_copy, "-m", "objcli.docs").returncode == 0
    assert "echo-test" in (package_copy / "objcli" / "docs" / "options.md").read_text()
    out = tmp_path / "out"
    args = [SAMPLE / "prose.jsonl", "-t", SAMPLE / "llama-style", "--seq-len", "256", "-o", out, "-q"]
    done = run_in(package_copy, "-m", "objcli", "transform", *args, env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    engine = json.loads((out / "manifest.json").read_text())["tokenizer"]["engine"]
    assert engine["name"] == "echo-test" and engine["probe"].startswith("identical to tokenizers"), engine


COMMAND = '''
"""A throwaway command: the rows of an output, counted by reading them back through their format."""

from __future__ import annotations

from pathlib import Path

from ..errors import ObjcliError
from ..reading.shards import iter_rows


def count_rows(folder: str) -> dict:
    if not (Path(folder) / "manifest.json").is_file():
        raise ObjcliError(f"count-rows: {folder} holds no manifest.json; give an objcli output folder")
    return {"rows": sum(1 for _ in iter_rows(folder))}
'''

CLICK_COMMAND = '''

@click.command("count-rows-test")
@click.argument("folder")
def count_rows_command(folder):
    """Count the rows of an output FOLDER."""
    from .count_rows import count_rows

    try:
        result = count_rows(folder)
    except ObjcliError as error:
        raise _Fail(str(error)) from None
    click.echo(f"objcli count-rows-test: {folder}: {result['rows']:,} rows", err=True)


FOLDER_COMMANDS.append(count_rows_command)
'''


def test_a_new_command_is_taken_as_the_page_says(package_copy, tmp_path):
    """A throwaway command added as the page says: its function in commands/NAME.py raising ObjcliError,
    its Click command in folder_commands.py, named in FOLDER_COMMANDS."""
    steps = PAGE.split("## Adding a command")[1].split("\n## ")[0]
    for step in ("objcli/commands/NAME.py", "ObjcliError", "folder_commands.py", "FOLDER_COMMANDS", "reading.shards"):
        assert step in steps
    commands = package_copy / "objcli" / "commands"
    (commands / "count_rows.py").write_text(COMMAND)
    (commands / "folder_commands.py").write_text((commands / "folder_commands.py").read_text() + CLICK_COMMAND)
    out = tmp_path / "out"
    args = [SAMPLE / "prose.jsonl", "-t", SAMPLE / "tokenizer.model", "--seq-len", "128", "--format", "parquet"]
    assert run_in(package_copy, "-m", "objcli", "transform", *args, "-o", out, "-q").returncode == 0
    listed = run_in(package_copy, "-m", "objcli", "--help")
    assert "count-rows-test" in listed.stdout, listed.stdout
    counted = run_in(package_copy, "-m", "objcli", "count-rows-test", out)
    rows = json.loads((out / "manifest.json").read_text())["totals"]["rows"]
    assert counted.returncode == 0 and counted.stderr == f"objcli count-rows-test: {out}: {rows:,} rows\n"
    refused = run_in(package_copy, "-m", "objcli", "count-rows-test", tmp_path)
    assert (
        refused.returncode != 0
        and refused.stderr.startswith("Error: count-rows: ")
        and "Traceback" not in refused.stderr
    )
