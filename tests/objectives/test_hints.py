"""Every hint a run's summary or warnings give works when followed: over the registry (objective ×
packer it accepts), a run that drops a partial row names the option that keeps it, and the same run
with that option is accepted and drops nothing; where nothing keeps it, no option is named."""

import json
import re

import pytest
from runs import cli
from test_registry import cli_inputs, corpus, records, variants  # noqa: F401  (fixtures)

from objcli.objectives import REGISTRY

COMBINATIONS = [
    pytest.param(name, options, packer, id=f"{name}-{'-'.join(map(str, options.values())) or 'default'}-{packer}")
    for name, options in variants()
    for packer in REGISTRY.named(name).packers(REGISTRY.named(name).options_type(**options))
]
HINT = re.compile(r"(--[a-z-]+ [a-z]+) keeps them|pass (--[a-z-]+ [a-z]+) or a smaller --seq-len")


def _run(args: list[str], out) -> tuple[dict, str]:
    result = cli([*args, "-o", str(out), "--overwrite"])
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
    if seq_len > 4096 and REGISTRY.named(name).reads(REGISTRY.named(name).options_type(**options)).records:
        return  # a conversation is one row of its own length: nothing is a remainder
    try:
        manifest, output = _run(args, tmp_path / "first")
    except AssertionError:
        if seq_len > 4096:
            return  # an objective that refuses such a row length says so itself (tested with its options)
        raise
    hints = {a or b for a, b in HINT.findall(output)}
    dropped = manifest["totals"].get("tokens_dropped", 0)
    keeps = REGISTRY.named(name).keeps_remainder(packer, REGISTRY.named(name).options_type(**options))
    if not dropped:
        assert not hints, output
        return
    assert hints == ({keeps} if keeps else set()), output
    for hint in hints:
        again, output = _run([*args, *hint.split(" ")], tmp_path / "again")
        assert again["totals"].get("tokens_dropped", 0) < dropped, output
        assert not HINT.findall(output), output  # the hint is not given again once followed


PAD_HINT = re.compile(r"such as --pad-token ('[^']+')")


@pytest.mark.parametrize("tokenizer", ["tokenizer.model", "code.model", "llama-style"])
@pytest.mark.parametrize("objective", ["clm", "mlm", "span-corruption"])
def test_the_pad_token_hint_works_when_followed(tokenizer, objective, tmp_path):
    """A --pad-token the tokenizer lacks names one it has that no other role takes: following it runs."""
    from paths import SAMPLE_DATA

    args = ["transform", str(SAMPLE_DATA / "prose.jsonl"), "-t", str(SAMPLE_DATA / tokenizer), "--objective",
            objective, "--seq-len", "128"]  # fmt: skip
    refused = cli([*args, "--pad-token", "NOTAPIECE", "-o", str(tmp_path / "x")])
    assert refused.exit_code == 1 and "NOTAPIECE" in refused.output, refused.output
    hint = PAD_HINT.search(refused.output)
    assert hint, refused.output
    followed = cli([*args, "--pad-token", hint.group(1).strip("'"), "-o", str(tmp_path / "o")])
    assert followed.exit_code == 0, followed.output
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    piece = hint.group(1).strip("'")
    assert manifest["special_tokens"]["pieces"].get("pad", piece) == piece  # concat pads nothing: no pad role
