"""The store-kind recipe of architecture.md, followed literally: a throwaway kind (whole documents and
a column of its own) added as one module in a copy of the package. ``objcli tokenize`` takes its
option, the store keeps its column, ``verify`` checks the store, a derived clm run writes the text
run's shards byte for byte, an objective that reads something else refuses it in one line, the
options page lists it, and nothing else of the package was edited."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from runs import ROOT, SAMPLE, shard_files

PAGE = (ROOT / "objcli" / "docs" / "architecture.md").read_text()

KIND = '''
"""A throwaway store kind: whole documents' ids, and each document's count of words."""

from __future__ import annotations

import numpy as np

from ..errors import ObjcliError
from ..objectives.supply import Provides
from .base import Encoded, KindOption, StoredColumn, StoreKind, register


@register
class WordCounts(StoreKind):
    name = "word-counts-test"
    holds = Provides.DOCUMENTS
    label = "a word-count store"
    what = "keeps whole documents' tokens and their words"
    prefix = "w_"
    columns = (StoredColumn("w_words", "int32", np.int32, "words of the document's text"),)
    option = KindOption("word_counts", "Keep each document's count of words beside its ids.")

    def encode(self, texts, batch_index, encode, renderer):
        tokens, offsets = encode(texts)
        return Encoded(tokens, offsets, {"w_words": np.array([len(t.split()) for t in texts], np.int32)})

    def read(self, metadata, reasons, path, record_tokens):
        if np.any(metadata["w_words"] < 0):
            raise ObjcliError(f"input {path}: a negative count of words (edited?); tokenize the text again")
        return {}
'''


@pytest.fixture
def package_copy(tmp_path):
    shutil.copytree(ROOT / "objcli", tmp_path / "pkg" / "objcli", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "pkg"


def run_copy(folder, *args):
    env = {**os.environ, "PYTHONPATH": str(folder)}
    return subprocess.run([sys.executable, *map(str, args)], cwd=folder, env=env, capture_output=True, text=True)


def _edited(before, after) -> list[str]:
    """The package's files that differ between two copies (bytecode aside)."""
    names = {p.relative_to(before) for p in before.rglob("*.py")} | {p.relative_to(after) for p in after.rglob("*.py")}
    return sorted(
        str(n) for n in names if not (before / n).is_file() or (before / n).read_bytes() != (after / n).read_bytes()
    )


def test_a_new_store_kind_is_one_module_as_the_page_says(package_copy, tmp_path):
    steps = PAGE.split("## Adding a store kind")[1].split("\n## ")[0]
    assert "objcli/stores/NAME.py" in steps and "python -m objcli.docs" in steps
    (package_copy / "objcli" / "stores" / "word_counts.py").write_text(KIND)
    assert _edited(ROOT / "objcli", package_copy / "objcli") == ["stores/word_counts.py"]  # nothing else
    shown = run_copy(package_copy, "-m", "objcli", "tokenize", "--help")
    assert "--word-counts" in shown.stdout, shown.stdout + shown.stderr
    assert run_copy(package_copy, "-m", "objcli.docs").returncode == 0  # the generated table gains it
    assert "`word-counts-test`" in (package_copy / "objcli" / "docs" / "options.md").read_text()

    text, tokenizer, store = SAMPLE / "prose.jsonl", SAMPLE / "tokenizer.model", tmp_path / "store"
    made = run_copy(package_copy, "-m", "objcli", "tokenize", text, "-t", tokenizer, "--word-counts", "-o", store)
    assert made.returncode == 0, made.stderr
    manifest = json.loads((store / "manifest.json").read_text())
    assert manifest["config"]["token_store"] == "word-counts-test"
    assert manifest["token_store"]["tokenized"] == "word-counts-test"
    assert "w_words" in [c["name"] for c in manifest["columns"]]
    verified = run_copy(package_copy, "-m", "objcli", "verify", store)
    assert verified.returncode == 0, verified.stdout + verified.stderr

    rows = ["--objective", "clm", "--seq-len", "128", "-q"]
    derived = run_copy(package_copy, "-m", "objcli", "transform", store, *rows, "-o", tmp_path / "derived")
    direct = run_copy(package_copy, "-m", "objcli", "transform", text, "-t", tokenizer, *rows, "-o", tmp_path / "text")
    assert derived.returncode == 0 and direct.returncode == 0, derived.stderr + direct.stderr
    assert shard_files(tmp_path / "derived") == shard_files(tmp_path / "text")

    refused = run_copy(package_copy, "-m", "objcli", "transform", store, "--objective", "nsp", "-o", tmp_path / "nsp")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"the token store {store} keeps whole documents' tokens and their words" in refused.stderr
    assert "make a per-sentence store: objcli tokenize ... --sentences" in refused.stderr
    both = run_copy(
        package_copy, "-m", "objcli", "tokenize", text, "-t", tokenizer, "--word-counts", "--chat", "-o", tmp_path / "x"
    )
    assert both.returncode == 1 and "a store holds one kind" in both.stderr, both.stderr


def test_a_kind_keeps_to_its_own_columns():
    """Registration refuses a kind whose columns are another's or not named with its prefix."""
    import numpy as np

    from objcli.objectives.supply import Provides
    from objcli.stores import STORE_KINDS, StoredColumn, StoreKind, register

    class Clash(StoreKind):
        name, holds, prefix = "clash-test", Provides.DOCUMENTS, "c_"  # a chat store's prefix

    class Unprefixed(StoreKind):
        name, holds, prefix = "unprefixed-test", Provides.DOCUMENTS, "u_"
        columns = (StoredColumn("words", "int32", np.int32, "not named u_*"),)

    for kind in (Clash, Unprefixed):
        with pytest.raises(ValueError, match=kind.name):
            register(kind)
        assert kind.name not in STORE_KINDS
