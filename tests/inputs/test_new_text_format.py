"""The text half of architecture.md's "Adding an input format", followed literally in a copy of the
package: a throwaway text format (tab-separated id and text), one module added to ``inputs/text_inputs/``
and nothing else edited. It is an --input-format choice on the options page, a folder walk finds its files, an empty
folder's message names its suffix, the one door recognises it, and a run writes the rows the same
texts give from JSON lines."""

from __future__ import annotations

import json

from package_copies import copy_package, run_in
from runs import ROOT, SAMPLE, shard_files

PAGE = (ROOT / "objcli" / "docs" / "architecture.md").read_text()
FORMAT = '''"""A throwaway text format: tab-separated id and text."""

from .base import TextInputFormat, register


@register
class TabSeparated(TextInputFormat):
    """A throwaway text format: a record a line, its id, a tab, its text."""

    name, suffixes, detection_rank = "tsv-test", (".tsv",), 35

    def sniffs(self, head: bytes) -> bool:
        return False  # named by its suffix only

    def texts(self, stream, piece, options, log, locator):
        lines = [line for line in stream.read().decode("utf-8").split("\\n") if "\\t" in line]
        log.read += len(lines)
        log.kept(range(len(lines)))
        yield [line.split("\\t", 1)[1] for line in lines]


'''


def test_a_new_text_format_is_one_class_in_its_module_as_the_page_says(tmp_path):
    steps = PAGE.split("## Adding an input format")[1].split("\n## ")[0]
    assert "inputs/text_inputs/" in steps and "@register" in steps and "detection_rank" in steps
    package = copy_package(tmp_path / "pkg")
    (package / "objcli" / "inputs" / "text_inputs" / "tab_separated.py").write_text(FORMAT)  # nothing else edited

    def run(*args):
        return run_in(package, *args)

    assert run("-m", "objcli.docs").returncode == 0
    assert "tsv-test" in (package / "objcli" / "docs" / "options.md").read_text()
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.md").write_text("no input here")
    refused = run(
        "-m", "objcli", "transform", tmp_path / "empty", "-t", SAMPLE / "tokenizer.model", "-o", tmp_path / "e"
    )
    assert refused.returncode == 1 and ".tsv" in refused.stderr, refused.stderr  # the message lists its suffix

    lines = (SAMPLE / "prose.jsonl").read_text().splitlines()[:30]
    records = [{"text": " ".join(json.loads(line)["text"].split())} for line in lines]  # a record a line
    (tmp_path / "tsv").mkdir()
    (tmp_path / "tsv" / "corpus.tsv").write_text("".join(f"{i}\t{r['text']}\n" for i, r in enumerate(records)))
    (tmp_path / "same.jsonl").write_text("".join(json.dumps({"text": r["text"]}) + "\n" for r in records))
    rows = ["-t", SAMPLE / "tokenizer.model", "--seq-len", "128", "-q"]
    ours = run("-m", "objcli", "transform", tmp_path / "tsv", *rows, "-o", tmp_path / "a")  # found by the folder walk
    known = run("-m", "objcli", "transform", tmp_path / "same.jsonl", *rows, "-o", tmp_path / "b")
    assert ours.returncode == 0 and known.returncode == 0, ours.stderr + known.stderr
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["inputs"][0]["format"] == "tsv-test" and manifest["totals"]["documents_read"] == len(records)
    assert shard_files(tmp_path / "a") == shard_files(tmp_path / "b")
