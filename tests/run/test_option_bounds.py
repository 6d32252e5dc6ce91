"""Issue 30: every integer option is bounded where it is parsed (its minimum - 1, its maximum + 1 and
2**64 are one-line errors; its bounds pass), over every option of the run, the execution and every
objective in the registry, and the reported case (a seed past 64 bits with --split) is one line."""

import dataclasses
import typing

import pytest
from click.testing import CliRunner

from objcli.cli import main
from objcli.cli_options import Execution
from objcli.config import TransformConfig
from objcli.errors import ObjcliError
from objcli.objectives import REGISTRY
from objcli.options import INT_LIMIT, check_field, flag_of


def integer_options():
    owners = [TransformConfig, Execution, *(REGISTRY.get(n).options_type for n in REGISTRY.names())]
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


@pytest.mark.parametrize(("seed", "code"), [(2**64, 1), (2**64 - 1, 0)])
def test_a_seed_past_64_bits_is_one_line_and_the_largest_runs(small_corpus, sample_tokenizer, tmp_path, seed, code):
    result = CliRunner().invoke(
        main,
        [
            "transform",
            str(small_corpus / "prose.jsonl"),
            "-t",
            sample_tokenizer,
            "--split",
            "validation=10%",
            "--seed",
            str(seed),
            "--seq-len",
            "64",
            "-o",
            str(tmp_path / "o"),
            "-q",
        ],
    )
    assert result.exit_code == code, result.output
    if code:
        assert result.output == f"Error: --seed {seed}: must be between 0 and {2**64 - 1}\n"
