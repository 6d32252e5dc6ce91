"""Every hint a run's summary or warnings give works when followed: over the registry (objective ×
packer it accepts), a run that drops a partial row names the option that keeps it, and the same run
with that option is accepted and drops nothing; where nothing keeps it, no option is named."""

import json
import re

import pytest
from click.testing import CliRunner
from test_registry import cli_inputs, corpus, records, variants  # noqa: F401  (fixtures)

from objcli.cli import main
from objcli.objectives import REGISTRY

COMBINATIONS = [
    pytest.param(name, options, packer, id=f"{name}-{'-'.join(map(str, options.values())) or 'default'}-{packer}")
    for name, options in variants()
    for packer in REGISTRY.get(name).packers(REGISTRY.get(name).options_type(**options))
]
HINT = re.compile(r"(--[a-z-]+ [a-z]+) keeps them|pass (--[a-z-]+ [a-z]+) or a smaller --seq-len")


def _run(args: list[str], out) -> tuple[dict, str]:
    result = CliRunner().invoke(main, [*args, "-o", str(out), "--overwrite"])
    assert result.exit_code == 0, result.output
    return json.loads((out / "manifest.json").read_text()), result.output


def _args(name, options, packer, corpus, records, sample_tokenizer, seq_len):  # noqa: F811
    return [
        "transform",
        *cli_inputs(name, corpus, records),
        "-t",
        sample_tokenizer,
        "--objective",
        name,
        "--packing",
        packer,
        "--seq-len",
        str(seq_len),
        *(a for k, v in options.items() for a in ("--" + k.replace("_", "-"), str(v))),
    ]


@pytest.mark.parametrize("name, options, packer", COMBINATIONS)
@pytest.mark.parametrize("seq_len", [128, 100_000])  # a partial last row; no full row at all (the warning)
def test_a_remainder_hint_works_when_followed(
    name,
    options,
    packer,
    seq_len,
    corpus,  # noqa: F811
    records,  # noqa: F811
    sample_tokenizer,
    tmp_path,
):
    args = _args(name, options, packer, corpus, records, sample_tokenizer, seq_len)
    if seq_len > 4096 and REGISTRY.get(name).reads_records:
        return  # a conversation is one row of its own length: nothing is a remainder
    try:
        manifest, output = _run(args, tmp_path / "first")
    except AssertionError:
        if seq_len > 4096:
            return  # an objective that refuses such a row length says so itself (tested with its options)
        raise
    hints = {a or b for a, b in HINT.findall(output)}
    dropped = manifest["totals"].get("tokens_dropped", 0)
    keeps = REGISTRY.get(name).keeps_remainder(packer, REGISTRY.get(name).options_type(**options))
    if not dropped:
        assert not hints, output
        return
    assert hints == ({keeps} if keeps else set()), output
    for hint in hints:
        again, output = _run([*args, *hint.split(" ")], tmp_path / "again")
        assert again["totals"].get("tokens_dropped", 0) < dropped, output
        assert not HINT.findall(output), output  # the hint is not given again once followed
