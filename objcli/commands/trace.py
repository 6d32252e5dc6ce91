"""``objcli trace OUT ROW``: where the segments of one row come from, from an output written with
``--provenance`` (``formats/provenance.py``): each segment's input file, record and character span,
and the text itself where the file can still be read (read as the run read it: the same format,
text field and text unit)."""

from __future__ import annotations

from pathlib import Path

from ..errors import ObjcliError
from ..formats.provenance import provenance_file
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
    for shard in shards:
        if row < shard.rows:
            return shard, row
        row -= shard.rows
    raise AssertionError("unreachable: the rows add up")


def trace(folder: str | Path, row: int, split: str | None = None) -> list[dict]:
    """Each span of the row: ``file``, ``record``, ``chars`` ([start, end) in the record's text),
    ``segment``, and ``copy`` (a mixture's repetition)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    folder = Path(folder)
    manifest = read_manifest(folder)
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
    table = pq.read_table(folder / name)
    rows = table.filter(pc.equal(table.column("row"), index)).to_pylist()
    return [
        {"file": r["file"], "record": r["record"], "chars": [r["start"], r["end"]], "segment": r["segment"]}
        | ({"copy": r["copy"]} if r["copy"] else {})
        for r in rows
    ]


def record_texts(manifest: Manifest, path: str, records: set[int], source: str = "") -> dict[int, str]:
    """The texts of some records of one file as the run read them, in one pass over it (none where the
    file cannot be read now)."""
    from ..readers import RecordLog, resolve_inputs
    from ..readers.documents import read_piece
    from ..readers.inputs import Piece

    config, found = manifest.config, {}
    try:
        (input_file,) = resolve_inputs([path], config.get("input_format", "auto"))
        for texts in read_piece(Piece(input_file), _read_options(config, source), RecordLog()):
            found.update((text.record, str(text)) for text in texts if text.record in records)
            if len(found) == len(records):
                break
    except (ObjcliError, OSError, ValueError):
        return {}
    return found


def source_of(manifest: Manifest, path: str) -> str:
    """The mixture's source a file was read for ('' outside a mixture), as the manifest records it."""
    entry = next((i for i in manifest.inputs if i.get("path") == path), {})
    return entry.get("source", "")


def _read_options(config: dict, source: str):
    from ..objectives import REGISTRY
    from ..order.mixture import text_key_of
    from ..readers import ReadOptions

    records = REGISTRY.get(config.get("objective", "clm")).reads_records  # chat: the record's JSON text
    key = text_key_of(config.get("text_key", "text"), source)
    return ReadOptions(key, config.get("text_unit", "line"), records=records, provenance=True)


def trace_lines(folder: str | Path, row: int, split: str | None = None) -> list[str]:
    """The row's spans for a person: a header per segment, then its text."""
    manifest = read_manifest(folder)
    spans = trace(folder, row, split)
    wanted: dict[str, set[int]] = {}
    for span in spans:
        wanted.setdefault(span["file"], set()).add(span["record"])
    texts, changed = {}, {}
    for path, records in wanted.items():
        where, changed[path] = _source_as_run(manifest, path)
        if not changed[path]:
            texts.update(
                ((path, r), t) for r, t in record_texts(manifest, where, records, source_of(manifest, path)).items()
            )
    lines = []
    for span in spans:
        start, end = span["chars"]
        copy = f", copy {span['copy']}" if span.get("copy") else ""
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


def _source_as_run(manifest: Manifest, path: str) -> tuple[str, str]:
    """(where the input the run read is now, why its text cannot be trusted: "" when it is the same
    file, by the size and modification time the manifest recorded)."""
    import os

    entry = next((i for i in manifest.inputs if i.get("path") == path), None)
    if entry is None or "resolved" not in entry:
        return path, ""  # a stream, object storage, or a manifest from before objcli recorded where
    where = entry["resolved"]
    try:
        stat = os.stat(where)
    except OSError:
        return where, f"{where} is gone since the run"
    if stat.st_size != entry.get("bytes") or stat.st_mtime_ns != entry.get("modified_ns"):
        return where, f"{where} changed since the run (its size or modification time differs); rerun to trace it"
    return where, ""
