"""``objcli trace OUT ROW``: where the segments of one row come from, from an output written with
``--provenance`` (``formats/provenance.py``): each segment's input file, record and character span,
and the text itself where the file can still be read (read as the run read it: the same format,
text field and text unit)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from ..formats import format_of
from ..formats.provenance import provenance_file
from ..formats.store import STORE
from ..inputs.token_inputs import is_token_input
from ..storage.manifest import Manifest, read_manifest


def _shard_of(manifest: Manifest, row: int, split: str | None):
    """(the shard holding the split's ``row``-th row, the row's index in it)."""
    splits = list(dict.fromkeys(s.split for s in manifest.shards))
    if split is None:
        if len(splits) > 1:
            raise ObjcliError(f"trace: the output has splits {', '.join(splits)}; name one with --split")
        split = splits[0] if splits else ""
    elif split not in splits:
        raise ObjcliError(f"trace: --split {split}: the output's splits are {', '.join(s or '(none)' for s in splits)}")
    shards = [s for s in manifest.shards if s.split == split]
    total = sum(s.rows for s in shards)
    if not 0 <= row < total:
        raise ObjcliError(f"trace: row {row}: the {split or 'output'}'s rows are 0 to {total - 1}")
    if format_of(manifest.format).packs_positions and manifest.config.get("shuffle_rows"):
        from ..reading.shuffled import ShuffledOrder  # a shuffled plan's row: made from the row in order

        row = ShuffledOrder(shards, int(manifest.config.get("seed", 0))).natural(row)
    for shard in shards:
        if row < shard.rows:
            return shard, row
        row -= shard.rows
    raise AssertionError("unreachable: the rows add up")


def trace(folder: str | Path, row: int, split: str | None = None) -> list[dict]:
    """Each span of the row: ``file``, ``record``, ``chars`` ([start, end) in the record's text),
    ``segment``, and ``copy`` (a mixture's repetition)."""
    from ..formats._arrow_columns import column_numpy, int_array, read_parquet

    folder = Path(folder)
    manifest = read_manifest(folder)
    if manifest.config.get("token_store"):  # its rows are documents, not rows a trainer reads
        how = "" if manifest.config.get("provenance") else " (tokenize with --provenance to keep them)"
        raise ObjcliError(
            f"trace: {folder} is a token store, whose documents keep their origins{how}; derive an output from "
            f"it with --provenance (objcli transform {folder} ... --provenance -o OUT) and trace OUT's rows"
        )
    if not manifest.config.get("provenance"):
        raise ObjcliError(f"trace: {folder} was written without --provenance; rerun the transform with it")
    shard, index = _shard_of(manifest, row, split)
    name = provenance_file(shard)
    if name is None:
        raise ObjcliError(f"trace: {shard.files[0]} has no provenance file; run 'objcli verify {folder}'")
    from ..storage.files import file_sha256

    if file_sha256(folder / name) != shard.sha256.get(name):  # swapped or edited: its origins would be another's
        raise ObjcliError(
            f"trace: {name} does not match what the manifest records; run 'objcli verify {folder}' and rebuild the "
            "output (the transform with --overwrite)"
        )
    table = read_parquet(folder / name)
    spans = np.flatnonzero(column_numpy(table.column("row")) == index)  # pc.equal with a number imports pandas
    rows = table.take(int_array(spans, np.int64)).to_pylist()
    tokenized = {i["path"] for i in input_entries(manifest) if is_token_input(i.get("format"))}
    return [
        {"file": r["file"], "record": r["record"], "segment": r["segment"]}
        | {"tokens" if r["file"] in tokenized else "chars": [r["start"], r["end"]]}
        | ({"copy": r["copy"]} if r["copy"] else {})
        for r in rows
    ]


def record_texts(manifest: Manifest, path: str, records: set[int], source: str = "") -> dict[int, str]:
    """The texts of some records of one file as the run read them, in one pass over it (none where the
    file cannot be read now)."""
    from ..inputs import RecordLog, group_members, text_files
    from ..inputs.pieces import Piece
    from ..inputs.text_batches import read_piece

    config, found = manifest.config, {}
    try:
        requested = config.get("input_format", "auto")
        (input_file,) = text_files(group_members([path], requested), requested)
        for texts in read_piece(Piece(input_file), _read_options(config, source), RecordLog()):
            found.update((text.record, str(text)) for text in texts if text.record in records)
            if len(found) == len(records):
                break
    except (ObjcliError, OSError, ValueError):
        return {}
    return found


def input_entries(manifest: Manifest) -> list[dict]:
    """The manifest's inputs, a token store's replaced by the files it was tokenized from, as the
    store's own manifest records them (what a derived run's provenance names), a mixture's source
    carried over."""
    from ..inputs.token_store import store_manifest

    entries = []
    for entry in manifest.inputs:
        try:
            stored = store_manifest(entry.get("resolved", entry["path"])) if entry.get("format") == STORE else None
        except ObjcliError:
            stored = None
        if stored is None:
            entries.append(entry)
            continue
        source = {"source": entry["source"]} if "source" in entry else {}
        entries += [{**inner, **source} for inner in stored["inputs"]]
    return entries


def source_of(manifest: Manifest, path: str) -> str:
    """The mixture's source a file was read for ('' outside a mixture), as the manifest records it."""
    entry = next((i for i in input_entries(manifest) if i.get("path") == path), {})
    return entry.get("source", "")


def _read_options(config: dict, source: str):
    from ..inputs import ReadOptions
    from ..objectives import REGISTRY
    from ..order.mixture import Mixture

    objective = REGISTRY.named(config.get("objective", "clm"))
    records = objective.reads(objective.options_type()).records  # chat: the record's JSON text, whatever options
    key = Mixture.of_text_key(config.get("text_key", "text")).text_key_of(source)
    return ReadOptions(key, config.get("text_unit", "line"), records=records, provenance=True)


def trace_lines(folder: str | Path, row: int, split: str | None = None) -> list[str]:
    """The row's spans for a person: a header per segment, then its text."""
    manifest = read_manifest(folder)
    spans = trace(folder, row, split)
    wanted: dict[str, set[int]] = {}
    for span in spans:
        wanted.setdefault(span["file"], set()).add(span["record"])
    texts, changed = _texts_of(manifest, wanted)
    lines = []
    for span in spans:
        copy = f", copy {span['copy']}" if span.get("copy") else ""
        if "tokens" in span:  # a tokenized input: a document of its ids, decoded
            start, end = span["tokens"]
            lines.append(
                f"── segment {span['segment']}: {span['file']} document {span['record']} "
                f"(0-based), tokens {start:,}-{end:,}{copy}"
            )
            shown = texts[span["file"]]
            lines.append(shown(span) if shown else f"(not shown: {changed[span['file']]})")
            continue
        start, end = span["chars"]
        lines.append(
            f"── segment {span['segment']}: {span['file']} record {span['record']} "
            f"(0-based), characters {start:,}-{end:,}{copy}"
        )
        text = texts.get((span["file"], span["record"]))
        if changed[span["file"]]:
            lines.append(f"(not shown: {changed[span['file']]})")
        else:
            lines.append(text[start:end] if text is not None else "(the file cannot be read here)")
    return lines


def _texts_of(manifest: Manifest, wanted: dict[str, set[int]]) -> tuple[dict, dict[str, str]]:
    """(the texts of the records wanted, by (file, record); a tokenized input's by file, a function
    of the span), and for each file why it cannot be shown ("" where it can)."""
    tokenized = {i["path"]: i for i in input_entries(manifest) if is_token_input(i.get("format"))}
    texts, changed = {}, {}
    for path, records in wanted.items():
        if path in tokenized:
            changed[path] = _token_input_changed(tokenized[path])
            texts[path] = None if changed[path] else _token_texts(manifest, tokenized[path])
            continue
        where, changed[path] = _source_as_run(manifest, path)
        if not changed[path]:
            texts.update(
                ((path, r), t) for r, t in record_texts(manifest, where, records, source_of(manifest, path)).items()
            )
    return texts, changed


def _token_input_changed(entry: dict) -> str:
    """Why a tokenized input's spans cannot be shown: its files differ from the ones the run read."""
    from ..inputs.token_inputs.digests import token_input_digests

    where = entry.get("resolved", entry["path"])
    try:
        now = token_input_digests(where, entry["format"])
    except (ObjcliError, OSError, ValueError, KeyError):
        return f"{where} is gone since the run"
    if "sha256" in entry and now != entry["sha256"]:
        return f"{where} changed since the run (its files' sha256 differ); rerun to trace it"
    return ""


def _token_texts(manifest: Manifest, entry: dict):
    """A tokenized input's spans as text: the document's ids at the span, decoded with the run's
    tokenizer (None where the file or the tokenizer cannot be read here)."""
    from ..inputs.token_inputs import open_token_file, readable_path, token_format
    from ..inputs.token_inputs.partitions import leading_framing
    from ..order.mixture import Mixture
    from .show import load_output_tokenizer

    try:
        tokenizer = load_output_tokenizer(manifest, None)
        eos = tokenizer.special.ids.get("eos", tokenizer.model_role_id("eos"))
        key = Mixture.of_text_key(manifest.config.get("text_key", "text")).ids_key(entry.get("source", ""))
        where = entry.get("resolved", entry["path"])
        opened = open_token_file(readable_path(where, entry["format"]), entry["format"], key, eos)
    except (ObjcliError, OSError, KeyError, ValueError):
        return lambda span: "(the file cannot be read here)"
    lead = leading_framing(
        opened, "each" if token_format(entry["format"]).splits_at_eos else "", eos
    )  # llm.c's first EOS

    def text(span: dict) -> str:
        first = int(opened.offsets[span["record"] + lead])
        start, end = span["tokens"]
        return tokenizer.decode(np.asarray(opened.tokens[first + start : first + end], dtype=np.int64))

    return text


def _source_as_run(manifest: Manifest, path: str) -> tuple[str, str]:
    """(where the input the run read is now, why its text cannot be trusted: "" when it is the same
    file, by the size and modification time the manifest recorded)."""
    import os

    from ..storage.identity import input_changed

    entry = next((i for i in input_entries(manifest) if i.get("path") == path), None)
    if entry is None or "resolved" not in entry:
        return path, ""  # a stream, object storage, or a manifest from before objcli recorded where
    where, why = entry["resolved"], input_changed(entry)
    return where, f"{why}; rerun to trace it" if why and os.path.exists(where) else why
