"""`make bench`, issue 25: byte-level BPE through the fast exact engines, side by side in one run.

For each tokenizer (Llama 3's 128k vocabulary as a tokenizer.json converted from the published rank
file and as the rank file itself, and a 32k byte-level BPE tokenizer.json trained here), interleaved
repeats of:

- the ceiling: the fast engine's own batched encode on CORES threads over texts already in memory
  (``tokenizers`` 1.0 for a tokenizer.json, in a process with the pre-release first on its path;
  quicktok for a rank file);
- objcli today: the reference engine (``--engine reference``: ``tokenizers`` 0.x, tiktoken);
- objcli with ``--engine auto`` (the pre-release on its path for a tokenizer.json), clm and every
  other token-level objective;
- datatrove's DocumentTokenizer on the same tokenizer.json, corpus and cores.

Min and median walls, CPU seconds per MB of the whole process tree, and peak RSS.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import CORES, DATA, OUT, _last_cpu, _run_tree, datatrove_tokenize, text_batches
from bpe_files import llama3_ranks, rank_file_to_tokenizer_json, write_rank_file
from paths import ROOT, SAMPLE_DATA

PRERELEASE = Path(sys.prefix) / "prerelease-tokenizers"
OBJECTIVES = ("clm", "mlm", "span-corruption", "prefix-lm", "ul2")


def fresh_corpus(megabytes: int = 150, files: int = 8) -> list[Path]:
    """Text that does not repeat (the bench corpus repeats the sample, so an engine's caches see
    every word again and again): the sample prose once, then the Python sources installed in this
    environment, in path order, until ``megabytes``; one document per file, in ``files`` JSONL files."""
    import sysconfig

    folder = DATA / "fresh"
    paths = [folder / f"fresh-{i:02d}.jsonl" for i in range(files)]
    if all(p.exists() for p in paths):
        return paths
    root = SAMPLE_DATA
    texts = [json.loads(line)["text"] for line in (root / "prose.jsonl").open()]
    size = sum(map(len, texts))
    for source in sorted(Path(sysconfig.get_paths()["purelib"]).rglob("*.py")):
        if size >= megabytes * 10**6:
            break
        try:
            text = source.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        texts.append(text)
        size += len(text)
    folder.mkdir(parents=True, exist_ok=True)
    for i, path in enumerate(paths):
        path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[i::files]))
    return paths


def prerelease_env() -> dict:
    return {**os.environ, "PYTHONPATH": str(PRERELEASE)}


def tokenizer_files() -> dict[str, Path]:
    from objcli.tokenizers.tiktoken_bpe import LLAMA3_PATTERN, _llama3_specials

    folder = DATA / "engines"
    files = {
        "Llama 3 128k tokenizer.json": folder / "llama3" / "tokenizer.json",
        "Llama 3 128k rank file": folder / "llama3.tiktoken",
        "32k byte-level BPE tokenizer.json": folder / "bpe32k" / "tokenizer.json",
    }
    if not all(p.exists() for p in files.values()):
        ranks = llama3_ranks()
        rank_file_to_tokenizer_json(
            ranks, LLAMA3_PATTERN, _llama3_specials(128_000), files["Llama 3 128k tokenizer.json"]
        )
        write_rank_file(ranks, files["Llama 3 128k rank file"])
        _train_32k(files["32k byte-level BPE tokenizer.json"], LLAMA3_PATTERN)
    return files


def _train_32k(path: Path, pattern: str) -> None:
    """A 32k byte-level BPE with Llama 3's split (``pattern``), trained as ``objcli train-tokenizer -o
    tokenizer.json`` trains one, by the stable library, on the sample corpus."""
    from objcli.commands.train_bpe import SPLIT_PATTERN, byte_level_trainer

    assert pattern == SPLIT_PATTERN
    tokenizer, trainer = byte_level_trainer(32_000)
    texts = [json.loads(line)["text"] for name in ("prose.jsonl", "code.jsonl") for line in (SAMPLE_DATA / name).open()]
    tokenizer.train_from_iterator(texts, trainer)
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))


CEILING = """
import json, os, sys, time, msgspec
paths, tokenizer, threads = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
batches, batch, size = [], [], 0
for path in paths:
    for record in msgspec.json.Decoder().decode_lines(open(path, 'rb').read()):
        batch.append(record['text']); size += len(record['text'])
        if size >= 1 << 20: batches.append(batch); batch, size = [], 0
batches.append(batch)
if tokenizer.endswith('.json'):
    import tokenizers
    library = tokenizers.Tokenizer.from_file(tokenizer)
    encode = lambda b: sum(
        len(e) for e in library.encode_batch(b, add_special_tokens=False, encode_special_tokens=True))
    engine = 'tokenizers ' + tokenizers.__version__
else:
    import quicktok
    sys.path.insert(0, os.getcwd())
    from objcli.tokenizers import open_tokenizer
    fast = open_tokenizer(tokenizer).make_engine('quicktok')
    encode = lambda b: len(fast.encode_batch(b, threads)[0])
    engine = 'quicktok ' + quicktok.__version__
best, cpu = 1e9, 1e9
for _ in range(2):
    started, started_cpu = time.perf_counter(), time.process_time()
    tokens = sum(encode(b) for b in batches)
    best, cpu = min(best, time.perf_counter() - started), min(cpu, time.process_time() - started_cpu)
print(json.dumps({"seconds": best, "cpu": cpu, "tokens": tokens, "engine": engine,
                  "text_bytes": sum(len(t) for b in batches for t in b)}))
"""


def ceiling(paths: list[Path], tokenizer: Path) -> dict:
    env = {**prerelease_env(), "RAYON_NUM_THREADS": str(CORES)}
    out = subprocess.run(
        [sys.executable, "-c", CEILING, json.dumps([str(p) for p in paths]), str(tokenizer), str(CORES)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=ROOT,
    )
    return json.loads(out.stdout)


def objcli(paths: list[Path], tokenizer: Path, engine: str, objective: str = "clm", env=None) -> dict:
    shutil.rmtree(OUT, ignore_errors=True)
    seq_len = "2048" if objective == "clm" else "512"
    command = [
        sys.executable,
        "-m",
        "objcli",
        "transform",
        *map(str, paths),
        "-t",
        str(tokenizer),
        "--engine",
        engine,
        "--objective",
        objective,
        "--seq-len",
        seq_len,
        "-o",
        str(OUT),
        "--quiet",
        "--workers",
        str(CORES),
    ]
    seconds, peak, _ = _run_tree(command, env)
    manifest = json.loads((OUT / "manifest.json").read_text())
    return {
        "seconds": seconds,
        "peak_rss": peak,
        "cpu": _last_cpu[0],
        "tokens": manifest["totals"]["tokens"],
        "text_bytes": manifest["totals"]["text_bytes"],
        # Bytes the shards hold a token (issue 73: each column at its values' width)
        "bytes_per_token": sum(b for s in manifest["shards"] for b in s["bytes"].values())
        / manifest["totals"]["tokens"],
        "engine": manifest["tokenizer"]["engine"]["name"],
    }


def engines_table(paths: list[Path], repeats: int = 2) -> None:
    if not (PRERELEASE / "tokenizers").is_dir():
        print(f"\n(no pre-release tokenizers in {PRERELEASE}: `make test` installs it; no engine rows)")
        return
    megabytes = sum(len(t) for b in text_batches(paths, 1 << 20) for t in b) / 1e6
    for name, tokenizer in tokenizer_files().items():
        is_json = tokenizer.suffix == ".json"
        fast_env = prerelease_env() if is_json else None
        runs: dict[str, list[dict]] = {}
        for _ in range(repeats):  # interleaved: each repeat runs every row once
            runs.setdefault("ceiling", []).append(ceiling(paths, tokenizer))
            runs.setdefault("objcli today (--engine reference)", []).append(objcli(paths, tokenizer, "reference"))
            for objective in OBJECTIVES:
                runs.setdefault(f"objcli {objective} (--engine auto)", []).append(
                    objcli(paths, tokenizer, "auto", objective, fast_env)
                )
            if is_json:
                large = "128k" in name
                eos = "<|end_of_text|>" if large else "<|endoftext|>"
                run = datatrove_tokenize(paths, tokenizer, int(megabytes * 1e6), eos, 4 if large else 2)
                runs.setdefault("datatrove DocumentTokenizer", []).append({**run, "cpu": _last_cpu[0]})
        _print_runs(
            f"{name}, {megabytes:.0f} MB, {CORES} cores (ratio: the ceiling's median wall / the row's):",
            runs,
            megabytes,
        )


def _print_runs(title: str, runs: dict[str, list[dict]], megabytes: float) -> None:
    top = statistics.median(r["seconds"] for r in runs["ceiling"])
    today = statistics.median(r["seconds"] for r in runs["objcli today (--engine reference)"])
    print(f"\n{title}")
    print(
        f"{'':44} {'engine':>20} {'min s':>7} {'median s':>9} {'MB/s':>7} {'CPU ms/MB':>10} {'peak RSS':>9} "
        f"{'ratio':>6} {'x today':>8}"
    )
    for name, group in runs.items():
        walls = [r["seconds"] for r in group]
        median = statistics.median(walls)
        cpu = 1000 * statistics.median(r.get("cpu", 0.0) for r in group) / megabytes
        rss = f"{max(r['peak_rss'] for r in group) / 2**20:.0f} MiB" if "peak_rss" in group[0] else "-"
        engine = group[0].get("engine", "")
        print(
            f"{name:44} {engine:>20} {min(walls):7.2f} {median:9.2f} {megabytes / median:7.1f} {cpu:10.1f} {rss:>9} "
            f"{top / median:5.2f}x {today / median:7.2f}x"
        )


if __name__ == "__main__":
    started = time.perf_counter()
    engines_table(fresh_corpus())
    print(f"\n({time.perf_counter() - started:.0f} s)")
