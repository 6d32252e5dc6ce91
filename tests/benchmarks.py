"""`make bench`: throughput and memory, measured side by side in one run.

Builds a >= 50 MB corpus by replicating sample_data (prose and code JSONL) into bench_data/, then
prints ratios against the ceiling measured on the same machine in the same run:

- raw SentencePiece batched encode of the same texts, same cores (the tokenizer ceiling);
- `objcli transform --objective clm` end to end (read, tokenize, pack, write Arrow), as a
  subprocess, with the peak RSS of its whole process tree.

These are benchmarks, not tests: nothing here asserts a wall-clock figure.
"""

from __future__ import annotations

import base64
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench_data"
OUT = ROOT / "bench_out"
TOKENIZER = ROOT / "sample_data" / "tokenizer.model"
TARGET_BYTES = 50 * 10**6
FILES = 8
CORES = os.cpu_count() or 1


def build_corpus() -> list[Path]:
    """FILES JSONL files that together hold >= TARGET_BYTES of the sample corpus, repeated."""
    source = (ROOT / "sample_data" / "prose.jsonl").read_bytes() + (ROOT / "sample_data" / "code.jsonl").read_bytes()
    copies = -(-TARGET_BYTES // (len(source) * FILES))
    paths = [DATA / f"corpus-{i:02d}.jsonl" for i in range(FILES)]
    if all(p.exists() and p.stat().st_size == len(source) * copies for p in paths):
        return paths
    DATA.mkdir(exist_ok=True)
    for path in paths:
        path.write_bytes(source * copies)
    return paths


def text_batches(paths: list[Path], batch_bytes: int) -> list[list[str]]:
    """The corpus's texts in batches of about ``batch_bytes``, as objcli batches them."""
    import msgspec

    batches, batch, size = [], [], 0
    for path in paths:
        for record in msgspec.json.Decoder().decode_lines(path.read_bytes()):
            batch.append(record["text"])
            size += len(record["text"])
            if size >= batch_bytes:
                batches.append(batch)
                batch, size = [], 0
    batches.append(batch)
    return batches


def raw_sentencepiece(paths: list[Path], threads: int, batch_bytes: int = 1 << 20) -> dict:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(TOKENIZER))
    batches = text_batches(paths, batch_bytes)
    text_bytes = sum(len(t) for b in batches for t in b)
    best = float("inf")
    for _ in range(2):  # best of two: the first pass also warms caches
        started = time.perf_counter()
        tokens = sum(sum(map(len, sp.encode(b, return_type="numpy", num_threads=threads))) for b in batches)
        best = min(best, time.perf_counter() - started)
    return {"seconds": best, "text_bytes": text_bytes, "tokens": tokens}


def hf_tokenizer_file() -> Path:
    """A byte-level BPE tokenizer.json (8,000 tokens) trained on sample_data, as Llama 3 / Qwen ship."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    path = DATA / "hf" / "tokenizer.json"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=8000, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    texts = [json.loads(line)["text"] for name in ("prose.jsonl", "code.jsonl")
             for line in (ROOT / "sample_data" / name).read_text().splitlines()]
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.save(str(path))
    return path


def tiktoken_rank_file() -> Path:
    """The bench tokenizer.json's byte-level BPE as a tiktoken rank file (rank = id: the trainer numbers
    merged tokens in merge order) with a side file for GPT-2's split pattern and <|endoftext|>."""
    path = DATA / "tiktoken" / "bench.tiktoken"
    if path.exists():
        return path
    byte_of = {ch: b for b, ch in enumerate(_bytes_to_unicode())}
    vocab = json.loads(hf_tokenizer_file().read_text())["model"]["vocab"]
    lines = [f"{base64.b64encode(bytes(byte_of[c] for c in token)).decode()} {rank}"
             for rank, token in enumerate(sorted(vocab, key=vocab.get)) if token != "<|endoftext|>"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    pattern = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
    side = {"pattern": pattern, "special_tokens": {"<|endoftext|>": len(lines)}, "eos": "<|endoftext|>"}
    path.with_name(path.name + ".json").write_text(json.dumps(side))
    return path


def _bytes_to_unicode() -> list[str]:
    """GPT-2's byte-to-character table (the characters byte-level BPE vocabularies are written in)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = [], 0
    for b in range(256):
        if b in printable:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


def raw_tiktoken(paths: list[Path], rank_path: Path, batch_bytes: int = 1 << 20) -> dict:
    """The ceiling for a rank file: tiktoken's own batched encode with CORES threads, same batches."""
    from objcli.tokenizers import open_tokenizer

    encoding = open_tokenizer(rank_path).encoding
    batches = text_batches(paths, batch_bytes)
    best = float("inf")
    for _ in range(2):
        started = time.perf_counter()
        tokens = sum(len(ids) for b in batches for ids in encoding.encode_ordinary_batch(b, num_threads=CORES))
        best = min(best, time.perf_counter() - started)
    return {"seconds": best, "text_bytes": sum(len(t) for b in batches for t in b), "tokens": tokens}


def raw_hf(paths: list[Path], tokenizer_path: Path, batch_bytes: int = 1 << 20) -> dict:
    """The ceiling for tokenizer.json: the library's batched encode with its own threads, in a fresh
    process so that its thread pool is sized to the cores."""
    code = f"""
import json, time, msgspec
from tokenizers import Tokenizer
tok = Tokenizer.from_file({str(tokenizer_path)!r})
batches, batch, size = [], [], 0
for path in {[str(p) for p in paths]!r}:
    for record in msgspec.json.Decoder().decode_lines(open(path, 'rb').read()):
        batch.append(record['text']); size += len(record['text'])
        if size >= {batch_bytes}: batches.append(batch); batch, size = [], 0
batches.append(batch)
best = 1e9
for _ in range(2):
    started = time.perf_counter()
    tokens = sum(len(e.ids) for b in batches for e in tok.encode_batch_fast(b, add_special_tokens=False))
    best = min(best, time.perf_counter() - started)
print(json.dumps({{"seconds": best, "text_bytes": sum(len(t) for b in batches for t in b), "tokens": tokens}}))
"""
    env = {**os.environ, "RAYON_NUM_THREADS": str(CORES)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout)


def _run_tree(command: list[str], env=None) -> tuple[float, int, str]:
    """Wall time, peak RSS of the whole process tree, stderr (CPU time of the tree: ``_last_cpu``)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    process = psutil.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
    peak = 0
    while process.poll() is None:
        try:
            tree = [process] + process.children(recursive=True)
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.25)  # sparse polling: the machine has few cores to spare
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # every reaped descendant, pool workers included
    _last_cpu[0] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    stderr = process.stderr.read().decode()
    if process.returncode:
        raise SystemExit(f"{command[:3]} failed:\n{stderr}")
    return seconds, peak, stderr


_last_cpu = [0.0]


def datatrove_tokenize(paths: list[Path], tokenizer_path: Path, text_bytes: int) -> dict:
    """Hugging Face datatrove's DocumentTokenizer on the same files, tokenizer and cores."""
    out = ROOT / "bench_out_datatrove"
    shutil.rmtree(out, ignore_errors=True)
    code = f"""
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.tokens import DocumentTokenizer
LocalPipelineExecutor(
    pipeline=[JsonlReader({str(DATA)!r}, glob_pattern="*.jsonl"),
              DocumentTokenizer({str(out / "tokens")!r}, tokenizer_name_or_path={str(tokenizer_path)!r},
                                eos_token="<|endoftext|>", shuffle_documents=False)],
    tasks={len(paths)}, workers={CORES}, logging_dir={str(out / "logs")!r},
).run()
"""
    env = {**os.environ, "RAYON_NUM_THREADS": "1"}
    seconds, peak, _ = _run_tree([sys.executable, "-c", code], env)
    tokens = sum(p.stat().st_size for p in (out / "tokens").rglob("*.ds")) // 2  # uint16 tokens
    shutil.rmtree(out, ignore_errors=True)
    return {"seconds": seconds, "text_bytes": text_bytes, "tokens": tokens, "peak_rss": peak}


def objcli_transform(paths: list, *extra: str, output: str | None = None) -> dict:
    """One CLI run into OUT (or ``output``, a URL: then the manifest is not read back)."""
    shutil.rmtree(OUT, ignore_errors=True)
    tokenizer = [] if "-t" in extra else ["-t", str(TOKENIZER)]
    command = [sys.executable, "-m", "objcli", "transform", *map(str, paths), *tokenizer,
               "--seq-len", "2048", "-o", str(output or OUT), "--quiet", *extra]
    seconds, peak, _ = _run_tree(command)
    if output:
        return {"seconds": seconds, "peak_rss": peak, "cpu": _last_cpu[0]}
    totals = json.loads((OUT / "manifest.json").read_text())["totals"]
    return {"seconds": seconds, "text_bytes": totals["text_bytes"], "tokens": totals["tokens"], "peak_rss": peak,
            "cpu": _last_cpu[0]}


def objcli_in_process(paths: list[Path]) -> dict:
    """The library call on one worker: the pipeline's cost beyond tokenization, without start-up."""
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import run_transform

    seconds = float("inf")
    for _ in range(2):  # best of two, like the ceiling it is compared with
        started = time.perf_counter()
        summary = run_transform(paths, TOKENIZER, OUT, workers=1, seq_len=2048)
        seconds = min(seconds, time.perf_counter() - started)
    return {"seconds": seconds, "text_bytes": summary.totals["text_bytes"], "tokens": summary.totals["tokens"]}


def memory_table(paths: list[Path]) -> None:
    """Peak RSS of the whole process tree at defaults: the corpus, 10x the corpus in one file, and
    one 200 MB document. The goal: 10x within 10 % of 1x, all under 1 GiB."""
    big = DATA / "memory" / "corpus-x10.jsonl"  # not beside the corpus: peers read that folder
    one = b"".join(p.read_bytes() for p in paths)
    if not big.exists() or big.stat().st_size != 10 * len(one):
        big.parent.mkdir(exist_ok=True)
        with open(big, "wb") as f:
            for _ in range(10):
                f.write(one)
    document = DATA / "memory" / "one-200MB-document.jsonl"
    if not document.exists():
        text = (ROOT / "sample_data" / "reference.txt").read_text(encoding="utf-8")
        document.write_text(json.dumps({"text": text * (200 * 10**6 // len(text) + 1)}) + "\n")
    print(f"\nPeak RSS at defaults ({CORES} workers, clm, --seq-len 2048; whole process tree):")
    print(f"{'':44} {'MB in':>7} {'seconds':>8} {'peak RSS':>9} {'vs 1x':>6}")
    base = None
    for name, inputs, extra in (("1x corpus (8 files)", paths, ()), ("10x corpus (one file)", [big], ()),
                                ("one 200 MB document", [document], ()),
                                ("1x corpus, --shuffle-rows", paths, ("--shuffle-rows",)),
                                ("10x corpus, --shuffle-rows", [big], ("--shuffle-rows",))):
        run = objcli_transform(inputs, *extra)
        base = base or run["peak_rss"]
        megabytes = sum(p.stat().st_size for p in inputs) / 1e6
        print(f"{name:44} {megabytes:7.0f} {run['seconds']:8.1f} {run['peak_rss'] / 2**20:6.0f} MiB "
              f"{run['peak_rss'] / base:5.2f}x")


def shuffle_table(paths: list[Path], repeats: int = 3) -> None:
    """Issue 14: --shuffle-rows against the same run unshuffled, interleaved; goal <= 1.3x."""
    runs: dict[str, list[dict]] = {"in order": [], "--shuffle-rows": []}
    for _ in range(repeats):
        runs["in order"].append(objcli_transform(paths))
        runs["--shuffle-rows"].append(objcli_transform(paths, "--shuffle-rows"))
    megabytes = runs["in order"][0]["text_bytes"] / 1e6
    print(f"\n--shuffle-rows, clm --seq-len 2048, {CORES} workers ({repeats} interleaved runs each):")
    print(f"{'':16} {'min s':>7} {'median s':>9} {'CPU s/MB':>9} {'peak RSS':>9}")
    for name, group in runs.items():
        walls = [r["seconds"] for r in group]
        cpu = statistics.median(r["cpu"] for r in group) / megabytes
        print(f"{name:16} {min(walls):7.2f} {statistics.median(walls):9.2f} {cpu:9.4f} "
              f"{max(r['peak_rss'] for r in group) / 2**20:6.0f} MiB")
    ratio = [statistics.median(r["seconds"] for r in runs[n]) for n in runs]
    cpu = [statistics.median(r["cpu"] for r in runs[n]) for n in runs]
    print(f"cost of --shuffle-rows: {ratio[1] / ratio[0]:.2f}x the wall (median), {cpu[1] / cpu[0]:.2f}x the CPU")


def print_table(title: str, rows: list[tuple[str, dict]]) -> None:
    ceiling = rows[0][1]["text_bytes"] / rows[0][1]["seconds"]
    print(f"\n{title}")
    print(f"{'':48} {'seconds':>8} {'MB/s':>7} {'Mtok/s':>7} {'peak RSS':>9} {'ratio':>7}")
    for name, r in rows:
        rate = r["text_bytes"] / r["seconds"]
        rss = f"{r['peak_rss'] / 2**20:.0f} MiB" if "peak_rss" in r else "-"
        print(f"{name:48} {r['seconds']:8.2f} {rate / 1e6:7.2f} {r['tokens'] / r['seconds'] / 1e6:7.2f} {rss:>9} {rate / ceiling:6.2f}x")


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

    sys.path.insert(0, str(ROOT / "tests"))
    import reference

    from objcli.config import TransformConfig
    from objcli.kernels.prefix import decoder_labels, draw_split_points, split_encoder_decoder
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

    results.append(("span-corruption 568 -> 512/114", _rate(t5_kernel, rows * length), _rate(t5_reference, few * length, 1)))

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

    results.append(("prefix-lm 2048 (both layouts)", _rate(prefix_kernel, rows * length), _rate(prefix_reference, few * length, 1)))

    tokenizer = open_tokenizer(TOKENIZER)
    config = TransformConfig(inputs=("-",), tokenizer=str(TOKENIZER), objective="ul2",
                             objective_options=Ul2Options(), output="unused", seq_len=512)
    objective = Ul2(config, tokenizer)
    stream = rng.integers(0, 8000, size=2_000_000).astype(np.int32)

    def ul2_kernel():
        transform = objective.partition_transform(0)
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
            augment(values, offsets, {"crop_start": keys[4 + view], "delete": token_keys[0], "swap": token_keys[1]},
                    0.1, 0.1, 0.9)

    token_list = tokens[: few * length].tolist()
    key_list, delete_keys, swap_keys = keys.tolist(), token_keys[0].tolist(), token_keys[1].tolist()

    def slow():
        for unit in range(few):
            for view in range(2):
                s, n = reference.contriever_crop(length, key_list[2 * view][unit], key_list[2 * view + 1][unit], 0.1, 0.5)
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
        sizes = np.minimum(np.cumsum(lengths[row * 8:(row + 1) * 8]), length)
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
    import random

    import numpy as np

    from objcli.kernels.bart import mask_spans, permute_sentences, place_spans, poisson_spans, rotate
    from objcli.kernels.fim import NONE, PSM, SPM, assemble, draw_cuts
    from objcli.kernels.ragged import gather_ranges, lengths_to_offsets

    rng = np.random.default_rng(6)
    documents, few = 20_000, 2_000
    lengths = rng.integers(50, 400, documents)
    offsets = lengths_to_offsets(lengths)
    tokens = rng.integers(4, 8000, int(offsets[-1])).astype(np.int32)
    modes = rng.choice([NONE, PSM, SPM], size=documents)
    cut_a, cut_b = draw_cuts(rng, lengths)  # token-level cuts stand in for the pieces' tokenization
    transformed = np.flatnonzero(modes != NONE)
    piece_starts = np.stack([offsets[transformed], offsets[transformed] + cut_a[transformed],
                             offsets[transformed] + cut_b[transformed]], axis=1).ravel()
    piece_ends = np.stack([offsets[transformed] + cut_a[transformed], offsets[transformed] + cut_b[transformed],
                           offsets[transformed + 1]], axis=1).ravel()
    piece_tokens = gather_ranges(tokens, piece_starts, piece_ends - piece_starts)
    piece_offsets = lengths_to_offsets(piece_ends - piece_starts)
    sentinels = np.array([8001, 8002, 8003], dtype=np.int32)

    def fim_kernel():
        assemble(tokens, offsets, modes, piece_tokens, piece_offsets, sentinels, "starcoder")

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

    results = [("fim assembly (document level)", _rate(fim_kernel, len(tokens)), _rate(fim_slow, int(offsets[few]), 1))]

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
        noised, noised_offsets = mask_spans(permuted, example_offsets, ws, span_lengths, span_example, start_word,
                                            np.full(len(span_lengths), 8000, dtype=np.int32), 1)
        rotate(noised, noised_offsets, 0.0, np.random.default_rng(4))

    slow_examples = 300
    lists = [[text[sentence_offsets[s] : sentence_offsets[s + 1]].tolist() for s in range(e * 8, e * 8 + 8)] for e in range(slow_examples)]
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

    results.append(("bart (permute + spans + mask)", _rate(bart_kernel, len(text)), _rate(bart_slow, int(example_offsets[slow_examples]), 1)))
    return results


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
    from objcli.kernels.pairs import assemble_rows
    from objcli.objectives.pairs import bert_pairs
    from objcli.rng import derive_rng

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
                selected = select_units(unit_ids(candidates, word_start[ids]), keys, 0.15, False, np.full(rows, length), None)
            else:
                selected = select_tokens(candidates, keys, 0.15)
            count = int(selected.sum())
            replace_selected(ids, selected, rng.random(count, dtype=np.float32), rng.integers(4, 8000, count), 8000, 0.8, 0.1)

        keys = [rng.random(length).tolist() for _ in range(3)]
        lists = ids[:few].tolist()
        starts = word_start[ids[:few]].tolist() if whole_word else [[True] * length] * few

        def slow():
            for r in range(few):
                reference.mlm_row(lists[r], [True] * length, starts[r], keys[0], keys[1], keys[2], 0.15, False,
                                  None, 8000, 0.8, 0.1)

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
                results.append(("  Hugging Face DataCollatorForLanguageModeling", hf_rate, _rate(slow, few * length, 1)))
                results.append(("  objcli mlm kernel / Hugging Face collator", results[-2][1], hf_rate))

    documents = 2000
    sentences_per_document = rng.integers(2, 30, documents)
    lengths = rng.integers(5, 40, sentences_per_document.sum())
    cumulative = np.concatenate([[0], np.cumsum(lengths)])
    document_sentences = np.concatenate([[0], np.cumsum(sentences_per_document)])
    tokens = rng.integers(4, 8000, int(cumulative[-1])).astype(np.int32)

    def nsp_kernel():
        streams = {s: derive_rng(0, 0, 0, s) for s in ("target", "split", "coin", "document", "truncate")}
        pairs = bert_pairs(cumulative, document_sentences, streams, 128, 0.1, False, __import__("collections").Counter())
        assemble_rows(tokens, pairs, 128, 1, 2, 3)

    few_documents = [
        [tokens[cumulative[s] : cumulative[s + 1]].tolist() for s in range(document_sentences[d], document_sentences[d + 1])]
        for d in range(200)
    ]

    def nsp_slow():
        generator = random.Random(0)
        for d in range(len(few_documents)):
            reference.nsp_instances(few_documents, d, 128, 0.1, generator)

    slow_tokens = sum(len(s) for d in few_documents for s in d)
    results.append(("nsp 128 (pairs + rows)", _rate(nsp_kernel, int(cumulative[-1])), _rate(nsp_slow, slow_tokens, 1)))
    return results


def peers_table(paths: list[Path]) -> None:
    """Issue 8: both tokenizer kinds, their ceilings, datatrove, and the worker scaling."""
    try:
        tokenizer_json = hf_tokenizer_file()
    except ImportError:
        print("\n(tokenizers is not installed: no tokenizer.json rows)")
        return
    sentencepiece = raw_sentencepiece(paths, CORES)
    hf = raw_hf(paths, tokenizer_json)
    rows = [
        ("SentencePiece batched encode (ceiling)", sentencepiece, sentencepiece),
        ("objcli clm, SentencePiece, --workers 2", objcli_transform(paths, "--workers", str(CORES)), sentencepiece),
        ("tokenizers encode_batch_fast (ceiling)", hf, hf),
    ]
    one = objcli_transform(paths, "-t", str(tokenizer_json), "--workers", "1")
    two = objcli_transform(paths, "-t", str(tokenizer_json), "--workers", str(CORES))
    rows += [("objcli clm, tokenizer.json, --workers 1", one, hf), ("objcli clm, tokenizer.json, --workers 2", two, hf)]
    try:
        rank_file = tiktoken_rank_file()
        ceiling = raw_tiktoken(paths, rank_file)
        through_objcli = objcli_transform(paths, "-t", str(rank_file), "--workers", str(CORES))
        rows += [("tiktoken encode_ordinary_batch (ceiling)", ceiling, ceiling),
                 ("objcli clm, tiktoken, --workers 2", through_objcli, ceiling)]
    except ImportError:
        print("(tiktoken is not installed: no tiktoken rows)")
    try:
        rows.append(("datatrove DocumentTokenizer, 2 workers", datatrove_tokenize(paths, tokenizer_json, hf["text_bytes"]), hf))
    except ImportError:
        print("(datatrove is not installed)")
    documents = sum(1 for p in paths for _ in open(p, "rb"))
    print(f"\nEnd to end against the peers ({documents:,} documents; ratio = against the same library's ceiling):")
    print(f"{'':42} {'docs/s':>9} {'MB/s':>7} {'Mtok/s':>7} {'peak RSS':>9} {'ratio':>7}")
    for name, r, ceiling in rows:
        rate = r["text_bytes"] / r["seconds"]
        rss = f"{r['peak_rss'] / 2**20:.0f} MiB" if "peak_rss" in r else "-"
        ratio = rate / (ceiling["text_bytes"] / ceiling["seconds"])
        print(f"{name:42} {documents / r['seconds']:9,.0f} {rate / 1e6:7.2f} {r['tokens'] / r['seconds'] / 1e6:7.2f} {rss:>9} {ratio:6.2f}x")
    print(f"objcli tokenizer.json, 2 workers vs 1: {one['seconds'] / two['seconds']:.2f}x; "
          f"vs datatrove: {rows[-1][1]['seconds'] / two['seconds']:.2f}x faster" if len(rows) > 5 else "")
    print("dolma: not installed here (pip's resolver backtracks through boto3 releases for over 6 minutes).")


def main() -> None:
    paths = build_corpus()
    size = sum(p.stat().st_size for p in paths)
    print(f"corpus: {len(paths)} JSONL files, {size / 1e6:.1f} MB, tokenizer {TOKENIZER.name}, {CORES} cores")
    print_table(
        "Pipeline cost beyond tokenization (one core, in process, no start-up):",
        [("SentencePiece batched encode, 1 thread", raw_sentencepiece(paths, 1)),
         ("objcli transform clm, library call, 1 worker", objcli_in_process(paths))],
    )
    rows = [(f"SentencePiece batched encode, {CORES} threads", raw_sentencepiece(paths, CORES))]
    for workers in (1, CORES):
        rows.append((f"objcli transform clm --workers {workers} (CLI)", objcli_transform(paths, "--workers", str(workers))))
    for objective in ("span-corruption", "prefix-lm", "ul2", "mlm", "nsp", "fim", "bart"):
        rows.append((f"objcli transform {objective} --seq-len 512 (CLI)", objcli_transform(paths, "--objective", objective, "--seq-len", "512")))
    print_table(f"End to end on {CORES} cores (CLI process tree, start-up included):", rows)

    peers_table(paths)
    from bench_storage import storage_table

    storage_table(paths, objcli_transform)
    shuffle_table(paths)
    memory_table(paths)

    print("\nPacking at --seq-len 2048 (CLI, same corpus, same run):")
    print(f"{'':12} {'rows':>8} {'padding':>8} {'docs split':>11} {'split %':>8} {'seconds':>8} {'throughput':>11}")
    packing = {}
    for mode in ("concat", "best-fit"):
        run = objcli_transform(paths, "--packing", mode)
        t = json.loads((OUT / "manifest.json").read_text())["totals"]
        packing[mode] = run["seconds"]
        print(f"{mode:12} {t['rows']:>8,} {100 * t['padding_fraction']:>7.2f}% {t['documents_split']:>11,} "
              f"{100 * t['split_fraction']:>7.2f}% {run['seconds']:>8.2f} {packing['concat'] / run['seconds']:>10.2f}x")

    print("\nObjective kernels, one core, same data, same run (tokens/s):")
    print(f"{'':36} {'kernel':>10} {'reference loop':>15} {'ratio':>8}")
    for name, kernel, slow in kernel_rows():
        print(f"{name:36} {kernel / 1e6:8.1f} M {slow / 1e6:13.2f} M {kernel / slow:7.0f}x")


if __name__ == "__main__":
    main()
