"""The end of a run, once every partition is done: the row shuffle's second pass, the manifest
(written last), the checks on its accounting and the warnings its counters call for."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from .. import __version__
from ..errors import ObjcliError
from ..inputs.pieces import InputKind
from ..inputs.records import every_record_bad, why_no_rows
from ..inputs.token_inputs.digests import token_input_digests
from ..objectives.base import remainder_hint
from ..order.mixture import mixture_totals
from ..order.shuffle import shuffle_rows
from ..order.splits import split_names
from ..recipe import command_line, recipe_of
from ..storage.manifest import MANIFEST_VERSION, split_totals, totals
from ..storage.output import output_error
from ..storage.remote import is_url, public_url, tokenizer_location
from .pipeline import RUN_WARNINGS
from .stores import store_summary


def input_entry(f, source: str = "") -> dict:
    """An input as the manifest records it: its path as given, the mixture's source it was read for,
    and for a local file where it was (``resolved``) and when it was last changed, so ``trace`` reads
    the same file (with its source's --text-key) or says it changed; a tokenized input's files'
    sha256."""
    entry = {"path": public_url(f.path), "format": f.format, "compression": f.compression, "bytes": f.size}
    entry |= {"source": source} if source else {}
    if f.kind is InputKind.TOKENS:  # its files by content (verify checks them), a Megatron prefix's two
        where = {} if is_url(f.path) else {"resolved": os.path.abspath(f.path)}
        return entry | where | {"sha256": token_input_digests(f.path, f.format)}
    if f.is_stream or is_url(f.path):
        return entry
    try:
        modified = os.stat(f.path).st_mtime_ns
    except OSError:
        return entry
    return entry | {"resolved": os.path.abspath(f.path), "modified_ns": modified}


def build_manifest(setup, results: list, shards, run_key: str) -> dict:
    """The manifest of a finished run; ``shards`` are the run's, named as they will be."""
    config, tokenizer = setup.config, setup.tokenizer
    sources = {p.input.path: p.source for p in setup.partitions}
    # Each partition's shards: with --shuffle-rows none (a shuffled shard's partition is -1); a Megatron
    # prefix joined from several partitions' shards is listed under the first.
    by_partition: dict[int, list[str]] = {}
    for shard in shards:
        by_partition.setdefault(shard.partition, []).append(shard.files[0])
    return {
        "objcli_version": __version__,
        "manifest_version": MANIFEST_VERSION,
        "complete": True,
        "objective": setup.objective.name,
        "supervision": setup.objective.supervision,
        "config": config.to_json(),
        "recipe": recipe_of(config, with_output=False),
        "command": command_line(recipe_of(config, with_output=False)),
        "config_sha256": setup.config_sha256,
        "run_key": run_key,  # configuration + every input's size and mtime: a rerun over changed inputs rebuilds
        "seed": config.seed,
        "tokenizer": _tokenizer_json(config, tokenizer),
        "identity": setup.identity,
        "special_tokens": tokenizer.special.to_json(),
        "format": config.format.name,
        "columns": [c.to_json() for c in config.format.recorded_columns(setup.columns)],
        "inputs": [input_entry(f, sources.get(f.path, "")) for f in setup.files],
        "partitions": [_partition_json(p, r, by_partition.get(p.index, [])) for p, r in zip(setup.partitions, results)],
        "shards": [s.to_json() for s in shards],
        "totals": totals(results, shards),
        **({"splits": split_totals(shards), "split_bounds": _bounds_json(setup)} if config.split else {}),
        **({"mixture": mixture_totals(setup.mixture, setup.partitions, results)} if config.source else {}),
        **(
            {"token_store": store_summary(config, tokenizer, totals(results, shards), shards)}
            if config.store_kind
            else {}
        ),
        **config.format.manifest_sections(setup.files, tokenizer, setup.partitions),
    }


def _tokenizer_json(config, tokenizer) -> dict:
    return {
        "kind": tokenizer.kind,
        "path": tokenizer_location(config.tokenizer),
        "sha256": tokenizer.sha256,
        "vocab_size": tokenizer.vocab_size,
        "total_vocab_size": tokenizer.total_vocab_size,
        "engine": tokenizer.engine_choice.to_json(),
    }


def _partition_json(partition, result, names: list[str]) -> dict:
    return {
        **partition.to_json(),
        "documents_read": result.documents_read,
        "documents_written": result.documents_written,
        "documents_skipped": result.documents_skipped,
        "skipped_by_reason": result.skipped,
        "counters": result.counters,
        **({"first_skipped": result.first_examples} if result.first_examples else {}),
        "shards": names,
    }


def _bounds_json(setup) -> dict:
    """Each held-out split's upper bound on the keyed uniform of its documents (splits.py)."""
    names = split_names(setup.config.split)
    return {names[index]: bound for index, bound in setup.split_bounds}


def shuffle_pass(shards, folder, work: Path, setup):
    """``--shuffle-rows``' second pass, on this machine: in object storage, the partitions' work files
    are fetched to the staging folder first, and the shuffled shards uploaded as they finish."""
    remote = folder is not None and folder.place.remote
    config = setup.config
    try:
        for name in (n for s in shards for n in s.files) if remote else ():
            folder.work_place.fetch(name, work)
        shuffled = shuffle_rows(
            shards,
            work,
            setup.columns,
            config.output_format,
            config.shard_limit,
            config.seed,
            publish=folder.work_place.publish if remote else None,
            provenance=list(setup.input_names()) if config.provenance else None,
        )
    except OSError as error:  # a full disk in the second pass is the same one line as in the first
        for partial in work.glob("shuffled-*.tmp"):  # the shard it was writing: a rerun redoes the pass
            partial.unlink(missing_ok=True)
        raise output_error(error, folder.place.where if folder else work) from None
    if remote:
        folder.work_place.flush()
    return shuffled


def warn_skips(results, warn) -> None:
    """Each reason records were skipped for, once, with its count and where the first was."""
    examples: dict[str, str] = {}
    counts: Counter = Counter()
    for result in results:
        counts.update(result.skipped)
        for reason, example in result.first_examples.items():
            examples.setdefault(reason, example)
    for reason, example in examples.items():
        noun = "record" if counts[reason] == 1 else "records"
        warn(f"skipped {counts[reason]:,} {noun} ({reason}); first at {example}")


def check_totals(manifest: dict, setup, warn) -> None:
    """The accounting balances (documents in = written + skipped), a run where every record was bad
    fails, and each counter the pipeline or the objective declares a warning for is said."""
    t = manifest["totals"]
    if t["documents_read"] != t["documents_written"] + t["documents_skipped"]:
        raise AssertionError("document accounting does not balance")  # a bug, never bad input
    if every_record_bad(t, setup.objective.records_hint):
        raise ObjcliError(every_record_bad(t, setup.objective.records_hint))
    if not warn:
        return
    pieces = manifest["special_tokens"]["pieces"]
    for counter, message in {**RUN_WARNINGS, **setup.objective.warnings}.items():
        if t.get(counter):
            warn(message.format(count=t[counter], bos=pieces.get("bos", "")))
    if not t["rows"]:
        warn(why_no_rows(t, setup.config.seq_len, remainder_hint(manifest["config"])))
    if setup.config.source and setup.config.format.blends_sources:
        warn_unblended(manifest, warn)
    for name, source in manifest.get("mixture", {}).items():
        if source["documents_read"] and not source["documents_written"]:
            warn(
                f"source {name}: none of its {source['documents_read']:,} documents was written: its share or budget "
                "is smaller than any one of them (a budget is whole documents); raise it, or leave the source out"
            )


def warn_unblended(manifest: dict, warn) -> None:
    """A split that holds no tokens of a source: the trainer's blend for it is over the others."""
    sources = {p["index"]: p["source"] for p in manifest["partitions"]}
    held: dict[str, set] = {}
    for shard in manifest["shards"]:
        if shard["tokens"]:
            held.setdefault(shard["split"], set()).add(sources[shard["partition"]])
    for split, present in held.items():
        for source in manifest["mixture"]:
            if source not in present:
                warn(
                    f"{split or 'the output'} holds no tokens of source {source}: its blend file weighs the other "
                    "sources alone (give that source more documents, or a larger split)"
                )


JOINED = -1  # joined shards' ordinals count down from here (a partition's own count up from 0)


def join_prefixes(shards: list, folder, work: Path, setup) -> list:
    """A format whose loader reads a split's few files (Megatron: one ``GPTDataset`` split per prefix; the
    released packed-SFT readers: one ``.npy``) gets its shards as few and large as its ``join_limit``
    says, not one per partition: each split's (and a mixture source's) shards joined in order up to the
    limit by the format's ``join``. The partitions' own files stay in the work folder until the output
    is published, so a crash before then reruns the join from them; in object storage they are fetched
    to the staging folder first and the joined files uploaded, so a bucket holds the bytes a local
    folder does."""
    config = setup.config
    output_format = config.format
    if not output_format.joins_shards or folder is None or config.shuffle_pass:
        return shards
    remote = folder.place.remote
    from ..storage.shard_info import work_prefix

    source = {p.index: p.source for p in setup.partitions}
    keys: dict[tuple, list] = {}
    for shard in shards:
        keys.setdefault((shard.split, source.get(shard.partition, "")), []).append(shard)
    fetched: set[str] = set()
    joined = []
    ordinal = min([JOINED, *(s.ordinal - 1 for s in shards)])  # below any joined before (an appended output's)
    limit = output_format.join_limit(config)
    for group in (g for same in keys.values() for g in _up_to(same, limit, output_format)):
        if len(group) == 1 and group[0][1:] == (0, group[0][0].rows):
            joined.append(group[0][0])
            continue
        first = group[0][0]
        for name in (n for shard, _, _ in group for n in shard.files if n not in fetched) if remote else ():
            folder.work_place.fetch(name, work)
            fetched.add(name)
        pieces = [(work, shard, start, stop) for shard, start, stop in group]
        prefix = work_prefix(first.partition, first.split, ordinal)
        shard = output_format.join(pieces, work, prefix, first.partition, ordinal)
        for name in shard.files if remote else ():
            folder.work_place.publish(work / name)
        joined.append(shard)
        ordinal -= 1
    if remote:
        folder.work_place.flush()
    return joined  # each split's (and source's) in the order of its rows: final_names numbers them so


def _up_to(shards: list, limit, output_format) -> list[list[tuple]]:
    """Consecutive runs of the shards' rows, as (shard, first row, end row) pieces, each run within the
    limit (rows or bytes), never empty. A limit in rows over shards a join may cut between rows (Megatron's
    of whole documents) fills every run to exactly that many rows, so a split gets ceil(rows / limit)
    prefixes whatever its partitions' sizes; else shards stay whole."""
    if limit.rows and not limit.bytes and all(output_format.cuts_between_rows(s) for s in shards):
        return _rows_of(shards, limit.rows)
    groups, rows, size = [[]], 0, 0
    for shard in shards:
        grown = sum(shard.bytes.values())
        full = (limit.rows and rows + shard.rows > limit.rows) or (limit.bytes and size + grown > limit.bytes)
        if groups[-1] and full:
            groups.append([])
            rows = size = 0
        groups[-1].append((shard, 0, shard.rows))
        rows, size = rows + shard.rows, size + grown
    return [g for g in groups if g]


def _rows_of(shards: list, each: int) -> list[list[tuple]]:
    """The shards' rows in runs of ``each`` (the last the rest)."""
    groups, room = [[]], each
    for shard in shards:
        start = 0
        while start < shard.rows:
            if room == 0:
                groups.append([])
                room = each
            stop = min(shard.rows, start + room)
            groups[-1].append((shard, start, stop))
            room -= stop - start
            start = stop
    return [g for g in groups if g]
