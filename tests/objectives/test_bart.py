"""BART noising: kernels against a reference loop and their properties; end to end."""

import math

import numpy as np
import reference
import sentencepiece as spm
from hypothesis import given, settings
from hypothesis import strategies as st
from runs import read_output, run_transform

from objcli.kernels.bart import insert_noise, mask_spans, permute_sentences, place_spans, poisson_spans, rotate
from objcli.kernels.ragged import gather_ranges, lengths_to_offsets

examples_strategy = st.lists(
    st.lists(st.tuples(st.integers(10, 60), st.booleans()), min_size=1, max_size=30), min_size=1, max_size=6
)


def flatten(examples):
    tokens = np.array([t for e in examples for t, _ in e], dtype=np.int32)
    word_start = np.array([s for e in examples for _, s in e], dtype=bool)
    offsets = lengths_to_offsets(np.array([len(e) for e in examples]))
    word_start[offsets[:-1]] = True
    return tokens, word_start, offsets


@settings(max_examples=150)
@given(examples_strategy, st.sampled_from([0.0, 0.3, 0.5, 1.0]), st.sampled_from([1, 0, -1]), st.integers(0, 2**32))
def test_span_masking_matches_reference_and_budget(examples, ratio, replace_length, seed):
    rng = np.random.default_rng(seed)
    tokens, word_start, offsets = flatten(examples)
    words = np.add.reduceat(word_start.astype(np.int64), offsets[:-1])
    budgets = np.ceil(words * ratio).astype(np.int64)
    lengths, example = poisson_spans(budgets, 2.0, rng)
    assert np.all(lengths >= 0)
    assert np.bincount(example, weights=lengths, minlength=len(budgets)).astype(int).tolist() == budgets.tolist()
    starts = place_spans(lengths, example, words, rng)
    out, out_offsets = mask_spans(
        tokens,
        offsets,
        word_start,
        lengths,
        example,
        starts,
        np.full(len(lengths), 99, dtype=np.int32),
        replace_length,
        np.zeros(len(lengths), dtype=bool),
        np.zeros(len(tokens), dtype=np.int32),
    )
    for e in range(len(examples)):
        spans = [(int(s), int(n)) for s, n, x in zip(starts, lengths, example) if x == e]
        covered = sorted(w for s, n in spans for w in range(s, s + n))
        assert len(covered) == len(set(covered)) == budgets[e] and all(
            0 <= w < words[e] for w in covered
        )  # exact, no overlap
        expected = reference.bart_mask_example(
            tokens[offsets[e] : offsets[e + 1]].tolist(),
            word_start[offsets[e] : offsets[e + 1]].tolist(),
            spans,
            replace_length,
            99,
        )
        assert out[out_offsets[e] : out_offsets[e + 1]].tolist() == expected


@given(st.lists(st.integers(1, 5), min_size=1, max_size=20), st.sampled_from([0.0, 0.5, 1.0]), st.integers(0, 2**32))
def test_permutation_keeps_the_multiset_of_sentences(sentence_lengths, ratio, seed):
    rng = np.random.default_rng(seed)
    sentence_offsets = lengths_to_offsets(np.array(sentence_lengths))
    tokens = np.arange(sentence_offsets[-1])
    half = len(sentence_lengths) // 2
    example_sentences = np.array([0, half, len(sentence_lengths)]) if half else np.array([0, len(sentence_lengths)])
    starts, lengths = permute_sentences(sentence_offsets, example_sentences, ratio, rng)
    permuted = gather_ranges(tokens, starts, lengths)
    original = [tokens[sentence_offsets[i] : sentence_offsets[i + 1]].tolist() for i in range(len(sentence_lengths))]
    got = [permuted[o : o + n].tolist() for o, n in zip(lengths_to_offsets(lengths)[:-1], lengths)]
    for a, b in zip(example_sentences[:-1], example_sentences[1:]):
        assert sorted(got[a:b]) == sorted(original[a:b])  # same sentences, within their example
        moved = sum(x != y for x, y in zip(got[a:b], original[a:b]))
        assert moved <= math.ceil((b - a) * ratio)
    if ratio == 0:
        assert got == original


@given(st.lists(st.integers(1, 12), min_size=1, max_size=8), st.integers(0, 2**32))
def test_rotation_and_insertion(lengths, seed):
    rng = np.random.default_rng(seed)
    offsets = lengths_to_offsets(np.array(lengths))
    tokens = np.arange(offsets[-1], dtype=np.int32) + 100
    rotated, flags = rotate(tokens, offsets, 1.0, rng)
    assert flags.all()
    for a, b in zip(offsets[:-1], offsets[1:]):
        original, new = tokens[a:b].tolist(), rotated[a:b].tolist()
        assert any(new == original[k:] + original[:k] for k in range(len(original)))
    noisy, noisy_offsets = insert_noise(tokens, offsets, 0.3, 7, 0.0, np.array([5]), rng)
    for e, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
        row = noisy[noisy_offsets[e] : noisy_offsets[e + 1]].tolist()
        assert [t for t in row if t != 7] == tokens[a:b].tolist()
        assert row.count(7) == math.ceil((b - a) * 0.3)


def test_bart_end_to_end(small_corpus, sample_tokenizer, tmp_path):
    files = [small_corpus / "prose.jsonl"]
    only_permute = run_transform(files, sample_tokenizer, tmp_path / "p", objective="bart", seq_len=128, mask_ratio=0.0)
    _, permuted = read_output(tmp_path / "p")
    for inputs, labels in zip(permuted["input_ids"], permuted["labels"]):
        assert sorted(inputs) == sorted(labels) and inputs[0] == labels[0] == 1 and inputs[-1] == labels[-1] == 2
    assert only_permute.totals["documents_read"] == only_permute.totals["documents_written"]

    run_transform(
        files,
        sample_tokenizer,
        tmp_path / "r",
        objective="bart",
        seq_len=128,
        mask_ratio=0.0,
        permute_sentences=0.0,
        rotate=1.0,
    )
    _, rotated = read_output(tmp_path / "r")
    for inputs, labels in zip(rotated["input_ids"], rotated["labels"]):
        body, original = inputs[1:-1], labels[1:-1]
        assert any(body == original[k:] + original[:k] for k in range(max(1, len(original))))

    # Without permutation the word starts of the labels are those the masking saw.
    summary = run_transform(
        files, sample_tokenizer, tmp_path / "m", objective="bart", seq_len=128, permute_sentences=0.0
    )
    manifest, masked = read_output(tmp_path / "m")
    mask_id = manifest["special_tokens"]["ids"]["mask"]
    sp = spm.SentencePieceProcessor(model_file=sample_tokenizer)
    starts_word = lambda t: sp.id_to_piece(t).startswith("\u2581")  # noqa: E731
    expected_budget = sum(
        math.ceil((1 + sum(starts_word(t) for t in labels[2:-1])) * 0.3) for labels in masked["labels"]
    )
    assert summary.totals["masked_words"] == expected_budget
    # One <mask> per span and per insert, except the 10 % (mask-random) that became random tokens.
    spans = summary.totals["mask_spans"] + summary.totals["mask_inserts"]
    masks = sum(row.count(mask_id) for row in masked["input_ids"])
    assert abs(masks / spans - 0.9) < 3 * np.sqrt(0.09 / spans)
    assert permuted["labels"] == masked["labels"]  # labels are the original text whatever the noise
