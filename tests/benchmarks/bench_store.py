"""`make bench`, issue 51: deriving objectives from a token store against the same run from text.

On the held-out corpus (``held_out.py``, 200 MB), with SentencePiece (the sample model) and with the
fast engine (a 32k byte-level BPE ``tokenizer.json`` on the pinned pre-release): ``objcli tokenize``
once per tokenizer, then clm, mlm and span corruption from the text and from the store, interleaved
(each repeat runs every row once), same cores, CLI with start-up. Printed: min and median wall, CPU
per MB of text of the process tree, peak RSS, and the ratio text / store (min walls). The store's
size: bytes a token and, apart, its boundaries and metadata. Nothing here asserts a figure.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import time
from pathlib import Path

from bench_engines import prerelease_env, tokenizer_files
from benchmarks import CORES, DATA, OUT, TOKENIZER, _last_cpu, _run_tree
from held_out import held_out_corpus

OBJECTIVES = {"clm": "2048", "mlm": "512", "span-corruption": "512"}


def _objcli(command: list[str], env: dict) -> dict:
    seconds, peak, _ = _run_tree([sys.executable, "-m", "objcli", *command], env)
    return {"seconds": seconds, "peak_rss": peak, "cpu": _last_cpu[0]}


def _env() -> dict:
    env = prerelease_env()
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode cached
    return env


def tokenize(paths: list[Path], tokenizer: Path, store: Path, *options: str) -> dict:
    shutil.rmtree(store, ignore_errors=True)
    command = ["tokenize", *map(str, paths), "-t", str(tokenizer), "-o", str(store), "-q", "--workers", str(CORES)]
    run = _objcli([*command, *options], _env())
    manifest = json.loads((store / "manifest.json").read_text())
    return {**run, "manifest": manifest}


def derived_rows(paths: list[Path], tokenizer: Path, store: Path, repeats: int) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {}
    for _ in range(repeats):  # interleaved
        for objective, seq_len in OBJECTIVES.items():
            for source, inputs in (("text", [str(p) for p in paths]), ("store", [str(store)])):
                shutil.rmtree(OUT, ignore_errors=True)
                command = ["transform", *inputs, "-t", str(tokenizer), "--objective", objective, "--seq-len", seq_len]
                command += ["-o", str(OUT), "-q", "--workers", str(CORES)]
                runs.setdefault(f"{objective} from {source}", []).append(_objcli(command, _env()))
    return runs


def store_table(repeats: int = 2) -> None:
    paths, about = held_out_corpus(DATA / "held-out")
    megabytes = sum(p.stat().st_size for p in paths) / 1e6
    tokenizers = {"SentencePiece (sample model)": TOKENIZER}
    fast = tokenizer_files().get("32k byte-level BPE tokenizer.json")
    if fast is not None:
        tokenizers["fast engine (32k byte-level BPE, tokenizers 1.0 pre-release)"] = fast
    print(f"\nDerived from a token store (issue 51): held-out corpus, {about}; {CORES} cores, CLI, start-up included")
    for label, tokenizer in tokenizers.items():
        store = DATA / f"store-{Path(tokenizer).parent.name}-{Path(tokenizer).stem}"
        made = tokenize(paths, tokenizer, store)
        size, totals = made["manifest"]["token_store"]["bytes"], made["manifest"]["totals"]
        print(
            f"\n{label}: tokenize {made['seconds']:.2f} s ({1000 * made['cpu'] / megabytes:.1f} CPU ms/MB), "
            f"{totals['tokens']:,} tokens, {size['tokens'] / totals['tokens']:.2f} bytes a token + "
            f"{size['boundaries_and_metadata'] / 2**20:.1f} MiB of boundaries and metadata "
            f"({size['boundaries_and_metadata'] / totals['tokens']:.3f} bytes a token)"
        )
        kept = tokenize(paths, tokenizer, store.with_name(store.name + "-provenance"), "--provenance")
        with_origins = kept["manifest"]["token_store"]["bytes"]["total"]
        print(
            f"  with --provenance (issue 83: a few bytes a document): tokenize {kept['seconds']:.2f} s, "
            f"{with_origins / 2**20:.1f} MiB, {with_origins / size['total']:.3f}x the store without "
            f"({(with_origins - size['total']) / max(totals['documents_written'], 1):.1f} bytes a document more)"
        )
        print("  " + block_checks(store))
        runs = derived_rows(paths, tokenizer, store, repeats)
        print(f"{'':32} {'min s':>7} {'median s':>9} {'CPU ms/MB':>10} {'peak RSS':>9} {'text/store':>11}")
        for name, group in runs.items():
            walls = [r["seconds"] for r in group]
            objective = name.split(" from ")[0]
            ratio = min(r["seconds"] for r in runs[f"{objective} from text"]) / min(walls)
            print(
                f"{name:32} {min(walls):7.2f} {statistics.median(walls):9.2f} "
                f"{1000 * statistics.median(r['cpu'] for r in group) / megabytes:10.1f} "
                f"{max(r['peak_rss'] for r in group) / 2**20:7.0f} MiB {ratio:10.2f}x"
            )


def block_checks(store: Path, repeats: int = 3) -> str:
    """Issue 82, item 3: checking every shard of the store by its block digests (XXH3) against its sha256, one
    core, interleaved, best of ``repeats`` (what a derived run, a plan run and verify spend before the tokens)."""
    import hashlib

    import numpy as np

    from objcli.storage.blocks import ShardBlocks

    shards = sorted(store.glob("*.store"))
    blocks = {s: ShardBlocks(s, s.with_name(s.name + ".blocks").read_bytes()) for s in shards}
    timings = {"sha256": [], "blocks": []}
    for _ in range(repeats):
        start = time.perf_counter()
        for shard in shards:
            hashlib.sha256(shard.read_bytes()).hexdigest()
        timings["sha256"].append(time.perf_counter() - start)
        start = time.perf_counter()
        for shard in shards:
            checked = blocks[shard]
            checked.checked = [False] * len(checked.digests)
            assert checked.check_all(np.memmap(shard, np.uint8, "r"))
        timings["blocks"].append(time.perf_counter() - start)
    size = sum(s.stat().st_size for s in shards) / 2**20
    sha, xxh = min(timings["sha256"]), min(timings["blocks"])
    return (
        f"checking its {len(shards)} shards ({size:.0f} MiB, page cache warm): sha256 {sha:.3f} s, "
        f"block digests {xxh:.3f} s ({sha / xxh:.1f}x)"
    )


def chat_store_table(count: int = 20_000, repeats: int = 2) -> None:
    """Issue 51, point 3: ``--objective chat`` from the conversations (rendered with Llama 3's template
    and encoded with its 128k tokenizer.json every run) and from a chat store (``objcli tokenize
    --chat``: rendered and encoded once), interleaved, same cores, CLI with start-up."""
    from bench_chat import bench_conversations, llama3_chat_tokenizer

    tokenizer, data = llama3_chat_tokenizer(), bench_conversations(count)
    megabytes = data.stat().st_size / 1e6
    store = DATA / "chat" / f"store-{count}"
    shutil.rmtree(store, ignore_errors=True)
    made = _objcli(["tokenize", str(data), "-t", str(tokenizer), "-o", str(store), "--chat", "-q"], _env())
    print(
        f"\nChat from a chat store (issue 51): {count:,} conversations ({megabytes:.0f} MB), Llama 3's tokenizer.json "
        f"and template; tokenize --chat {made['seconds']:.2f} s ({1000 * made['cpu'] / megabytes:.1f} CPU ms/MB)"
    )
    runs: dict[str, list[dict]] = {}
    for _ in range(repeats):  # interleaved
        for source, inputs in (("text", [str(data), "-t", str(tokenizer)]), ("store", [str(store)])):
            shutil.rmtree(OUT, ignore_errors=True)
            command = ["transform", *inputs, "--objective", "chat", "--seq-len", "2048", "-o", str(OUT), "-q"]
            runs.setdefault(f"chat from {source}", []).append(_objcli([*command, "--workers", str(CORES)], _env()))
    print(f"{'':32} {'min s':>7} {'median s':>9} {'CPU ms/MB':>10} {'peak RSS':>9} {'text/store':>11}")
    for name, group in runs.items():
        walls = [r["seconds"] for r in group]
        ratio = min(r["seconds"] for r in runs["chat from text"]) / min(walls)
        print(
            f"{name:32} {min(walls):7.2f} {statistics.median(walls):9.2f} "
            f"{1000 * statistics.median(r['cpu'] for r in group) / megabytes:10.1f} "
            f"{max(r['peak_rss'] for r in group) / 2**20:7.0f} MiB {ratio:10.2f}x"
        )


if __name__ == "__main__":
    store_table()
    chat_store_table()


def token_file_reading(megabytes: int = 400, repeats: int = 3) -> None:
    """Issue 52: a Megatron .bin/.idx read as documents (EOS taken off, ids checked), one core, before
    the objective: GB of token file a second (the page cache warm, as after a first read)."""
    import struct
    import time

    import numpy as np

    from objcli.inputs.pieces import InputFile
    from objcli.inputs.records import RecordLog
    from objcli.inputs.token_inputs.partitions import token_batches, token_partitions

    folder = DATA / "token-files"
    folder.mkdir(parents=True, exist_ok=True)
    prefix = folder / "big_text_document"
    rng = np.random.default_rng(0)
    lengths = rng.integers(50, 1950, megabytes * 10**6 // 2 // 1000)
    if not Path(f"{prefix}.bin").exists():
        ids = rng.integers(0, 7999, int(lengths.sum()), dtype=np.uint16)
        ids[np.cumsum(lengths) - 1] = 2  # --append-eod
        ids.tofile(f"{prefix}.bin")
        count = len(lengths)
        with open(f"{prefix}.idx", "wb") as f:
            f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, count, count + 1))
            f.write(lengths.astype("<i4").tobytes())
            f.write((np.concatenate([[0], np.cumsum(lengths)[:-1]]) * 2).astype("<i8").tobytes())
            f.write(np.arange(count + 1, dtype="<i8").tobytes())
    size = Path(f"{prefix}.bin").stat().st_size
    source = InputFile(str(prefix), "megatron", None, size)
    walls = []
    for _ in range(repeats):
        started = time.perf_counter()
        for partition in token_partitions(source, 16 << 20, "input_ids"):
            for _documents in token_batches(partition, "input_ids", 1 << 20, RecordLog(), 2, 8000):
                pass
        walls.append(time.perf_counter() - started)
    print(
        f"\nTokenized input (issue 52): a {size / 1e6:.0f} MB Megatron .bin read as documents, one core: "
        f"{size / 1e9 / min(walls):.2f} GB/s (min), {size / 1e9 / statistics.median(walls):.2f} GB/s (median)"
    )
