"""Every command line in ``golden.py`` writes the same shard bytes as when the table was recorded
(before the pipeline was split into stages): refactors must not change outputs."""

import json

import pytest
from golden import COMMANDS, TABLE, golden_corpus, run

EXPECTED = json.loads(TABLE.read_text())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return golden_corpus(tmp_path_factory.mktemp("golden"))


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_shards_are_byte_identical_to_the_recorded_table(name, corpus, tmp_path):
    assert run(name, corpus, tmp_path / "out") == EXPECTED[name]
