"""The store-kind recipe of architecture.md, followed literally: a throwaway kind (whole documents and
a column of its own) added as one module in a copy of the package. ``objcli tokenize`` takes its
option, the store keeps its column, ``verify`` checks the store, a derived clm run writes the text
run's shards byte for byte, an objective that reads something else refuses it in one line, the
options page lists it, and nothing else of the package was edited."""

from __future__ import annotations

import json

import pytest
from package_copies import copy_package, edited_modules, run_in
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
    return copy_package(tmp_path / "pkg")


def test_a_new_store_kind_is_one_module_as_the_page_says(package_copy, tmp_path):
    steps = PAGE.split("## Adding a store kind")[1].split("\n## ")[0]
    assert "objcli/stores/NAME.py" in steps and "python -m objcli.docs" in steps
    (package_copy / "objcli" / "stores" / "word_counts.py").write_text(KIND)
    assert edited_modules(package_copy) == ["stores/word_counts.py"]  # nothing else
    shown = run_in(package_copy, "-m", "objcli", "tokenize", "--help")
    assert "--word-counts" in shown.stdout, shown.stdout + shown.stderr
    assert run_in(package_copy, "-m", "objcli.docs").returncode == 0  # the generated table gains it
    assert "`word-counts-test`" in (package_copy / "objcli" / "docs" / "options.md").read_text()

    text, tokenizer, store = SAMPLE / "prose.jsonl", SAMPLE / "tokenizer.model", tmp_path / "store"
    made = run_in(package_copy, "-m", "objcli", "tokenize", text, "-t", tokenizer, "--word-counts", "-o", store)
    assert made.returncode == 0, made.stderr
    manifest = json.loads((store / "manifest.json").read_text())
    assert manifest["config"]["token_store"] == "word-counts-test"
    assert manifest["token_store"]["tokenized"] == "word-counts-test"
    assert "w_words" in [c["name"] for c in manifest["columns"]]
    verified = run_in(package_copy, "-m", "objcli", "verify", store)
    assert verified.returncode == 0, verified.stdout + verified.stderr

    rows = ["--objective", "clm", "--seq-len", "128", "-q"]
    derived = run_in(package_copy, "-m", "objcli", "transform", store, *rows, "-o", tmp_path / "derived")
    direct = run_in(package_copy, "-m", "objcli", "transform", text, "-t", tokenizer, *rows, "-o", tmp_path / "text")
    assert derived.returncode == 0 and direct.returncode == 0, derived.stderr + direct.stderr
    assert shard_files(tmp_path / "derived") == shard_files(tmp_path / "text")

    refused = run_in(package_copy, "-m", "objcli", "transform", store, "--objective", "nsp", "-o", tmp_path / "nsp")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"the token store {store} keeps whole documents' tokens and their words" in refused.stderr
    assert "make a per-sentence store: objcli tokenize ... --sentences" in refused.stderr
    both = run_in(
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


SUPPLIED_OBJECTIVE = '''
"""A throwaway objective reading something new: each document's first tokens, as many as its text has words."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..options import Options
from ..rows import ColumnSpec
from .base import DocumentBatch, Objective, PartitionExamples, document_examples, register
from .supply import Reads, Supplied

WORDS = Supplied("documents' tokens and their words", tokens=True)  # what a word-count store keeps


@register("first-words-test")
class FirstWords(Objective):
    options_type = Options
    provenance = None
    examples_are_documents = True
    supervision = "next-token"
    next_token_rows = True

    def __init__(self, context, tokenizer):
        super().__init__(context, tokenizer)
        self.vocab_size = tokenizer.total_vocab_size

    @classmethod
    def packers(cls, options) -> tuple[str, ...]:
        return ("concat", "none")

    @classmethod
    def reads(cls, options) -> Reads:
        return Reads(WORDS)

    def example_columns(self) -> list[ColumnSpec]:
        return [ColumnSpec("input_ids", "ragged", 0, self.vocab_size - 1, "a document's first tokens")]

    def partition_examples(self, partition_index: int) -> PartitionExamples:
        return _FirstWords()


class _FirstWords(PartitionExamples):
    def examples(self, batch: DocumentBatch):
        words = batch.records  # a word-count store's counts, else counted from the text
        if words is None:
            words = np.array([len(text.split()) for text in batch.texts], np.int64)
        lengths = np.minimum(np.diff(batch.offsets), words)
        pieces = [batch.tokens[a : a + n] for a, n in zip(batch.offsets[:-1].tolist(), lengths.tolist())]
        tokens = np.concatenate(pieces) if pieces else batch.tokens[:0]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return document_examples(replace(batch, tokens=tokens, offsets=offsets), None, None)
'''

SUPPLYING_KIND = '''
"""A throwaway store kind keeping something no other kind keeps: each document's count of words."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ObjcliError
from ..objectives.first_words import WORDS
from .base import Encoded, KindOption, StoredColumn, StoreKind, register


@register
class WordCounts(StoreKind):
    name = "word-counts-test"
    holds = WORDS
    label = "a word-count store"
    what = "keeps documents' tokens and their words"
    prefix = "w_"
    columns = (StoredColumn("w_words", "int32", np.int32, "words of the document's text"),)
    option = KindOption("word_counts", "Keep each document's count of words beside its ids.")

    def encode(self, texts, batch_index, encode, renderer):
        tokens, offsets = encode(texts)
        return Encoded(tokens, offsets, {"w_words": np.array([len(t.split()) for t in texts], np.int32)})

    def read(self, metadata, reasons, path, record_tokens):
        words = np.asarray(metadata["w_words"], np.int64)
        if np.any(words < 0):
            raise ObjcliError(f"input {path}: a negative count of words (edited?); tokenize the text again")
        return {"records": Words(words)}


@dataclass
class Words:
    """Each document's count of words, cut and joined with the documents (``stores.base.KindRecords``)."""

    counts: np.ndarray

    def slice(self, start, stop):
        return Words(self.counts[start:stop])

    def take(self, indices):
        return Words(self.counts[indices])

    @staticmethod
    def concat(parts):
        return Words(np.concatenate([p.counts for p in parts]))

    def batch(self, offsets):
        return self.counts
'''


def test_a_store_kind_gives_an_objective_something_new_in_their_own_modules(package_copy, tmp_path):
    """What a new kind keeps reaches the objective that reads it with nothing else edited: the supply is
    declared beside the objective (``supply.Supplied``), the kind keeps it and gives it back from ``read``
    (``records``); a derived run equals the text run byte for byte, and the fitness check words both
    refusals from the new terms."""
    steps = PAGE.split("## Adding a store kind")[1].split("\n## ")[0]
    assert "supply.Supplied" in steps and "KindRecords" in steps
    (package_copy / "objcli" / "objectives" / "first_words.py").write_text(SUPPLIED_OBJECTIVE)
    (package_copy / "objcli" / "stores" / "word_counts.py").write_text(SUPPLYING_KIND)
    edited = edited_modules(package_copy)
    assert edited == ["objectives/first_words.py", "stores/word_counts.py"]

    text, tokenizer = SAMPLE / "prose.jsonl", SAMPLE / "tokenizer.model"
    made = [
        run_in(package_copy, "-m", "objcli", "tokenize", text, "-t", tokenizer, *kind, "-o", tmp_path / name, "-q")
        for name, kind in (("words", ["--word-counts"]), ("plain", []))
    ]
    assert all(m.returncode == 0 for m in made), [m.stderr for m in made]
    rows = ["--objective", "first-words-test", "--seq-len", "64", "-q"]
    derived = run_in(package_copy, "-m", "objcli", "transform", tmp_path / "words", *rows, "-o", tmp_path / "d")
    direct = run_in(package_copy, "-m", "objcli", "transform", text, "-t", tokenizer, *rows, "-o", tmp_path / "t")
    assert derived.returncode == 0 and direct.returncode == 0, derived.stderr + direct.stderr
    assert shard_files(tmp_path / "d") == shard_files(tmp_path / "t")
    clm = run_in(package_copy, "-m", "objcli", "transform", text, "-t", tokenizer, "--seq-len", "64", "-q",
                   "-o", tmp_path / "clm")  # fmt: skip
    assert clm.returncode == 0 and shard_files(tmp_path / "clm") != shard_files(tmp_path / "t")  # the counts cut

    plain = run_in(package_copy, "-m", "objcli", "transform", tmp_path / "plain", *rows, "-o", tmp_path / "p")
    assert plain.returncode == 1 and plain.stderr.count("\n") == 1, plain.stderr
    assert "first-words-test reads documents' tokens and their words" in plain.stderr
    assert "make a word-count store: objcli tokenize ... --word-counts" in plain.stderr
    other = run_in(package_copy, "-m", "objcli", "transform", tmp_path / "words", "--objective", "nsp",
                     "-o", tmp_path / "nsp")  # fmt: skip
    assert other.returncode == 1 and "keeps documents' tokens and their words" in other.stderr, other.stderr
