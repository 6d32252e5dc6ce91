"""The recipe "Adding an input format" of architecture.md, followed by registration (as
``tests/formats/test_new_format.py`` follows the output one): a throwaway token input format, one
class, is an --input-format choice, detected by its content, read into the same rows as the same ids
in a format objcli knows, named by the manifest, and verified."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from runs import SAMPLE, run_cli, run_transform, token_format_detected

from objcli.commands.verify import verify_output
from objcli.inputs import token_inputs
from objcli.inputs.token_inputs import TOKEN_INPUTS

DOCUMENTS = [[5, 6, 7, 8], [9, 10], [11, 12, 13, 14, 15, 16, 17], [18]]


MODULE = '''
"""A throwaway token input format: a text file of ids, a document a line, its first line ``#ids``."""

from __future__ import annotations

import numpy as np

from .base import TokenFile, TokenInputFormat, register


@register
class SpacedIds(TokenInputFormat):
    name = "spaced-ids-test"

    def detect(self, site, ids_key: str) -> bool:
        return site.isfile(site.path) and site.head(site.path, 4) == b"#ids"

    def open(self, path: str, ids_key: str, eos: int | None) -> TokenFile:
        lines = open(path, encoding="utf-8").read().splitlines()[1:]
        documents = [np.array(line.split(), dtype=np.int64) for line in lines]
        offsets = np.concatenate([[0], np.cumsum([len(d) for d in documents])]).astype(np.int64)
        return TokenFile(path, self.name, np.concatenate(documents).astype(np.int32), offsets)
'''


def _spaced_ids() -> type:
    """The module's class, for registering in this process (the module's relative import made absolute)."""
    namespace: dict = {}
    exec(MODULE.replace("from .base", "from objcli.inputs.token_inputs.base").replace("@register\n", ""), namespace)
    return namespace["SpacedIds"]


@pytest.fixture
def registered():
    spaced = token_inputs.register(_spaced_ids()())
    yield
    TOKEN_INPUTS.unregister(spaced.name)


def _run(path, out, **values):
    return run_transform([path], SAMPLE / "tokenizer.model", out, **values)


def _rows(summary, folder) -> list:
    shards = summary.manifest["shards"]
    return [pa.ipc.open_stream(pa.memory_map(str(folder / s["files"][0]))).read_all().to_pylist() for s in shards]


def test_a_registered_input_format_is_a_choice_detected_read_and_verified(registered, tmp_path):
    from objcli.inputs.partitioning import INPUT_FORMATS

    assert "spaced-ids-test" in INPUT_FORMATS and list(TOKEN_INPUTS)[-1] == "nanogpt"  # nanoGPT's catch-all last
    mine = tmp_path / "corpus.ids"
    mine.write_text("#ids\n" + "".join(" ".join(map(str, d)) + "\n" for d in DOCUMENTS))
    pq.write_table(pa.table({"input_ids": DOCUMENTS}), tmp_path / "same.parquet")
    assert token_format_detected(str(mine), "auto") == "spaced-ids-test"
    ours = _run(mine, tmp_path / "a", seq_len=8)
    known = _run(tmp_path / "same.parquet", tmp_path / "b", seq_len=8)
    assert ours.manifest["inputs"][0]["format"] == "spaced-ids-test"
    assert _rows(ours, tmp_path / "a") == _rows(known, tmp_path / "b") and ours.totals == known.totals
    assert ours.totals["documents_read"] == 4 and ours.totals["rows"] == 2  # 20 ids and EOS in rows of 8
    assert not verify_output(tmp_path / "a").problems
    assert "spaced-ids-test" not in run_cli("transform", "--help").stdout  # only this process registered it


def test_a_new_token_format_is_one_module_as_the_page_says(tmp_path):
    """The recipe followed in a copy of the package: the module alone (nothing else edited) is a choice
    of --input-format and of the options page, detected by the one door, and read into the rows the same
    ids give from Parquet."""
    import json

    from package_copies import copy_package, run_in
    from runs import ROOT

    steps = (ROOT / "objcli" / "docs" / "architecture.md").read_text().split("## Adding an input format")[1]
    assert "objcli/inputs/token_inputs/NAME.py" in steps and "@register" in steps
    package = copy_package(tmp_path / "pkg")
    (package / "objcli" / "inputs" / "token_inputs" / "spaced_ids.py").write_text(MODULE)

    def run(*args):
        return run_in(package, *args)

    assert "spaced-ids-test" in run("-m", "objcli", "transform", "--help").stdout.replace("\n", " ")
    assert run("-m", "objcli.docs").returncode == 0
    assert "spaced-ids-test" in (package / "objcli" / "docs" / "options.md").read_text()
    mine = tmp_path / "corpus.ids"
    mine.write_text("#ids\n" + "".join(" ".join(map(str, d)) + "\n" for d in DOCUMENTS))
    pq.write_table(pa.table({"input_ids": DOCUMENTS}), tmp_path / "same.parquet")
    tokenizer = SAMPLE / "tokenizer.model"
    for name, out in ((mine, "a"), (tmp_path / "same.parquet", "b")):
        done = run("-m", "objcli", "transform", name, "-t", tokenizer, "--seq-len", "8", "-o", tmp_path / out, "-q")
        assert done.returncode == 0, done.stderr
    ours = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert ours["inputs"][0]["format"] == "spaced-ids-test"
    shards = [(tmp_path / d / s["files"][0]).read_bytes() for d in ("a", "b") for s in ours["shards"]]
    assert shards[: len(shards) // 2] == shards[len(shards) // 2 :]
