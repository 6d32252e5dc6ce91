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
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the tests' helpers (paths, reference, …)
from paths import ROOT  # noqa: E402

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
    trainer = trainers.BpeTrainer(
        vocab_size=8000, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    texts = [
        json.loads(line)["text"]
        for name in ("prose.jsonl", "code.jsonl")
        for line in (ROOT / "sample_data" / name).read_text().splitlines()
    ]
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.save(str(path))
    return path


def tiktoken_rank_file() -> Path:
    """The bench tokenizer.json's byte-level BPE as a tiktoken rank file (rank = id: the trainer numbers
    merged tokens in merge order) with a side file for GPT-2's split pattern and <|endoftext|>."""
    path = DATA / "tiktoken" / "bench.tiktoken"
    if path.exists():
        return path
    from objcli.tokenizers.bpe_spec import byte_characters

    byte_of = {ch: b for b, ch in enumerate(byte_characters())}
    vocab = json.loads(hf_tokenizer_file().read_text())["model"]["vocab"]
    ordinary = [token for token in sorted(vocab, key=vocab.get) if token != "<|endoftext|>"]
    lines = [
        f"{base64.b64encode(bytes(byte_of[c] for c in token)).decode()} {rank}" for rank, token in enumerate(ordinary)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    pattern = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
    side = {"pattern": pattern, "special_tokens": {"<|endoftext|>": len(lines)}, "eos": "<|endoftext|>"}
    path.with_name(path.name + ".json").write_text(json.dumps(side))
    return path


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


def _run_tree(command: list[str], env=None, limit: float | None = None) -> tuple[float, int, str]:
    """Wall time, peak RSS of the whole process tree, stderr (CPU time of the tree, a fork server and
    its workers included: ``_last_cpu``). Past ``limit`` seconds the tree is killed and the wall
    returned is the limit, marked by ``_stopped``."""
    from bench_scaling import _reap_adopted, adopt_orphans

    adopt_orphans()
    children = {c.pid for c in psutil.Process().children()}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    process = psutil.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
    peak = 0
    _stopped[0] = False
    while process.poll() is None:
        if limit is not None and time.perf_counter() - started > limit:
            for child in [*process.children(recursive=True), process]:
                with contextlib.suppress(psutil.Error):
                    child.kill()
            process.wait()
            _stopped[0] = True
            break
        try:
            tree = [process] + process.children(recursive=True)
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
        except psutil.Error:
            pass
        with contextlib.suppress(psutil.TimeoutExpired):  # sparse polling (few cores to spare), but the
            process.wait(0.25)  # wall ends when the process does, not at the next 0.25 s tick
    seconds = time.perf_counter() - started
    _reap_adopted(children)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # every reaped descendant, pool workers included
    _last_cpu[0] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    stderr = process.stderr.read().decode()
    if _stopped[0]:
        return limit, peak, stderr
    if process.returncode:
        raise SystemExit(f"{command[:3]} failed:\n{stderr}")
    return seconds, peak, stderr


_last_cpu = [0.0]
_stopped = [False]  # the last _run_tree passed its limit and was killed


def datatrove_tokenize(
    paths: list[Path], tokenizer_path: Path, text_bytes: int, eos: str = "<|endoftext|>", token_bytes: int = 2
) -> dict:
    """Hugging Face datatrove's DocumentTokenizer on the same files, tokenizer and cores."""
    out = ROOT / "bench_out_datatrove"
    shutil.rmtree(out, ignore_errors=True)
    code = f"""
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.tokens import DocumentTokenizer
LocalPipelineExecutor(
    pipeline=[JsonlReader({str(paths[0].parent)!r}, glob_pattern={paths[0].name.split("-")[0] + "-*.jsonl"!r}),
              DocumentTokenizer({str(out / "tokens")!r}, tokenizer_name_or_path={str(tokenizer_path)!r},
                                eos_token={eos!r}, shuffle_documents=False)],
    tasks={len(paths)}, workers={CORES}, logging_dir={str(out / "logs")!r},
).run()
"""
    env = {**os.environ, "RAYON_NUM_THREADS": "1"}
    seconds, peak, _ = _run_tree([sys.executable, "-c", code], env)
    tokens = sum(p.stat().st_size for p in (out / "tokens").rglob("*.ds")) // token_bytes  # uint16, or uint32 past 64k
    shutil.rmtree(out, ignore_errors=True)
    return {"seconds": seconds, "text_bytes": text_bytes, "tokens": tokens, "peak_rss": peak}


def objcli_transform(paths: list, *extra: str, output: str | None = None) -> dict:
    """One CLI run into OUT (or ``output``, a URL: then the manifest is not read back)."""
    shutil.rmtree(OUT, ignore_errors=True)
    tokenizer = [] if "-t" in extra else ["-t", str(TOKENIZER)]
    command = [
        sys.executable,
        "-m",
        "objcli",
        "transform",
        *map(str, paths),
        *tokenizer,
        "--seq-len",
        "2048",
        "-o",
        str(output or OUT),
        "--quiet",
        *extra,
    ]
    seconds, peak, _ = _run_tree(command)
    if output:
        return {"seconds": seconds, "peak_rss": peak, "cpu": _last_cpu[0]}
    totals = json.loads((OUT / "manifest.json").read_text())["totals"]
    return {
        "seconds": seconds,
        "text_bytes": totals["text_bytes"],
        "tokens": totals["tokens"],
        "peak_rss": peak,
        "cpu": _last_cpu[0],
    }


def objcli_in_process(paths: list[Path]) -> dict:
    """The library call on one worker: the pipeline's cost beyond tokenization, without start-up."""
    sys.path.insert(0, str(ROOT / "tests"))
    from runs import run_transform

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
    for name, inputs, extra in (
        ("1x corpus (8 files)", paths, ()),
        ("10x corpus (one file)", [big], ()),
        ("one 200 MB document", [document], ()),
        ("1x corpus, --shuffle-rows", paths, ("--shuffle-rows",)),
        ("10x corpus, --shuffle-rows", [big], ("--shuffle-rows",)),
        # Issue 84, item 4: rows of 128 K and 1 M tokens (positions and segment ids at uint32).
        ("1x corpus, --seq-len 131072", paths, ("--seq-len", "131072")),
        ("1x corpus, --seq-len 1048576", paths, ("--seq-len", "1048576")),
        ("1x corpus, --seq-len 1048576 --packing best-fit", paths, ("--seq-len", "1048576", "--packing", "best-fit")),
    ):
        run = objcli_transform(inputs, *extra)
        base = base or run["peak_rss"]
        megabytes = sum(p.stat().st_size for p in inputs) / 1e6
        print(
            f"{name:44} {megabytes:7.0f} {run['seconds']:8.1f} {run['peak_rss'] / 2**20:6.0f} MiB "
            f"{run['peak_rss'] / base:5.2f}x"
        )


def print_runs(runs: dict[str, list[dict]], megabytes: float, width: int, prefix: str = "") -> None:
    """One line per group of interleaved runs: min and median wall, median CPU per MB, peak RSS."""
    for name, group in runs.items():
        walls = [r["seconds"] for r in group]
        cpu = statistics.median(r["cpu"] for r in group) / megabytes
        print(
            f"{prefix + name:{width}} {min(walls):7.2f} {statistics.median(walls):9.2f} {cpu:9.4f} "
            f"{max(r['peak_rss'] for r in group) / 2**20:6.0f} MiB"
        )


def shuffle_table(paths: list[Path], repeats: int = 3) -> None:
    """Issue 14: --shuffle-rows against the same run unshuffled, interleaved; goal <= 1.3x."""
    runs: dict[str, list[dict]] = {"in order": [], "--shuffle-rows": []}
    for _ in range(repeats):
        runs["in order"].append(objcli_transform(paths))
        runs["--shuffle-rows"].append(objcli_transform(paths, "--shuffle-rows"))
    megabytes = runs["in order"][0]["text_bytes"] / 1e6
    print(f"\n--shuffle-rows, clm --seq-len 2048, {CORES} workers ({repeats} interleaved runs each):")
    print(f"{'':16} {'min s':>7} {'median s':>9} {'CPU s/MB':>9} {'peak RSS':>9}")
    print_runs(runs, megabytes, 16)
    ratio = [statistics.median(r["seconds"] for r in runs[n]) for n in runs]
    cpu = [statistics.median(r["cpu"] for r in runs[n]) for n in runs]
    print(f"cost of --shuffle-rows: {ratio[1] / ratio[0]:.2f}x the wall (median), {cpu[1] / cpu[0]:.2f}x the CPU")


def provenance_table(paths: list[Path], repeats: int = 3) -> None:
    """Issue 41: clm with --provenance against the same run without, interleaved; goal <= 5 % more CPU.
    With the bench's SentencePiece model (spans measured on the pieces) and a byte-level BPE
    tokenizer.json (spans exact from the tokens' bytes)."""
    tokenizers = {"SentencePiece": TOKENIZER, "byte-level BPE": ROOT / "sample_data" / "llama-style" / "tokenizer.json"}
    print(f"\n--provenance, clm --seq-len 2048, {CORES} workers ({repeats} interleaved runs each):")
    print(f"{'':36} {'min s':>7} {'median s':>9} {'CPU s/MB':>9} {'peak RSS':>9}")
    for label, tokenizer in tokenizers.items():
        runs: dict[str, list[dict]] = {"without": [], "--provenance": []}
        for _ in range(repeats):
            runs["without"].append(objcli_transform(paths, "-t", str(tokenizer)))
            runs["--provenance"].append(objcli_transform(paths, "-t", str(tokenizer), "--provenance"))
        megabytes = runs["without"][0]["text_bytes"] / 1e6
        print_runs(runs, megabytes, 36, label + ", ")
        cpu = [statistics.median(r["cpu"] for r in runs[n]) for n in runs]
        print(f"{label}: --provenance costs {cpu[1] / cpu[0]:.3f}x the CPU (median of {repeats})")


def print_table(title: str, rows: list[tuple[str, dict]]) -> None:
    ceiling = rows[0][1]["text_bytes"] / rows[0][1]["seconds"]
    print(f"\n{title}")
    print(f"{'':48} {'seconds':>8} {'MB/s':>7} {'Mtok/s':>7} {'peak RSS':>9} {'ratio':>7}")
    for name, r in rows:
        rate = r["text_bytes"] / r["seconds"]
        rss = f"{r['peak_rss'] / 2**20:.0f} MiB" if "peak_rss" in r else "-"
        print(
            f"{name:48} {r['seconds']:8.2f} {rate / 1e6:7.2f} {r['tokens'] / r['seconds'] / 1e6:7.2f} {rss:>9} "
            f"{rate / ceiling:6.2f}x"
        )


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
        rows += [
            ("tiktoken encode_ordinary_batch (ceiling)", ceiling, ceiling),
            ("objcli clm, tiktoken, --workers 2", through_objcli, ceiling),
        ]
    except ImportError:
        print("(tiktoken is not installed: no tiktoken rows)")
    try:
        rows.append(
            ("datatrove DocumentTokenizer, 2 workers", datatrove_tokenize(paths, tokenizer_json, hf["text_bytes"]), hf)
        )
    except ImportError:
        print("(datatrove is not installed)")
    documents = sum(1 for p in paths for _ in open(p, "rb"))
    print(f"\nEnd to end against the peers ({documents:,} documents; ratio = against the same library's ceiling):")
    print(f"{'':42} {'docs/s':>9} {'MB/s':>7} {'Mtok/s':>7} {'peak RSS':>9} {'ratio':>7}")
    for name, r, ceiling in rows:
        rate = r["text_bytes"] / r["seconds"]
        rss = f"{r['peak_rss'] / 2**20:.0f} MiB" if "peak_rss" in r else "-"
        ratio = rate / (ceiling["text_bytes"] / ceiling["seconds"])
        print(
            f"{name:42} {documents / r['seconds']:9,.0f} {rate / 1e6:7.2f} {r['tokens'] / r['seconds'] / 1e6:7.2f} "
            f"{rss:>9} {ratio:6.2f}x"
        )
    print(
        f"objcli tokenizer.json, 2 workers vs 1: {one['seconds'] / two['seconds']:.2f}x; "
        f"vs datatrove: {rows[-1][1]['seconds'] / two['seconds']:.2f}x faster"
        if len(rows) > 5
        else ""
    )
    print("dolma: not installed here (pip's resolver backtracks through boto3 releases for over 6 minutes).")


def objectives_table(megabytes: int = 200) -> None:
    """Every objective against the tokenizer's ceiling at this machine's cores, on a 200 MB corpus
    (start-up is then a small part, as in real runs), interleaved repeats; then the many-core model."""
    from bench_scaling import build_corpus as scaling_corpus
    from bench_scaling import measure, model_rows, print_model

    objectives = ("clm", "span-corruption", "prefix-lm", "ul2", "mlm", "nsp", "sop", "electra", "fim", "bart")
    paths = scaling_corpus(DATA / "scaling", megabytes)
    print(
        f"\nEvery objective, {megabytes} MB in {len(paths)} files, default pool, --seq-len 2048 (clm) or 512, "
        f"ratio = the linear ceiling's wall (one SentencePiece thread's / {CORES}) / objcli's (CLI, cold):"
    )
    measure(paths, [CORES], 2, OUT, ",".join(f"{o}/auto" for o in objectives))
    print(
        "\nMany-core model, every objective (bench corpus; objcli/docs/performance.md gives a 16-core machine's "
        "measurements):"
    )
    print_model(model_rows(build_corpus(), objectives))


def main() -> None:
    paths = build_corpus()
    size = sum(p.stat().st_size for p in paths)
    print(f"corpus: {len(paths)} JSONL files, {size / 1e6:.1f} MB, tokenizer {TOKENIZER.name}, {CORES} cores")
    print_table(
        "Pipeline cost beyond tokenization (one core, in process, no start-up):",
        [
            ("SentencePiece batched encode, 1 thread", raw_sentencepiece(paths, 1)),
            ("objcli transform clm, library call, 1 worker", objcli_in_process(paths)),
        ],
    )
    rows = [(f"SentencePiece batched encode, {CORES} threads", raw_sentencepiece(paths, CORES))]
    for workers in (1, CORES):
        rows.append(
            (f"objcli transform clm --workers {workers} (CLI)", objcli_transform(paths, "--workers", str(workers)))
        )
    print_table(f"End to end on {CORES} cores (CLI process tree, start-up included):", rows)
    objectives_table()

    peers_table(paths)
    from bench_engines import engines_table, fresh_corpus

    engines_table(fresh_corpus())
    from bench_shapes import engine_call_table, shapes_table, stage_table

    failures = shapes_table()
    stage_table()
    engine_call_table()
    from bench_peers import peers_table as shape_peers_table

    shape_peers_table()
    from bench_fast_path import fast_path_table

    fast_path_table()
    from bench_store import store_table, token_file_reading

    store_table()
    token_file_reading()
    from bench_chat import chat_table

    chat_table()
    from bench_store import chat_store_table

    chat_store_table()
    from bench_plans import plans_table

    plans_table()
    from bench_merge import merge_table, reshard_table

    merge_table()
    reshard_table()
    from bench_storage import storage_table

    storage_table(paths, objcli_transform)
    shuffle_table(paths)
    provenance_table(paths)
    memory_table(paths)

    print("\nPacking at --seq-len 2048 (CLI, same corpus, same run):")
    print(f"{'':12} {'rows':>8} {'padding':>8} {'docs split':>11} {'split %':>8} {'seconds':>8} {'throughput':>11}")
    packing = {}
    for mode in ("concat", "best-fit"):
        run = objcli_transform(paths, "--packing", mode)
        t = json.loads((OUT / "manifest.json").read_text())["totals"]
        packing[mode] = run["seconds"]
        print(
            f"{mode:12} {t['rows']:>8,} {100 * t['padding_fraction']:>7.2f}% {t['documents_split']:>11,} "
            f"{100 * t['split_fraction']:>7.2f}% {run['seconds']:>8.2f} {packing['concat'] / run['seconds']:>10.2f}x"
        )

    from bench_kernels import kernel_rows

    print("\nObjective kernels, one core, same data, same run (tokens/s):")
    print(f"{'':36} {'kernel':>10} {'reference loop':>15} {'ratio':>8}")
    for name, kernel, slow in kernel_rows():
        print(f"{name:36} {kernel / 1e6:8.1f} M {slow / 1e6:13.2f} M {kernel / slow:7.0f}x")
    if failures:  # a shape or engine below its goal is a failing bench line (issue 62)
        print("\nFAIL: " + "; ".join(failures))


if __name__ == "__main__":
    main()
