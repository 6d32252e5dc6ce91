"""Issue 30: the fuzz grows from corpora to the files a user hands objcli besides them: recipes,
tiktoken side and rank files, and manifests. Each case is generated from its seed; the promise is the
same as for corpora: a one-line error (``ObjcliError``) or a result, never another exception, and
every run that succeeds balances documents read = written + skipped. The default suite runs a few
hundred cases; the slow suite 10,000."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import pytest
from runs import cli, run_transform

from objcli.errors import ObjcliError
from objcli.recipe import _by_key, config_from_values, load_recipe, to_toml

pytest.importorskip("tiktoken")

VALUES = [
    0,
    1,
    -1,
    2,
    64,
    2**31,
    2**63,
    2**64,
    -(2**64),
    0.5,
    1.5,
    -0.0,
    1e-300,
    1e300,
    float("inf"),
    float("nan"),
    True,
    False,
    "",
    "x",
    "128",
    "true",
    "false",
    "0.5",
    "../x",
    "s3://b//a",
    "\x00",
    "é" * 3,
    [],
    ["a"],
    [1, 2],
    {"a": 1},
    None,
]


def _value(rng: random.Random):
    return rng.choice(VALUES)


def _plausible(key: str, rng: random.Random):
    """A value of the option's own type (and one of its choices), so that some recipes validate."""
    from objcli.recipe import RUN_FIELDS, objective_fields

    name, hint = _by_key()[key]
    f = RUN_FIELDS.get(name) or objective_fields()[name][0]
    if f.metadata["choices"]:
        return rng.choice(f.metadata["choices"])
    text = str(hint)
    if "bool" in text:
        return rng.choice([True, False])
    if "int" in text:
        return rng.choice([1, 2, 64, 128, 512])
    if "float" in text:
        return rng.choice([0.1, 0.15, 0.5])
    return rng.choice(["", "x", "1MiB"])


def recipe_case(seed: int) -> dict:
    """A table of a few keys (real ones, a typo now and then) with values of any type, or, half of the
    time, of the option's own type."""
    from objcli.recipe import RUN_FIELDS, key_of

    rng = random.Random(seed)
    keys = sorted(_by_key())
    run_keys = sorted(key_of(f) for n, f in RUN_FIELDS.items() if n not in ("inputs", "output", "tokenizer", "source"))
    table = {}
    for _ in range(rng.randrange(1, 5)):
        key = rng.choice(run_keys if rng.random() < 0.6 else keys)
        key = key if rng.random() < 0.95 else key[:-1] + "z"
        table[key] = _plausible(key, rng) if rng.random() < 0.6 and key in _by_key() else _value(rng)
    if rng.random() < 0.3:
        table["inputs"] = rng.choice([["in.jsonl"], "in.jsonl", 5, [None]])
    return table


def check_recipe(seed: int, folder: Path) -> object:
    """The recipe as JSON (TOML cannot hold null), loaded and made a configuration: a configuration or
    an ObjcliError."""
    path = folder / f"r{seed}.json"
    path.write_text(json.dumps({"recipe": recipe_case(seed)}))
    try:
        values = load_recipe(str(path))
        return config_from_values({"inputs": ["in.jsonl"], "tokenizer": "t.model", "output": "o", **values})
    except ObjcliError:
        return None


def test_fuzz_recipes_that_pass_run_and_balance(small_corpus, sample_tokenizer, tmp_path):
    """Recipes that validate are run: a run succeeds and balances, or is one line. The input is five
    documents: a recipe may cut them into one-character documents (--max-document-chars 1)."""
    small = tmp_path / "small.jsonl"
    small.write_text("".join((small_corpus / "prose.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:5]))
    ran = 0
    for seed in range(400):
        config = check_recipe(seed, tmp_path)
        if config is None or ran >= 6:
            continue
        table = {k: v for k, v in recipe_case(seed).items() if k != "inputs"}
        table.update({"inputs": [str(small)], "tokenizer": sample_tokenizer})
        (tmp_path / "run.toml").write_text(to_toml({k: v for k, v in table.items() if v is not None}))
        result = cli(
            [
                "transform",
                "--recipe",
                str(tmp_path / "run.toml"),
                "-o",
                str(tmp_path / f"o{seed}"),
                "-q",
                "--workers",
                "1",
            ],
        )
        assert result.exception is None or isinstance(result.exception, SystemExit), (seed, result.output)
        if result.exit_code == 0:
            totals = json.loads((tmp_path / f"o{seed}" / "manifest.json").read_text())["totals"]
            assert totals["documents_read"] == totals["documents_written"] + totals["documents_skipped"]
        else:
            assert result.output.startswith("Error: ") and result.output.count("\n") == 1, (seed, result.output)
        ran += 1
    assert ran == 6


BYTES = [(bytes([b]), b) for b in range(256)] + [(b"ab", 256), (b"abc", 257), (b" the", 258)]


def side_case(seed: int, folder: Path) -> Path:
    """A rank file and side file, each mutated a little from a valid pair."""
    rng = random.Random(seed)
    lines = [f"{base64.b64encode(t).decode()} {r}" for t, r in BYTES]
    for _ in range(rng.randrange(0, 3)):
        at = rng.randrange(len(lines))
        lines[at] = rng.choice(
            [
                lines[at][: rng.randrange(len(lines[at]) or 1)],
                lines[at] + " 7",
                "",
                "!!!! 3",
                lines[rng.randrange(len(lines))],
                lines[at].replace(" ", "\t"),
                "YWI= -5",
            ]
        )
    side = {"pattern": r"\S+|\s+", "special_tokens": {"<|e|>": 300}, "bos": None, "eos": "<|e|>"}
    for _ in range(rng.randrange(0, 3)):
        key = rng.choice(["pattern", "special_tokens", "bos", "eos", "extra"])
        side[key] = rng.choice([_value(rng), {"<|e|>": _value(rng)}, "(", "a(?R)?b", r"\p{L}+|\s"])
    path = folder / f"t{seed}.tiktoken"
    path.write_text("\n".join(lines) + rng.choice(["\n", "", "\n\n"]))
    side_text = json.dumps(side) if rng.random() < 0.95 else json.dumps(side)[:-3]
    path.with_name(path.name + ".json").write_text(side_text)
    return path


def check_side(seed: int, folder: Path) -> None:
    from objcli.tokenizers import open_tokenizer

    try:
        tokenizer = open_tokenizer(side_case(seed, folder))
    except ObjcliError:
        return
    tokens, offsets = tokenizer.encode(["the abc ab <|e|> é", ""])
    assert offsets.tolist()[-1] == len(tokens)


@pytest.fixture(scope="module")
def finished(small_corpus, sample_tokenizer, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("manifest") / "out"
    run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, out, objective="mlm", seq_len=64)
    return out


def _mutate(node, rng: random.Random):
    """The manifest with one value somewhere replaced, a key dropped, or a list cut."""
    if isinstance(node, dict) and node:
        key = rng.choice(sorted(node))
        roll = rng.random()
        if roll < 0.15:
            return {k: v for k, v in node.items() if k != key}
        if roll < 0.4:
            return {**node, key: _value(rng)}
        return {**node, key: _mutate(node[key], rng)}
    if isinstance(node, list) and node:
        at = rng.randrange(len(node))
        if rng.random() < 0.2:
            return node[:at]
        return [*node[:at], _mutate(node[at], rng), *node[at + 1 :]]
    return _value(rng)


def check_manifest(seed: int, finished: Path, folder: Path) -> None:
    import shutil

    out = folder / f"m{seed}"
    if not out.exists():
        shutil.copytree(finished, out)
    document = json.loads((finished / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps(_mutate(document, random.Random(seed))))
    for command in (["verify"], ["stats", "--json"], ["inspect", "--rows", "1"]):
        result = cli([*command, str(out)])
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            seed,
            command,
            result.output[-800:],
        )
        assert "Traceback" not in result.output, (seed, command)


def blocks(name: str, fast: int, total: int, size: int) -> list:
    """Seeds in blocks of ``size``: the first ``fast`` blocks in the default suite, the rest slow."""
    return [
        pytest.param(
            name, range(b * size, (b + 1) * size), id=f"{name}-{b}", marks=() if b < fast else pytest.mark.slow
        )
        for b in range(total)
    ]


# 4,000 recipes, 3,300 tiktoken file pairs and 2,910 manifests: 10,210 cases, of which 790 by default.
@pytest.mark.parametrize(
    ("kind", "seeds"),
    [*blocks("recipes", 4, 40, 100), *blocks("tiktoken", 3, 33, 100), *blocks("manifests", 3, 100, 30)],
)
def test_fuzz_files(kind, seeds, request, tmp_path):
    for seed in seeds:
        if kind == "manifests":
            check_manifest(seed, request.getfixturevalue("finished"), tmp_path)
        else:
            (check_recipe if kind == "recipes" else check_side)(seed, tmp_path)
