"""Two sources as users hold them, for mixture tests: web prose as JSON lines, and the sample code's
paragraphs, each source read with its own field."""

from __future__ import annotations

import json

from paths import SAMPLE_DATA


def code_paragraphs() -> list[str]:
    """The sample code corpus cut at blank lines: many documents of very unequal lengths."""
    return [
        p
        for line in (SAMPLE_DATA / "code.jsonl").read_text(encoding="utf-8").splitlines()
        for p in json.loads(line)["text"].split("\n\n")
        if p.strip()
    ]


def run_web_and_code(out, web, code, code_key: str, **options):
    """A mixture of the two (``web=`` the JSON lines, ``code=`` a file whose text is in ``code_key``)
    with the sample tokenizer, through the library; its Summary."""
    from runs import run_transform

    sources = [f"web={web}", f"code={code}"]
    return run_transform(
        [], SAMPLE_DATA / "tokenizer.model", out, source=sources, text_key=f"code={code_key}", **options
    )
