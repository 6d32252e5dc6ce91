"""Every registered store kind, as the registry gives it: spelled and parsed back the same, its columns its
own, its option asking for it; a manifest naming no kind is one line."""

from __future__ import annotations

import json
import shutil

import pytest
from runs import SAMPLE, run_cli

from objcli.objectives.sentences import SPLITTERS
from objcli.stores import STORE_KINDS, asked_kind, parse


def _instances(kind) -> list:
    return [kind(s) for s in SPLITTERS] if kind.parameterized else [kind()]


@pytest.mark.parametrize("name", list(STORE_KINDS))
def test_a_kind_is_spelled_and_parsed_back_and_asked_for_by_its_option(name):
    kind = STORE_KINDS[name]
    for instance in _instances(kind):
        assert parse(str(instance)) == instance and instance.name == name
        assert all(c.name.startswith(kind.prefix) for c in kind.columns)
        specs = [c.name for c in instance.column_specs(origins=True)]
        assert specs[: len(kind.columns)] == [c.name for c in kind.columns]
        assert ("p_fix_at" in specs) == kind.places_tokens  # the token places, as fixes of the piece table
        if kind.option is not None:
            value = instance.parameter if kind.option.takes_value else True
            values = {kind.option.name: value, "other": 1}
            assert asked_kind(values) == instance and values == {"other": 1}  # its option taken out
    assert parse("no-such-kind") is None and parse("") is None


def test_a_manifest_that_names_no_kind_is_one_line(tmp_path):
    store = tmp_path / "store"
    made = run_cli("tokenize", SAMPLE / "prose.jsonl", "-t", SAMPLE / "tokenizer.model", "-o", store, "-q")
    assert made.returncode == 0, made.stderr
    edited = tmp_path / "edited"
    shutil.copytree(store, edited)
    manifest = json.loads((edited / "manifest.json").read_text())
    manifest["config"]["token_store"] = "no-such-kind"
    (edited / "manifest.json").write_text(json.dumps(manifest))
    refused = run_cli("transform", edited, "--seq-len", "64", "-o", tmp_path / "out")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert "names no kind of store" in refused.stderr and refused.stderr.startswith(
        f"Error: input {edited}/manifest.json"
    )


def test_an_option_of_rendering_without_its_kind_names_every_kind_that_takes_it():
    """``objcli tokenize --bos`` with no store kind that renders: one line naming each kind it applies to."""
    from objcli.cli_options import tokenize_values
    from objcli.errors import ObjcliError
    from objcli.stores import renderings

    for key, kinds in renderings().items():
        with pytest.raises(ObjcliError) as refused:
            tokenize_values({key: "x", "inputs": ("a.jsonl",)})
        message = str(refused.value)
        assert message.startswith("--" + key.replace("_", "-") + ": applies to") and "\n" not in message
        assert all(f"objcli tokenize {kind.option.flag}" in message for kind in kinds), message
