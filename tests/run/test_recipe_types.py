"""Issue 30, item 3: every recipe value goes through typed validation with its key named, over every
key a recipe takes (the run's options, every objective's, and the old spellings the CLI accepts) ×
every wrong type TOML and JSON can give; before, `seq-len = true` wrote 1-token rows, `shuffle-rows =
"false"` shuffled and `strict = "false"` turned strict mode on."""

import json
import types
import typing

import pytest
from runs import cli

from objcli.errors import ObjcliError
from objcli.recipe import _by_key, load_recipe, to_toml

WRONG = {  # per expected type: values of every other JSON/TOML type
    bool: ["false", 0, 1, 1.5, ["x"], {"a": 1}],
    int: ["128", 1.5, True, ["1"], {"a": 1}],
    float: ["0.1", True, ["1"], {"a": 1}],
    str: [5, 1.5, True, ["x"], {"a": 1}],
    tuple: [5, True, [1], {"a": 1}],  # a list of strings
    "int-list": [5, "1", True, ["1"], [True], {"a": 1}],  # a list of integers (input-breaks)
}


def _kind(hint):
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    kind = next(k for k in (typing.get_args(hint) if union else (hint,)) if k is not type(None))
    if typing.get_origin(kind) is tuple and typing.get_args(kind)[:1] == (int,):
        return "int-list"
    return tuple if (typing.get_origin(kind) is tuple or kind is tuple) else kind


CASES = [
    pytest.param(key, _kind(hint), value, id=f"{key}={json.dumps(value)}")
    for key, (_, hint) in sorted(_by_key().items())
    for value in WRONG[_kind(hint)]
]


@pytest.mark.parametrize(("key", "kind", "value"), CASES)
def test_every_key_refuses_every_wrong_type_naming_the_key(tmp_path, key, kind, value):
    for path in (tmp_path / "r.json", tmp_path / "r.toml"):
        if path.suffix == ".json":
            path.write_text(json.dumps({"recipe": {key: value}}))
        else:
            path.write_text(f"{key} = {json.dumps(value)}\n" if not isinstance(value, dict) else f"[{key}]\na = 1\n")
        with pytest.raises(ObjcliError, match=rf"^--recipe {path}: '{key}' must be "):
            load_recipe(str(path))


@pytest.mark.parametrize(
    ("line", "field", "expected"),
    [
        ("seq-len = 128", "seq_len", 128),
        ("shuffle-rows = false", "shuffle_rows", False),
        ("strict = true", "strict", True),
        ("mask-prob = 1", "mask_prob", 1.0),
        ('inputs = "a.jsonl"', "inputs", ["a.jsonl"]),
        ('source = ["web=a/", "code=b/"]', "source", ("web=a/", "code=b/")),
        ('preset = "bart-large"', "bart_preset", "bart-large"),
    ],
)
def test_right_types_and_the_clis_old_spellings_are_read(tmp_path, line, field, expected):
    (tmp_path / "r.toml").write_text(line + "\n")
    assert load_recipe(str(tmp_path / "r.toml")) == {field: expected}


def test_the_reported_cases_are_one_line_from_the_command_line(small_corpus, sample_tokenizer, tmp_path):
    for line in ("seq-len = true", 'seq-len = "128"', 'shuffle-rows = "false"', 'strict = "false"'):
        (tmp_path / "r.toml").write_text(line + "\n")
        result = cli(
            [
                "transform",
                str(small_corpus / "prose.jsonl"),
                "-t",
                sample_tokenizer,
                "--recipe",
                str(tmp_path / "r.toml"),
                "-o",
                str(tmp_path / "o"),
            ],
        )
        assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
        assert result.output.startswith(f"Error: --recipe {tmp_path / 'r.toml'}: '{line.split(' ')[0]}' must be")
        assert not (tmp_path / "o").exists()


def test_a_manifest_from_another_version_warns(small_corpus, sample_tokenizer, tmp_path):
    run = ["transform", str(small_corpus / "prose.jsonl"), "-t", sample_tokenizer, "--seq-len", "64", "-q"]
    assert cli([*run, "-o", str(tmp_path / "a")]).exit_code == 0
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    same = cli(["transform", "--recipe", str(tmp_path / "a" / "manifest.json"), "-o", str(tmp_path / "b"), "-q"])
    assert same.exit_code == 0 and "warning" not in same.output
    manifest["objcli_version"] = "0.0.1"
    (tmp_path / "old.json").write_text(json.dumps(manifest))
    old = cli(["transform", "--recipe", str(tmp_path / "old.json"), "-o", str(tmp_path / "c"), "-q"])
    assert old.exit_code == 0 and "written by objcli 0.0.1 (manifest version 1)" in old.output
    assert to_toml({"seq-len": 64}) == "seq-len = 64\n"
