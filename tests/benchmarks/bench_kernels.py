"""`make bench`, objective kernels: each kernel against a slow, obviously-correct reference loop
(tests/support/reference.py) on the same data in the same run, one core, tokens per second."""

from __future__ import annotations

import math
import sys
import time

from benchmarks import ROOT, TOKENIZER


def _rate(function, tokens: int, repeat: int = 3) -> float:
    """Best-of-``repeat`` tokens per second."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - started)
    return tokens / best


def kernel_rows() -> list[tuple[str, float, float]]:
    """(name, kernel tokens/s, reference-loop tokens/s), same data, same run, one core."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "tests" / "support"))
    import reference

    from objcli.config import TransformConfig
    from objcli.kernels.spans import corrupt_spans, random_keys, random_spans, span_counts
    from objcli.objectives import DocumentBatch
    from objcli.objectives.ul2 import Ul2, Ul2Options
    from objcli.tokenizers import open_tokenizer

    rng = np.random.default_rng(0)
    results = []

    rows, length = 4000, 568
    tokens = rng.integers(0, 32000, size=(rows, length)).astype(np.int32)
    sentinels = np.arange(32099, 31999, -1, dtype=np.int32)

    def t5_kernel():
        nonnoise, noise = random_spans(rows, length, 0.15, 3, np.random.default_rng(1), np.random.default_rng(2))
        corrupt_spans(tokens, nonnoise, noise, sentinels, 1)

    few = 100
    num_noise, num_spans = span_counts(length, 0.15, 3)
    noise_keys = random_keys(np.random.default_rng(1), (few, num_noise - 1))
    nonnoise_keys = random_keys(np.random.default_rng(2), (few, length - num_noise - 1))
    sentinel_list, token_lists = sentinels.tolist(), tokens[:few].tolist()

    def t5_reference():
        for row in range(few):
            mask = reference.noise_mask(
                reference.composition(list(nonnoise_keys[row]), num_spans),
                reference.composition(list(noise_keys[row]), num_spans),
            )
            reference.corrupt(token_lists[row], mask, sentinel_list, 1)

    results.append(
        ("span-corruption 568 -> 512/114", _rate(t5_kernel, rows * length), _rate(t5_reference, few * length, 1))
    )

    results += prefix_rows(reference, rng, few)

    tokenizer = open_tokenizer(TOKENIZER)
    config = TransformConfig(
        inputs=("-",),
        tokenizer=str(TOKENIZER),
        objective="ul2",
        objective_options=Ul2Options(),
        output="unused",
        seq_len=512,
    )
    objective = Ul2(config, tokenizer)
    stream = rng.integers(0, 8000, size=2_000_000).astype(np.int32)

    def ul2_kernel():
        transform = objective.partition_examples(0)
        transform.examples(DocumentBatch([], stream, np.array([0, len(stream)]), 0, 0))

    plans = objective.plans
    choice = np.random.default_rng(4).choice(len(plans), size=few, p=objective.rates)
    sentinel_list = objective.sentinels.tolist()
    stream_list = stream[: sum(p.raw for p in plans) * few // len(plans) * 2].tolist()

    def ul2_reference():
        position = 0
        for index in choice:
            d, plan = objective.denoisers[index], plans[index]
            example = stream_list[position : position + plan.raw]
            position += plan.raw
            if d.kind == "prefix":
                reference.prefix_split(example, int(rng.integers(plan.min_split, plan.raw)), 2)
                continue
            n, s = span_counts(plan.raw, d.noise_density, d.mean_span)
            keys_noise = rng.random(n - 1).tolist()
            keys_clean = rng.random(plan.raw - n - 1).tolist()
            mask = reference.noise_mask(reference.composition(keys_clean, s), reference.composition(keys_noise, s))
            reference.corrupt(example, mask, sentinel_list, 2)

    reference_tokens = sum(plans[i].raw for i in choice)
    results.append(("ul2 (7 denoisers) 512", _rate(ul2_kernel, len(stream)), _rate(ul2_reference, reference_tokens, 1)))
    results += masking_rows(reference)
    results += generative_rows(reference)
    results += mtp_rows(reference)
    results += contrastive_rows(reference)
    return results


def prefix_rows(reference, rng, few: int) -> list[tuple[str, float, float]]:
    """prefix-lm splits against the slicing reference (C-bound list copies) and a per-token one."""
    import numpy as np

    from objcli.kernels.prefix import decoder_labels, draw_split_points, split_encoder_decoder

    rows, length = 1000, 2048
    tokens = rng.integers(0, 32000, size=(rows, length)).astype(np.int32)

    def prefix_kernel():
        split = draw_split_points(np.random.default_rng(3), rows, length)
        decoder_labels(tokens, split)
        split_encoder_decoder(tokens, split, 1)

    splits = draw_split_points(np.random.default_rng(3), few, length).tolist()
    token_lists = tokens[:few].tolist()

    def prefix_reference():
        for row in range(few):
            reference.prefix_split(token_lists[row], splits[row], 1)

    def prefix_per_token():
        for row in range(few):
            reference.prefix_split_per_token(token_lists[row], splits[row], 1)

    kernel_rate = _rate(prefix_kernel, rows * length)
    return [
        ("prefix-lm 2048 (both layouts)", kernel_rate, _rate(prefix_reference, few * length, 1)),
        ("  vs a per-token reference loop", kernel_rate, _rate(prefix_per_token, few * length, 1)),
    ]


def contrastive_rows(reference) -> list[tuple[str, float, float]]:
    """Contrastive crop + augmentations (delete, swap, crop) of two views per unit, against the
    per-view reference loops, 256-token units."""
    import numpy as np

    from objcli.kernels.contrastive import augment, crop, gather_views
    from objcli.kernels.ragged import lengths_to_offsets

    units, length, few = 20_000, 256, 200
    rng = np.random.default_rng(6)
    tokens = rng.integers(0, 32000, size=units * length).astype(np.int32)
    starts = np.arange(units, dtype=np.int64) * length
    lengths = np.full(units, length)
    keys = rng.random((8, units))
    token_keys = rng.random((2, units * length))

    def kernel():
        for view in range(2):
            s, n = crop(starts, lengths, keys[2 * view], keys[2 * view + 1], 0.1, 0.5)
            zeros = np.zeros_like(s)
            values, offsets = gather_views(tokens, np.stack([s, n, zeros, zeros], axis=1))
            augment(
                values,
                offsets,
                {"crop_start": keys[4 + view], "delete": token_keys[0], "swap": token_keys[1]},
                0.1,
                0.1,
                0.9,
            )

    token_list = tokens[: few * length].tolist()
    key_list, delete_keys, swap_keys = keys.tolist(), token_keys[0].tolist(), token_keys[1].tolist()

    def slow():
        for unit in range(few):
            for view in range(2):
                s, n = reference.contriever_crop(
                    length, key_list[2 * view][unit], key_list[2 * view + 1][unit], 0.1, 0.5
                )
                piece = token_list[unit * length + s : unit * length + s + n]
                reference.augment_view(piece, key_list[4 + view][unit], delete_keys, swap_keys, 0.1, 0.1, 0.9)

    del lengths_to_offsets
    return [("contrastive crop + augment 256", _rate(kernel, units * length), _rate(slow, few * length, 1))]


def mtp_rows(reference) -> list[tuple[str, float, float]]:
    """Multi-token prediction's heads_with_target on packed rows (K = 4) against the per-position loop."""
    import numpy as np

    from objcli.kernels.mtp import heads_with_target

    rows, length, few = 1000, 2048, 10
    rng = np.random.default_rng(5)
    lengths = rng.integers(50, 1500, size=rows * 8)
    segment_rows = []
    for row in range(rows):  # documents cut at the row end, as concat packs them
        sizes = np.minimum(np.cumsum(lengths[row * 8 : (row + 1) * 8]), length)
        segment_rows.append(np.searchsorted(sizes, np.arange(length), side="right") + 1)
    segments = np.stack(segment_rows).astype(np.int32)
    offsets = np.arange(rows + 1, dtype=np.int64) * length
    as_lists = segments[:few].tolist()

    def kernel():
        heads_with_target(segments.reshape(-1), offsets, 4)

    def slow():
        reference.heads_with_target(as_lists, 4)

    return [("mtp heads_with_target K=4 2048", _rate(kernel, rows * length), _rate(slow, few * length, 1))]


def generative_rows(reference) -> list[tuple[str, float, float]]:
    """fim assembly and bart noising: kernel vs a per-document reference loop on the same data."""
    import numpy as np

    from objcli.kernels.fim import NONE, PSM, SPM, assemble, draw_cuts, first_units
    from objcli.kernels.ragged import gather_ranges, lengths_to_offsets

    rng = np.random.default_rng(6)
    documents, few = 20_000, 2_000
    lengths = rng.integers(50, 400, documents)
    offsets = lengths_to_offsets(lengths)
    tokens = rng.integers(4, 8000, int(offsets[-1])).astype(np.int32)
    modes = rng.choice([NONE, PSM, SPM], size=documents)
    cut_a, cut_b = draw_cuts(rng, lengths)  # token-level cuts stand in for the pieces' tokenization
    transformed = np.flatnonzero(modes != NONE)
    piece_starts = np.stack(
        [offsets[transformed], offsets[transformed] + cut_a[transformed], offsets[transformed] + cut_b[transformed]],
        axis=1,
    ).ravel()
    piece_ends = np.stack(
        [
            offsets[transformed] + cut_a[transformed],
            offsets[transformed] + cut_b[transformed],
            offsets[transformed + 1],
        ],
        axis=1,
    ).ravel()
    piece_tokens = gather_ranges(tokens, piece_starts, piece_ends - piece_starts)
    piece_offsets = lengths_to_offsets(piece_ends - piece_starts)
    sentinels = np.array([8001, 8002, 8003], dtype=np.int32)

    units = np.concatenate([tokens, piece_tokens])  # every document whole, then the pieces
    unit_offsets = np.concatenate([offsets[:-1], piece_offsets + len(tokens)])
    first = first_units(modes, every_document=True)

    def fim_kernel():
        assemble(units, unit_offsets, modes, first, sentinels, "starcoder")

    token_lists = [tokens[offsets[d] : offsets[d + 1]].tolist() for d in range(few)]

    def fim_slow():
        out = []
        for d in range(few):
            doc = token_lists[d]
            if modes[d] == NONE:
                out.append(doc)
                continue
            a, b = cut_a[d], cut_b[d]
            out.append(reference.fim_document(doc[:a], doc[a:b], doc[b:], int(modes[d]), "starcoder", 8001, 8002, 8003))

    def fim_per_token():
        for d in range(few):
            if modes[d] != NONE:
                reference.fim_document_per_token(
                    token_lists[d], int(cut_a[d]), int(cut_b[d]), int(modes[d]), "starcoder", 8001, 8002, 8003
                )

    results = [
        ("fim assembly (document level)", _rate(fim_kernel, len(tokens)), _rate(fim_slow, int(offsets[few]), 1)),
        ("  vs a per-token reference loop", _rate(fim_kernel, len(tokens)), _rate(fim_per_token, int(offsets[few]), 1)),
    ]

    return results + bart_rows(reference, rng)


def bart_rows(reference, rng) -> list[tuple[str, float, float]]:
    """bart noising: kernel vs a per-example reference loop on the same data."""
    import random

    import numpy as np

    from objcli.kernels.bart import mask_spans, permute_sentences, place_spans, poisson_spans, rotate
    from objcli.kernels.ragged import gather_ranges, lengths_to_offsets

    examples = 5_000
    sentence_lengths = rng.integers(5, 30, examples * 8)
    sentence_offsets = lengths_to_offsets(sentence_lengths)
    example_sentences = np.arange(0, examples * 8 + 1, 8)
    text = rng.integers(4, 8000, int(sentence_offsets[-1])).astype(np.int32)
    word_start = rng.random(len(text)) < 0.7
    example_offsets = sentence_offsets[example_sentences]
    word_start[example_offsets[:-1]] = True

    def bart_kernel():
        starts, spans = permute_sentences(sentence_offsets, example_sentences, 1.0, np.random.default_rng(1))
        permuted = gather_ranges(text, starts, spans)
        ws = word_start  # word starts move with their sentences; the cost is what is measured here
        words = np.add.reduceat(ws.astype(np.int64), example_offsets[:-1])
        span_lengths, span_example = poisson_spans(np.ceil(words * 0.3).astype(np.int64), 3.5, np.random.default_rng(2))
        start_word = place_spans(span_lengths, span_example, words, np.random.default_rng(3))
        noised, noised_offsets = mask_spans(
            permuted,
            example_offsets,
            ws,
            span_lengths,
            span_example,
            start_word,
            np.full(len(span_lengths), 8000, dtype=np.int32),
            1,
        )
        rotate(noised, noised_offsets, 0.0, np.random.default_rng(4))

    slow_examples = 300
    lists = [
        [text[sentence_offsets[s] : sentence_offsets[s + 1]].tolist() for s in range(e * 8, e * 8 + 8)]
        for e in range(slow_examples)
    ]
    word_lists = [word_start[example_offsets[e] : example_offsets[e + 1]].tolist() for e in range(slow_examples)]

    def bart_slow():
        generator = random.Random(0)
        poisson = np.random.default_rng(0)
        for e in range(slow_examples):
            sentences = lists[e][:]
            generator.shuffle(sentences)
            flat = [t for s in sentences for t in s]
            words = sum(word_lists[e])
            budget, spans, used = math.ceil(words * 0.3), [], 0
            while used < budget:
                length = min(budget - used, int(poisson.poisson(3.5)))
                spans.append(length)
                used += length
            free = words - budget
            gaps = sorted(generator.sample(range(free + len(spans)), len(spans)))
            placed, masked_before = [], 0
            for rank, (slot, length) in enumerate(zip(gaps, spans)):
                placed.append((slot - rank + masked_before, length))
                masked_before += length
            reference.bart_mask_example(flat, word_lists[e], placed, 1, 8000)

    return [
        (
            "bart (permute + spans + mask)",
            _rate(bart_kernel, len(text)),
            _rate(bart_slow, int(example_offsets[slow_examples]), 1),
        )
    ]


def hugging_face_collator():
    """Hugging Face's DataCollatorForLanguageModeling on NumPy, with a word-level tokenizer made here."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import DataCollatorForLanguageModeling, PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(8000)} | {"[MASK]": 8000}
    vocab["[PAD]"] = 3
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(WordLevel(vocab, unk_token="t0")), mask_token="[MASK]", pad_token="[PAD]"
    )
    return DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, return_tensors="np", seed=0)


def masking_rows(reference) -> list[tuple[str, float, float]]:
    """mlm, mlm --whole-word and nsp: kernel vs reference loop; mlm also vs Hugging Face."""
    import random

    import numpy as np

    from objcli.kernels.masking import replace_selected, select_tokens, select_units, unit_ids
    from objcli.kernels.pairs import assemble_rows, bert_pairs
    from objcli.kernels.rng import derive_rng

    rng = np.random.default_rng(5)
    rows, length, few = 2000, 512, 40
    ids = rng.integers(4, 8000, size=(rows, length)).astype(np.int32)
    special = np.zeros(8001, dtype=bool)
    special[:4] = True
    word_start = rng.random(8001) < 0.6
    results = []
    for whole_word in (False, True):

        def kernel():
            candidates = ~special[ids]
            keys = rng.random(ids.shape, dtype=np.float32)
            if whole_word:
                selected = select_units(
                    unit_ids(candidates, word_start[ids]), keys, 0.15, False, np.full(rows, length), None
                )
            else:
                selected = select_tokens(candidates, keys, 0.15)
            count = int(selected.sum())
            replace_selected(
                ids, selected, rng.random(count, dtype=np.float32), rng.integers(4, 8000, count), 8000, 0.8, 0.1
            )

        keys = [rng.random(length).tolist() for _ in range(3)]
        lists = ids[:few].tolist()
        starts = word_start[ids[:few]].tolist() if whole_word else [[True] * length] * few

        def slow():
            for r in range(few):
                reference.mlm_row(
                    lists[r], [True] * length, starts[r], keys[0], keys[1], keys[2], 0.15, False, None, 8000, 0.8, 0.1
                )

        name = "mlm --whole-word 512" if whole_word else "mlm 512"
        results.append((name, _rate(kernel, rows * length), _rate(slow, few * length, 1)))
        if not whole_word:
            try:
                collator = hugging_face_collator()
            except ImportError:
                print("(transformers is not installed: no Hugging Face comparison)")
            else:
                examples = [{"input_ids": row} for row in ids]
                hf_rate = _rate(lambda: collator(examples), rows * length, 1)
                results.append(
                    ("  Hugging Face DataCollatorForLanguageModeling", hf_rate, _rate(slow, few * length, 1))
                )
                results.append(("  objcli mlm kernel / Hugging Face collator", results[-2][1], hf_rate))

    documents = 2000
    sentences_per_document = rng.integers(2, 30, documents)
    lengths = rng.integers(5, 40, sentences_per_document.sum())
    cumulative = np.concatenate([[0], np.cumsum(lengths)])
    document_sentences = np.concatenate([[0], np.cumsum(sentences_per_document)])
    tokens = rng.integers(4, 8000, int(cumulative[-1])).astype(np.int32)

    def nsp_kernel():
        streams = {s: derive_rng(0, 0, 0, s) for s in ("target", "split", "coin", "document", "truncate")}
        pairs = bert_pairs(
            cumulative, document_sentences, streams, 128, 0.1, False, __import__("collections").Counter()
        )
        assemble_rows(tokens, pairs, 128, 1, 2, 3)

    few_documents = [
        [
            tokens[cumulative[s] : cumulative[s + 1]].tolist()
            for s in range(document_sentences[d], document_sentences[d + 1])
        ]
        for d in range(200)
    ]

    def nsp_slow():
        generator = random.Random(0)
        for d in range(len(few_documents)):
            reference.nsp_instances(few_documents, d, 128, 0.1, generator)

    slow_tokens = sum(len(s) for d in few_documents for s in d)
    results.append(("nsp 128 (pairs + rows)", _rate(nsp_kernel, int(cumulative[-1])), _rate(nsp_slow, slow_tokens, 1)))
    return results
