"""Sentence splitting for the sentence objectives (NSP, SOP, ELECTRA, BART, contrastive): the prose
rules, the compiled and pure splitters against a text-by-text reference and each other."""

import os
from contextlib import contextmanager

import pytest
import reference
from hypothesis import given
from hypothesis import strategies as st

from objcli.objectives import sentences
from objcli.objectives.sentences import ABBREVIATIONS, SENTINEL, split_batch


def test_prose_splitting_rules():
    text = (
        'Dr. Smith met J. R. Tolkien at 5 p.m. in the U.K. on Friday. "Really?" she asked. (Yes.) It was e.g. fine!'
        "\n\nNew paragraph 2 here"
    )
    assert split_batch([text], "prose")[0] == [
        "Dr. Smith met J. R. Tolkien at 5 p.m. in the U.K. on Friday.",
        '"Really?" she asked.',
        "(Yes.)",
        "It was e.g. fine!",
        "New paragraph 2 here",
    ]
    assert split_batch(["version 3.11 is out. Next"], "prose")[0] == ["version 3.11 is out.", "Next"]
    assert split_batch(["def f():\n\n    return 1\n"], "lines")[0] == ["def f():", "    return 1"]


# Texts built from the characters the rules turn on: terminators, closers, openers, abbreviations'
# letters in both cases, digits (a decimal one that is not ASCII), a non-letter word character,
# letters that are numbers or not ASCII (the Kelvin sign lower-cases to 'k'), whitespace of every
# kind, the sentinel.
SPLIT_ALPHABET = st.sampled_from(
    list(
        ".!?\"')([] \n\t\r\x0b\x1c\x85\xa0\u2028\u3000"
        "aAdDrReEgGiIsStTxX19_\u00bd\u00b2"
        "\u0663\u00e9\u00c9\u212a" + SENTINEL
    )
    + [
        "Dr. ",
        "e.g. ",
        "i.e.",
        " J. ",
        "St.",
        "\n\n",
        "\n \n",
        ". A",
        "? (B",
        '." C',
        "approx. 3",
        "U.S. A",
        "\u00c9. B",
    ]
)


SPLITTERS = ["compiled", "pure"]


@contextmanager
def splitter(path: str):
    """The compiled splitter (numba; ``make test`` installs it, so this must not fall back) or the
    regular expression, for the block."""
    saved = os.environ.get("OBJCLI_PURE_PYTHON")
    os.environ["OBJCLI_PURE_PYTHON"] = "1" if path == "pure" else "0"
    sentences._compiled_splitter.cache_clear()
    try:
        assert (sentences._compiled_splitter() is None) == (path == "pure")
        yield
    finally:
        os.environ.pop("OBJCLI_PURE_PYTHON") if saved is None else os.environ.update(OBJCLI_PURE_PYTHON=saved)
        sentences._compiled_splitter.cache_clear()


@pytest.fixture(scope="module")
def compiled_splitter_ready():
    """numba compiles the splitter (or loads it from its cache) on its first call: 1-2 s on a fresh
    clone, which a property test's per-example deadline must not see. Done once, before the tests."""
    with splitter("compiled"):
        sentences.warm_splitter()


@pytest.mark.usefixtures("compiled_splitter_ready")
@pytest.mark.parametrize("path", SPLITTERS)
@given(
    texts=st.lists(st.lists(SPLIT_ALPHABET, max_size=40).map("".join), max_size=6),
    mode=st.sampled_from(["prose", "lines"]),
)
def test_batch_splitting_matches_text_by_text_reference(path, texts, mode):
    """One pass over the joined batch, compiled or the regular expression, cuts exactly where the
    reference's candidate loop does, text by text, sentinel or not."""
    slow = {"prose": lambda t: reference.split_prose(t, set(ABBREVIATIONS)), "lines": reference.split_lines}[mode]
    expected = [slow(text) for text in texts]
    with splitter(path):
        found, counts = split_batch(texts, mode)
    assert counts.tolist() == [len(e) for e in expected]
    assert found == [s for e in expected for s in e]


def test_both_splitters_cut_the_sample_corpus_alike(sample_dir):
    """Real prose and code, ASCII batches and wider ones: the same sentences from both paths."""
    import json

    texts = [
        json.loads(line)["text"]
        for name in ("prose.jsonl", "code.jsonl")
        for line in (sample_dir / name).read_text(encoding="utf-8").splitlines()
    ]
    batches = [texts[i : i + 50] for i in range(0, len(texts), 50)] + [["plain ASCII. Only here"]]
    assert any(not "".join(b).isascii() for b in batches) and any("".join(b).isascii() for b in batches)
    results = {}
    for path in SPLITTERS:
        with splitter(path):
            results[path] = [split_batch(batch, "prose") for batch in batches]
    assert all(a[0] == b[0] and a[1].tolist() == b[1].tolist() for a, b in zip(*results.values()))
    assert sum(len(found) for found, _ in results["pure"]) > 1000
