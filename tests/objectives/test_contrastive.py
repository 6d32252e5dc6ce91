"""Contrastive pairs: kernels against per-example reference loops, and rows whose anchor and positive
come from one document and whose negatives never do."""

import numpy as np
import pytest
import reference
from hypothesis import given
from hypothesis import strategies as st
from paths import ROOT
from runs import cli, folder_bytes, read_output, run_transform

from objcli.kernels.contrastive import augment, crop, other_documents
from objcli.kernels.ragged import lengths_to_offsets
from objcli.objectives.contrastive import PAIR_KINDS
from objcli.objectives.sentences import split_batch
from objcli.tokenizers import open_tokenizer


def test_crop_worked_example():
    start, length = crop(np.array([100]), np.array([10]), np.array([0.625]), np.array([0.5]), 0.1, 0.5)
    assert (start.tolist(), length.tolist()) == ([104], [3])  # ratio 0.35 -> 3 tokens; 8 starts, key 0.5 -> 4


@given(
    st.lists(st.tuples(st.integers(1, 300), st.floats(0, 0.999), st.floats(0, 0.999)), min_size=1, max_size=20),
    st.floats(0.01, 0.5),
    st.floats(0.5, 1.0),
)
def test_crop_matches_contrievers_randomcrop(units, low, high):
    n, ratio_keys, position_keys = (np.array(x) for x in zip(*units))
    starts, lengths = crop(np.zeros(len(n), np.int64), n, ratio_keys, position_keys, low, high)
    expected = [reference.contriever_crop(*u, low, high) for u in units]
    assert list(zip(starts.tolist(), lengths.tolist())) == expected


def test_crop_lengths_are_within_bounds_and_uniform():
    """Ratios of 20,000 crops of 1,000-token units: inside [0.1, 0.5], each fifth of the range within 3 sigma."""
    rng = np.random.default_rng(3)
    count = 20_000
    _, lengths = crop(np.zeros(count, np.int64), np.full(count, 1000), rng.random(count), rng.random(count), 0.1, 0.5)
    ratio = lengths / 1000
    assert ratio.min() >= 0.1 and ratio.max() <= 0.5
    observed = np.histogram(ratio, bins=np.linspace(0.1, 0.5, 6))[0]
    assert np.all(np.abs(observed - count / 5) < 3 * np.sqrt(count * 0.2 * 0.8))


@given(
    st.lists(st.lists(st.integers(0, 99), max_size=15), min_size=1, max_size=6),
    st.floats(0, 0.6),
    st.floats(0, 0.6),
    st.sampled_from([1.0, 0.9, 0.5]),
    st.integers(0, 2**31),
)
def test_augment_matches_the_reference_loop(views, delete, swap, keep, seed):
    rng = np.random.default_rng(seed)
    offsets = lengths_to_offsets(np.array([len(v) for v in views]))
    values = np.array([t for v in views for t in v], dtype=np.int32)
    keys = {"crop_start": rng.random(len(views)), "delete": rng.random(len(values)), "swap": rng.random(len(values))}
    out, out_offsets = augment(values, offsets, keys, delete, swap, keep)
    got = [out[a:b].tolist() for a, b in zip(out_offsets[:-1], out_offsets[1:])]
    # The reference sees each view's slice of the keys, in the order the kernel consumes them.
    expected, cropped, deleted = [], [], []
    for i, view in enumerate(views):
        if keep < 1 and view:
            start, length = reference.contriever_crop(len(view), 1.0, keys["crop_start"][i], keep, keep)
            view = view[start : start + length]
        cropped.append(view)
    position = 0
    for view in cropped:
        kept = [t for t, k in zip(view, keys["delete"][position:]) if k >= delete] if delete > 0 else view
        deleted.append(kept if kept or not view else view[:1])
        position += len(view)
    position = 0
    for view in deleted:
        expected.append(reference.augment_view(view, 0, [1.0] * len(view), list(keys["swap"][position:]), 0, swap, 1))
        position += len(view)
    assert got == expected


@given(st.lists(st.integers(0, 5), min_size=1, max_size=30).map(sorted), st.integers(0, 2**31))
def test_negatives_never_come_from_the_anchors_document(unit_documents, seed):
    unit_documents = np.array(unit_documents)
    documents = np.unique(unit_documents)
    picked = other_documents(documents, unit_documents, np.random.default_rng(seed).random((len(documents), 7)))
    for document, row in zip(documents, picked):
        if np.all(unit_documents == document):
            assert np.all(row == -1)
        else:
            assert np.all(row >= 0) and not np.any(unit_documents[row] == document)


def _as_text(ids) -> str:
    return "".join(chr(256 + int(t)) for t in ids)  # str.find on whole tokens


def _document_streams(corpus, tokenizer_path, sentences: bool) -> list[str]:
    import json

    tokenizer = open_tokenizer(str(tokenizer_path))
    texts = [json.loads(line)["text"] for line in corpus.read_text().splitlines() if line.strip()]
    streams = []
    for text in texts:
        pieces = split_batch([text], "prose")[0] if sentences else [text]
        tokens, offsets = tokenizer.encode(pieces, 1)
        streams.append(_as_text(tokens))
    return streams


@pytest.mark.parametrize("kind", PAIR_KINDS)
def test_anchor_and_positive_share_a_document_and_negatives_never(small_corpus, sample_tokenizer, tmp_path, kind):
    corpus = small_corpus / "prose.jsonl"
    run_transform(
        [corpus], sample_tokenizer, tmp_path / "out", objective="contrastive", pairs=kind, seq_len=96, negatives=2
    )
    _, table = read_output(tmp_path / "out")
    streams = _document_streams(corpus, sample_tokenizer, kind in ("ict", "adjacent"))
    checked = 0
    for anchor, positive, *negatives in zip(
        table["anchor_ids"], table["positive_ids"], table["negative_1_ids"], table["negative_2_ids"]
    ):
        anchor_text = _as_text(anchor)  # once a row, not once a document
        home = [i for i, s in enumerate(streams) if anchor_text in s]
        assert home, "an anchor is a contiguous piece of one document"
        assert any(_positive_in(streams[i], positive, anchor) for i in home)
        for negative in map(_as_text, negatives):
            found = [i for i, s in enumerate(streams) if negative in s]
            if len(home) == 1 and len(found) == 1:  # both name their document (the corpus repeats some text)
                checked += 1
                assert found != home
    assert checked > 50


def _positive_in(stream: str, positive, anchor) -> bool:
    """ICT: the positive is the passage as it is, or the passage with the anchor sentence cut out."""
    positive, anchor = _as_text(positive), _as_text(anchor)  # a character a token: slices are whole tokens
    if positive in stream:
        return True
    return any(positive[:i] + anchor + positive[i:] in stream for i in range(len(positive) + 1))


def test_the_same_pairs_whatever_the_workers(small_corpus, sample_tokenizer, tmp_path):
    for workers in (1, 2):
        run_transform(
            [small_corpus],
            sample_tokenizer,
            tmp_path / str(workers),
            workers=workers,
            objective="contrastive",
            pairs="crop",
            negatives=1,
            augment="delete:0.1,swap:0.1",
            partition_size="16KiB",
            seq_len=64,
        )
    assert folder_bytes(tmp_path / "1") == folder_bytes(tmp_path / "2")


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--pairs", "ict", "--min-crop", "0.2"], "Error: --min-crop applies to --pairs crop, not ict"),
        (["--pairs", "dropout", "--pairs-per-document", "2"], "Error: --pairs-per-document: dropout pairs a unit"),
        (["--augment", "shuffle:0.1"], "Error: --augment shuffle:0.1: 'shuffle:0.1' is not one of"),
        (["--min-crop", "0.6"], "Error: --min-crop 0.6 is above --max-crop 0.5"),
    ],
)
def test_options_that_cannot_apply_are_errors(small_corpus, sample_tokenizer, tmp_path, flags, message):
    result = cli(
        [
            "transform",
            str(small_corpus),
            "-t",
            sample_tokenizer,
            "-o",
            str(tmp_path / "o"),
            "--objective",
            "contrastive",
            *flags,
        ],
    )
    assert result.exit_code == 1 and result.output.startswith(message), result.output


def test_the_manual_infonce_snippet_runs_on_a_real_output(small_corpus, sample_tokenizer, tmp_path, monkeypatch):
    """The manual's 10-line InfoNCE example, run as printed on a contrastive output with negatives."""
    import re

    run_transform(
        [small_corpus / "prose.jsonl"],
        sample_tokenizer,
        tmp_path / "pairs",
        objective="contrastive",
        seq_len=64,
        negatives=1,
    )
    readme = (ROOT / "objcli" / "docs" / "objectives.md").read_text()
    snippet = re.search(r"InfoNCE from a batch.*?```python\n(.*?)```", readme, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(snippet, scope)  # noqa: S102 - the README's own example
    assert scope["logits"].shape == (32, 64) and np.isfinite(scope["loss"])
    assert scope["targets"].tolist() == list(range(32))
