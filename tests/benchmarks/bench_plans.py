"""`make bench`, issue 71: rows on read. Over the held-out 200 MB corpus's SentencePiece store and the
shapes' stores (long, dense, tiny):

1. the plan run (``--format plan``) against the derived Arrow run of the same command, interleaved,
   same cores, CLI with start-up: min and median wall, CPU ms a MB of text, bytes written, and the
   ratios (Arrow / plan) of wall and of bytes;
2. the reader (``objcli.reading.Rows``, one core): rows in order (tokens/s) and random rows (µs a row)
   for each objective, against ``datasets`` reading the Arrow shards of the same command
   (``Dataset.from_file``, NumPy format);
3. opening a plan over a store replicated to 100 GB (symbolic links: the same shards under other names,
   so no disk is spent) against the real store: the first row and a row of the last partition.

Nothing here asserts a figure.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from bench_store import _env, _objcli, tokenize
from benchmarks import CORES, DATA, OUT, TOKENIZER
from held_out import held_out_corpus

RUNS = {  # label -> transform options
    "clm concat 2048": ["--objective", "clm", "--seq-len", "2048"],
    "clm best-fit 2048": ["--objective", "clm", "--seq-len", "2048", "--packing", "best-fit"],
    "mlm 512": ["--objective", "mlm", "--seq-len", "512"],
    "span-corruption 512": ["--objective", "span-corruption", "--seq-len", "512"],
}
PLAN_OUT = DATA / "plan-out"


def _bytes(folder: Path) -> int:
    manifest = json.loads((folder / "manifest.json").read_text())
    return sum(sum(s["bytes"].values()) for s in manifest["shards"])


def plan_against_rows(store: Path, megabytes: float, runs: dict, repeats: int = 3) -> dict[str, dict]:
    """Each run as Arrow shards and as a plan, interleaved; the last outputs kept for the reader's table."""
    results: dict[str, dict[str, list]] = {}
    for _ in range(repeats):
        for label, options in runs.items():
            for kind, out in (("arrow", OUT), ("plan", PLAN_OUT)):
                shutil.rmtree(out, ignore_errors=True)
                command = ["transform", str(store), *options, "--format", kind, "-o", str(out), "-q"]
                run = _objcli([*command, "--workers", str(CORES)], _env())
                results.setdefault(label, {}).setdefault(kind, []).append({**run, "bytes": _bytes(out)})
    print(
        f"{'':24} {'':6} {'min s':>7} {'median s':>9} {'CPU ms/MB':>10} {'bytes':>12} {'arrow/plan':>11} {'bytes %':>8}"
    )
    for label, kinds in results.items():
        arrow_min = min(r["seconds"] for r in kinds["arrow"])
        for kind, group in kinds.items():
            walls = [r["seconds"] for r in group]
            share = 100 * group[-1]["bytes"] / kinds["arrow"][-1]["bytes"]
            print(
                f"{label:24} {kind:6} {min(walls):7.2f} {statistics.median(walls):9.2f} "
                f"{1000 * statistics.median(r['cpu'] for r in group) / megabytes:10.1f} {group[-1]['bytes']:>12,} "
                f"{arrow_min / min(walls):10.2f}x {share:7.2f}%"
            )
    return results


def _reading(rows, picks: np.ndarray) -> tuple[float, float]:
    """(tokens/s reading every row in order, µs a row reading ``picks`` in that order)."""
    started, tokens = time.perf_counter(), 0
    for row in rows:
        tokens += len(row["input_ids"])
    sequential = tokens / (time.perf_counter() - started)
    started = time.perf_counter()
    for i in picks:
        rows[int(i)]
    return sequential, 1e6 * (time.perf_counter() - started) / len(picks)


def reader_table(store: Path, runs: dict) -> None:
    """One core: objcli's reader over the plan against datasets over the Arrow shards, same command."""
    import datasets

    from objcli.reading import Rows

    print(f"{'':24} {'reader':28} {'in order':>12} {'random':>11}")
    for label, options in runs.items():
        for kind, out in (("arrow", OUT), ("plan", PLAN_OUT)):
            shutil.rmtree(out, ignore_errors=True)
            command = ["transform", str(store), *options, "--format", kind, "-o", str(out), "-q"]
            _objcli([*command, "--workers", str(CORES)], _env())
        manifest = json.loads((OUT / "manifest.json").read_text())
        shards = [str(OUT / s["files"][0]) for s in manifest["shards"]]
        hf = datasets.concatenate_datasets([datasets.Dataset.from_file(p) for p in shards]).with_format("numpy")
        picks = np.random.default_rng(0).integers(0, len(hf), 2000)
        readers = {
            "datasets, Arrow shards": hf,
            "objcli.reading, Arrow shards": Rows(OUT),
            "objcli.reading, plan": Rows(PLAN_OUT),
        }
        for name, rows in readers.items():
            sequential, random_us = _reading(rows, picks)
            print(f"{label:24} {name:28} {sequential / 1e6:9.1f} M/s {random_us:8.1f} µs")


def open_replicated(store: Path, plan: Path, copies: int) -> tuple[float, float, float]:
    """A store and its plan replicated ``copies`` times (hard links, partitions renumbered): seconds to
    open the plan, to read its first row, and a row of its last partition (each store shard's sha256 is
    checked when first read, so the last is one shard's hash and read)."""
    from objcli.reading import Rows

    root = DATA / f"replicated-{copies}"
    big_store, big_plan = root / "store", root / "plan"
    if not (big_plan / "manifest.json").exists():
        shutil.rmtree(root, ignore_errors=True)
        _replicate(store, plan, big_store, big_plan, copies)
    started = time.perf_counter()
    rows = Rows(big_plan)
    opened = time.perf_counter() - started
    rows[0]
    first = time.perf_counter() - started - opened
    started = time.perf_counter()
    rows[len(rows) - 1]
    return opened, first, time.perf_counter() - started


def replicate_store(store: Path, big_store: Path, copies: int) -> dict:
    """A token store ``copies`` times over under a real manifest: every file of every shard (its block
    digests too, recorded under the new names) linked as ``cNNNNN-NAME``, partitions renumbered; its manifest."""
    sm = json.loads((store / "manifest.json").read_text())
    big_store.mkdir(parents=True)
    count = len(sm["partitions"])
    shards, partitions = [], []
    for copy in range(copies):
        prefix = f"c{copy:05d}-"
        for entry in sm["partitions"]:
            names = [prefix + n for n in entry["shards"]]
            partitions.append({**entry, "index": copy * count + entry["index"], "shards": names})
        for s in sm["shards"]:
            for name in s["files"]:
                os.symlink(store.resolve() / name, big_store / (prefix + name))
            shards.append(
                {
                    **s,
                    "partition": copy * count + s["partition"],
                    "files": [prefix + n for n in s["files"]],
                    "sha256": {prefix + n: d for n, d in s["sha256"].items()},
                    "bytes": {prefix + n: b for n, b in s["bytes"].items()},
                }
            )
    counted = ("documents_read", "documents_written", "documents_skipped", "rows", "shards", "tokens", "text_bytes")
    totals = {**sm["totals"], **{k: sm["totals"][k] * copies for k in counted}}
    replicated = {**sm, "shards": shards, "partitions": partitions, "totals": totals}
    (big_store / "manifest.json").write_text(json.dumps(replicated))
    return replicated


def _replicate(store: Path, plan: Path, big_store: Path, big_plan: Path, copies: int) -> None:
    sm, pm = (json.loads((f / "manifest.json").read_text()) for f in (store, plan))
    replicate_store(store, big_store, copies)
    big_plan.mkdir(parents=True)
    count = len(sm["partitions"])
    plan_shards = []
    for copy in range(copies):
        for s in pm["shards"]:
            name = f"c{copy:05d}-{s['files'][0]}"
            os.symlink(plan.resolve() / s["files"][0], big_plan / name)
            plan_shards.append(
                {
                    **s,
                    "partition": copy * count + s["partition"],
                    "files": [name],
                    "sha256": {name: s["sha256"][s["files"][0]]},
                    "bytes": {name: s["bytes"][s["files"][0]]},
                }
            )
    from objcli.formats.row_plan import store_manifest_sha256

    section = {
        **pm["row_plan"],
        "store": str(big_store),
        "store_manifest_sha256": store_manifest_sha256(str(big_store)),
    }
    (big_plan / "manifest.json").write_text(json.dumps({**pm, "shards": plan_shards, "row_plan": section}))


def plan_at_scale_table(store: Path, copies_list=(10, 100)) -> None:
    """Issue 82: a plan written over a store replicated by links (the 1 GB store ``copies`` times, a real
    manifest, block digests under the new names), CORES workers, CLI with start-up; then opened and a
    random row read. Per partition, the figure the trillion-token plan scales by."""
    from objcli.reading import Rows

    tokens = json.loads((store / "manifest.json").read_text())["totals"]["tokens"]
    print(
        f"{'tokens':>16} {'partitions':>10} {'plan s':>8} {'ms/partition':>12} {'peak MB':>8} "
        f"{'open ms':>8} {'row ms':>7}"
    )
    for copies in copies_list:
        root = DATA / f"scaled-{copies}"
        shutil.rmtree(root, ignore_errors=True)
        manifest = replicate_store(store, root / "store", copies)
        plan = root / "plan"
        command = ["transform", str(root / "store"), *RUNS["clm concat 2048"], "--format", "plan", "-o", str(plan)]
        run = _objcli([*command, "-q", "--workers", str(CORES)], _env())
        started = time.perf_counter()
        rows = Rows(plan)
        opened = time.perf_counter() - started
        started = time.perf_counter()
        rows[int(np.random.default_rng(0).integers(len(rows)))]
        row = time.perf_counter() - started
        partitions = len(manifest["partitions"])
        print(
            f"{tokens * copies:16,} {partitions:10,} {run['seconds']:8.1f} {1000 * run['seconds'] / partitions:12.2f} "
            f"{run['peak_rss'] / 1e6:8.0f} {1000 * opened:8.1f} {1000 * row:7.2f}"
        )
        shutil.rmtree(root, ignore_errors=True)


def opening_table(store: Path) -> None:
    shutil.rmtree(PLAN_OUT, ignore_errors=True)
    _objcli(["transform", str(store), *RUNS["mlm 512"], "--format", "plan", "-o", str(PLAN_OUT), "-q"], _env())
    keep = DATA / "plan-to-replicate"
    shutil.rmtree(keep, ignore_errors=True)
    shutil.copytree(PLAN_OUT, keep)
    size = sum(p.stat().st_size for p in store.iterdir())
    print(f"{'store':>10} {'open':>9} {'first row':>10} {'last row':>9}")
    for copies in (1, 10, int(100e9 // size)):
        opened, first, last = open_replicated(store, keep, copies)
        print(f"{copies * size / 1e9:8.1f} GB {1000 * opened:7.1f} ms {1000 * first:8.1f} ms {1000 * last:7.1f} ms")


def gigabyte_table(copies: int = 5) -> None:
    """Issue 82's goal at 1 GB: the held-out corpus's documents five times over (hard links: five inputs of
    the same files), tokenized once into a store, planned against its derived Arrow runs."""
    paths, about = held_out_corpus(DATA / "held-out")
    folder = DATA / "held-out-copies"
    linked = [folder / f"copy-{k}-{p.name}" for k in range(copies) for p in paths]
    if not all(p.exists() for p in linked):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for k in range(copies):
            for p in paths:
                os.link(p, folder / f"copy-{k}-{p.name}")
    store = DATA / "store-plan-1gb"
    if not (store / "manifest.json").exists():
        tokenize(linked, TOKENIZER, store)
    megabytes = sum(p.stat().st_size for p in linked) / 1e6
    tokens = json.loads((store / "manifest.json").read_text())["totals"]["tokens"]
    size = f"{megabytes / 1000:.1f} GB ({about}, {copies} times; {tokens:,} tokens)"
    print(f"\nPlans against Arrow rows at {size}, {CORES} cores")
    plan_against_rows(store, megabytes, {k: RUNS[k] for k in ("clm concat 2048", "clm best-fit 2048", "mlm 512")}, 2)
    print(f"\nA plan over the 1 GB store replicated by links, {CORES} cores (clm concat 2048)")
    plan_at_scale_table(store)


def chat_gigabyte_table(count: int = 240_000) -> None:
    """Issue 82's goal for chat at 1 GB: conversations of the sample prose (``bench_chat``), rendered with
    Llama 3's template over the sample Llama-style tokenizer into a chat store, planned against the Arrow
    run (best-fit 4096: conversations and labels as runs, ``kernels/example_runs.py``)."""
    from bench_chat import TEMPLATE, bench_conversations
    from paths import SAMPLE_DATA

    conversations = bench_conversations(count)
    tokenizer = SAMPLE_DATA / "llama-style" / "tokenizer.json"
    store = DATA / f"store-chat-{count}"
    if not (store / "manifest.json").exists():
        tokenize([conversations], tokenizer, store, "--chat", "--chat-template", str(TEMPLATE))
    megabytes = conversations.stat().st_size / 1e6
    tokens = json.loads((store / "manifest.json").read_text())["totals"]["tokens"]
    print(f"\nA chat plan against Arrow rows at {megabytes / 1000:.1f} GB ({count:,} conversations; {tokens:,} tokens)")
    run = ["--objective", "chat", "--seq-len", "4096", "--chat-template", str(TEMPLATE)]
    plan_against_rows(store, megabytes, {"chat best-fit 4096": run}, 2)


def tokens_grow_table(count: int = 40_000, repeats: int = 3) -> None:
    """Issue 82: a plan reads the documents' lengths, not their tokens. The same ``count`` documents (2,000
    characters of the sample prose each) and each of them five times over (5x the tokens, as many documents
    and partitions), tokenized into stores; each run planned over both, interleaved."""
    import json as json_

    from paths import SAMPLE_DATA

    prose = " ".join(json_.loads(line)["text"] for line in (SAMPLE_DATA / "prose.jsonl").open())
    rng = np.random.default_rng(82)
    folder = DATA / "tokens-grow"
    folder.mkdir(parents=True, exist_ok=True)
    starts = rng.integers(0, len(prose) - 2000, count).tolist()
    stores = {}
    for label, times in (("1x", 1), ("5x", 5)):
        text = folder / f"documents-{label}.jsonl"
        with text.open("w") as f:
            f.writelines(json_.dumps({"text": " ".join([prose[a : a + 2000]] * times)}) + "\n" for a in starts)
        stores[label] = folder / f"store-{label}"
        tokenize([text], TOKENIZER, stores[label], "--partition-size", f"{16 * times}MiB")
    runs = {k: RUNS[k] for k in ("clm concat 2048", "clm best-fit 2048", "mlm 512")}
    walls: dict[tuple[str, str], list[float]] = {}
    for _ in range(repeats):
        for label, options in runs.items():
            for size, store in stores.items():
                shutil.rmtree(PLAN_OUT, ignore_errors=True)
                command = ["transform", str(store), *options, "--format", "plan", "-o", str(PLAN_OUT), "-q"]
                walls.setdefault((label, size), []).append(
                    _objcli([*command, "--workers", str(CORES)], _env())["seconds"]
                )
    print(f"\nThe same {count:,} documents with 5x their tokens, planned ({CORES} cores): min s, median s")
    for label in runs:
        one, five = walls[(label, "1x")], walls[(label, "5x")]
        print(
            f"{label:24} 1x {min(one):6.2f} {statistics.median(one):6.2f}   5x {min(five):6.2f} "
            f"{statistics.median(five):6.2f}   5x/1x {min(five) / min(one):5.2f}"
        )


def plans_table() -> None:
    from bench_shapes import SIZES
    from shapes import shape_corpus

    paths, about = held_out_corpus(DATA / "held-out")
    megabytes = sum(p.stat().st_size for p in paths) / 1e6
    store = DATA / "store-plan-held-out"
    tokenize(paths, TOKENIZER, store)
    print(
        f"\nRows on read (issue 71): plans against Arrow rows, held-out corpus ({about}), SentencePiece, {CORES} cores"
    )
    plan_against_rows(store, megabytes, RUNS)
    print("\nThe reader, one core (tokens/s in order; µs a row at random, 2,000 rows):")
    reader_table(store, RUNS)
    print("\nOpening a plan over a store replicated to 100 GB (hard links), one core:")
    opening_table(store)
    for shape in ("long", "dense", "tiny"):
        shape_paths, line = shape_corpus(DATA / "shapes", shape, SIZES[shape])
        if not shape_paths:
            continue
        shape_store = DATA / f"store-plan-{shape}"
        tokenize(shape_paths, TOKENIZER, shape_store)
        print(f"\n{line}")
        size = sum(p.stat().st_size for p in shape_paths) / 1e6
        plan_against_rows(shape_store, size, {"clm concat 2048": RUNS["clm concat 2048"]}, repeats=2)
    gigabyte_table()
    chat_gigabyte_table()
    tokens_grow_table()


if __name__ == "__main__":
    sys.exit(plans_table())
