"""Issue 30: every integer option is bounded where it is parsed (its minimum - 1, its maximum + 1 and
2**64 are one-line errors; its bounds pass), over every option of the run, the execution and every
objective in the registry, and the reported case (a seed past 64 bits with --split) is one line."""

import dataclasses
import json
import typing

import pytest
from runs import cli

from objcli.cli_options import Execution
from objcli.config import TransformConfig
from objcli.errors import ObjcliError
from objcli.objectives import REGISTRY
from objcli.options import INT_LIMIT, check_field, flag_of


def integer_options():
    owners = [TransformConfig, Execution, *(REGISTRY.named(n).options_type for n in REGISTRY.names())]
    seen = set()
    for owner in owners:
        hints = typing.get_type_hints(owner)
        for f in dataclasses.fields(owner):
            kinds = typing.get_args(hints[f.name]) or (hints[f.name],)
            if "help" in f.metadata and int in kinds and bool not in kinds and flag_of(f) not in seen:
                seen.add(flag_of(f))
                yield pytest.param(f, id=flag_of(f))


@pytest.mark.parametrize("f", list(integer_options()))
def test_every_integer_option_is_bounded(f):
    meta = f.metadata
    if meta["choices"]:
        for value in (min(meta["choices"]) - 1, max(meta["choices"]) + 1, 2**64):
            with pytest.raises(ObjcliError, match="choose one of"):
                check_field(f, value)
        return
    low, high = meta["minimum"], meta["maximum"] if meta["maximum"] is not None else INT_LIMIT
    assert high <= 2**64 - 1  # nothing reaches NumPy past 64 bits
    for value in (high, *(() if low is None else (low,))):
        check_field(f, value)
    for value in (high + 1, 2**64, 2**200, *(() if low is None else (low - 1,))):
        with pytest.raises(ObjcliError, match=rf"^{flag_of(f)} {value}: must be"):
            check_field(f, value)


def _seeded_run(corpus, tokenizer, out, seed):
    args = ["transform", str(corpus / "prose.jsonl"), "-t", tokenizer, "--split", "validation=10%"]
    return cli([*args, "--seed", str(seed), "--seq-len", "64", "-o", str(out), "-q"])


def _validation_sha256(out) -> list[str]:
    shards = json.loads((out / "manifest.json").read_text())["shards"]
    return [digest for s in shards if s["split"] == "validation" for digest in s["sha256"].values()]


@pytest.mark.parametrize(("seed", "code"), [(2**64, 1), (2**64 - 1, 0)])
def test_a_seed_past_64_bits_is_one_line_and_the_largest_runs(small_corpus, sample_tokenizer, tmp_path, seed, code):
    result = _seeded_run(small_corpus, sample_tokenizer, tmp_path / "o", seed)
    assert result.exit_code == code, result.output
    if code:
        assert result.output == f"Error: --seed {seed}: must be between 0 and {2**64 - 1}\n"
        return
    # The largest seed is used whole: recorded exactly, and its validation split holds other documents
    # than seed 0's and than the seed with its top bit cleared (a seed cut to 63 bits would be that one).
    assert json.loads((tmp_path / "o" / "manifest.json").read_text())["seed"] == seed
    splits = [_validation_sha256(tmp_path / "o")]
    for other in (0, seed - 2**63):
        assert _seeded_run(small_corpus, sample_tokenizer, tmp_path / f"s{other}", other).exit_code == 0
        splits.append(_validation_sha256(tmp_path / f"s{other}"))
    assert splits[0] != splits[1] and splits[0] != splits[2]
