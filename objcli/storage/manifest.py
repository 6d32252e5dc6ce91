"""``manifest.json``: what a run read, how it was configured, and what it wrote.

Written last and atomically: a folder whose manifest says ``"complete": true`` holds exactly the
shards it lists, with the sha256 it lists.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import msgspec

from .shard_info import ShardRecord

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1


def arrow_dtype(arrow_type: str):
    """A manifest column's NumPy dtype (``list<item: uint16>``, ``fixed_size_list<item: uint16>[2048]``
    -> uint16); None for a value column."""
    import numpy as np

    name = re.sub(r"^(fixed_size_)?list<item: (\w+)>(\[\d+\])?$", r"\2", arrow_type)
    try:
        return np.dtype(name)
    except (TypeError, ValueError):  # a value column's type (a struct, a string): no dtype
        return None


def totals(results, shards) -> dict:
    skipped: Counter = Counter()
    counters: Counter = Counter()
    for result in results:
        skipped.update(result.skipped)
        counters.update(result.counters)
    rows = sum(s.rows for s in shards)
    tokens = sum(s.tokens for s in shards)
    padding = sum(s.padding_tokens for s in shards)
    read = sum(r.documents_read for r in results)
    written = sum(r.documents_written for r in results)
    split = counters.get("documents_split", 0)
    return {
        "documents_read": read,
        "documents_written": written,
        "documents_skipped": sum(skipped.values()),
        "skipped_by_reason": dict(sorted(skipped.items())),
        "rows": rows,
        "shards": len(shards),
        "tokens": tokens,
        "padding_tokens": padding,
        "padding_fraction": padding / (tokens + padding) if tokens + padding else 0.0,
        "mean_segments_per_row": sum(s.segments for s in shards) / rows if rows else 0.0,
        "documents_split": split,
        "split_fraction": split / written if written else 0.0,
        "text_bytes": sum(r.text_bytes for r in results),
        **{k: v for k, v in sorted(counters.items()) if k != "documents_split"},
    }


def split_totals(shards) -> dict:
    """With --split: rows, tokens, shards and documents (those starting in the split's rows) per split."""
    splits: dict[str, Counter] = {}
    for shard in shards:
        counter = splits.setdefault(shard.split, Counter())
        counter.update({"rows": shard.rows, "tokens": shard.tokens, "shards": 1, "documents": shard.documents})
    return {name: dict(counter) for name, counter in splits.items()}


class ColumnInfo(msgspec.Struct, frozen=True):
    """One written column: its layout, its role (what stats, inspect and verify go by) and range."""

    name: str
    kind: str  # fixed, ragged or scalar
    arrow_type: str
    disk_dtype: str
    min_value: int
    max_value: int
    role: str = "tokens"
    family: str = "input_ids"
    description: str = ""
    categories: list[str] = []
    value_type: str | list | None = None  # a value column's (rows.ColumnSpec.value_type), as JSON keeps it
    length: int = 0  # a fixed column's values a row, where the run fixed it (rows.ColumnSpec.length)

    @classmethod
    def of(cls, spec, disk_dtype, arrow_type: str) -> ColumnInfo:
        """A written column (a ``rows.ColumnSpec``) as the manifest lists it."""
        return cls(
            spec.name,
            spec.kind,
            arrow_type,
            str(disk_dtype),
            spec.min_value,
            spec.max_value,
            spec.role,
            spec.family,
            spec.doc,
            list(spec.categories),
            getattr(spec, "value_type", None) or None,
            getattr(spec, "length", 0),
        )

    def to_json(self) -> dict:
        data = {
            "name": self.name,
            "kind": self.kind,
            "role": self.role,
            "family": self.family,
            "arrow_type": self.arrow_type,
            "disk_dtype": self.disk_dtype,
            "min_value": self.min_value,
            "max_value": self.max_value,
            "description": self.description,
        }
        data = {**data, "categories": self.categories} if self.categories else data
        data = {**data, "length": self.length} if self.length else data
        return {**data, "value_type": self.value_type} if self.value_type else data


class TokenizerRecord(msgspec.Struct, frozen=True):
    kind: str
    path: str
    sha256: str
    vocab_size: int
    total_vocab_size: int
    engine: dict = {}  # name, version, and how the parity probe proved it exact


class SpecialTokenRecord(msgspec.Struct, frozen=True):
    ids: dict[str, int]
    pieces: dict[str, str]
    added: dict[str, int]
    sentinels: list[int]


class Manifest(msgspec.Struct, frozen=True):
    """The schema of ``manifest.json`` as readers (stats, verify, inspect, shards, output) see it.
    ``config``, ``recipe``, ``totals`` and the partitions stay tables: their keys follow the
    options and the objectives' counters."""

    complete: bool
    objective: str
    config: dict
    config_sha256: str
    tokenizer: TokenizerRecord
    special_tokens: SpecialTokenRecord
    format: str
    columns: list[ColumnInfo]
    shards: list[ShardRecord]
    totals: dict
    objcli_version: str = ""
    manifest_version: int = MANIFEST_VERSION
    supervision: str = ""
    run_key: str = ""
    recipe: dict = {}
    identity: dict = {}  # every file the run read besides its inputs: {what: {path, sha256}} (storage/identity.py)
    seed: int = 0
    inputs: list[dict] = []
    partitions: list[dict] = []
    mixture: dict = {}  # --source: per source, what was asked, the estimate and the rate
    row_plan: dict = {}  # --format plan: the store its rows are made from (formats/row_plan.py)

    def columns_with_role(self, role: str, family: str | None = None) -> list[ColumnInfo]:
        return [c for c in self.columns if c.role == role and (family is None or c.family == family)]


def decode_manifest(data: bytes | dict, where: str) -> Manifest:
    """A manifest checked against the schema; anything else is one line naming what is wrong."""
    from ..errors import ObjcliError

    try:
        manifest = (
            msgspec.convert(data, Manifest) if isinstance(data, dict) else msgspec.json.decode(data, type=Manifest)
        )
    # ValidationError is a DecodeError; msgspec before 0.23 raises UnicodeDecodeError on invalid UTF-8.
    except (msgspec.DecodeError, UnicodeDecodeError) as error:
        raise ObjcliError(
            f"{where}: not an objcli manifest ({error}); point at a folder 'objcli transform' wrote"
        ) from None
    for column in manifest.columns:
        if column.length != fixed_length(column.arrow_type) or (column.length and column.kind != "fixed"):
            raise ObjcliError(
                f"{where}: column {column.name}'s length {column.length} does not match its type "
                f"{column.arrow_type} (a {column.kind} column); the manifest was edited: rebuild with --overwrite"
            )
    for shard in manifest.shards:
        for name in (*shard.files, *shard.sha256):
            if not is_plain_name(name):
                raise ObjcliError(
                    f"{where}: shard file {name!r} is not a file name inside the output folder; the "
                    "manifest was edited (objcli reads nothing outside the folder)"
                )
    return manifest


def fixed_length(arrow_type: str) -> int:
    """The row length a ``fixed_size_list<item: T>[N]`` type names (N); 0 for any other type."""
    found = re.fullmatch(r"fixed_size_list<.*>\[(\d+)\]", arrow_type)
    return int(found.group(1)) if found else 0


def reshard_converts(older, newer) -> bool:
    """Whether columns described as ``older`` (an Arrow type, or a list of column tuples naming them) are
    as an output written before took its current layout, which ``objcli reshard`` converts to ``newer``:
    int32 columns, or lists where ``newer`` has fixed-size lists."""
    older, newer = str(older), str(newer)
    return "int32" in older or ("fixed_size_list" in newer and "fixed_size_list" not in older)


def reshard_command(folder, manifest: Manifest) -> str:
    """The ``objcli reshard`` that converts an output in place, keeping its number of shards."""
    each = Counter(shard.split for shard in manifest.shards)
    return f"objcli reshard {folder} --num-shards {max(each.values(), default=1)}"


def final_prefix(name: str) -> str:
    """The shard part of a final file name: ``part-00003-of-00012`` of ``part-00003-of-00012.arrow``."""
    return name[: name.index("-of-") + len("-of-") + 5]


def is_plain_name(name: str) -> bool:
    """A file directly inside the output folder: no folder part, not empty, not '.' or '..'."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name and "\0" not in name


PENDING_RESHARD = ".objcli-reshard.json"  # an in-place reshard's commit record: the new manifest and the renames


def pending_reshard(folder: str | Path) -> str | None:
    """The error for an output whose in-place reshard was stopped past its commit point (the new
    shards are decided, the manifest not yet written): the same reshard again finishes it."""
    path = Path(folder) / PENDING_RESHARD
    if not path.is_file():
        return None
    try:
        size = json.loads(path.read_text(encoding="utf-8"))["manifest"]["resharded_from"]["shard_size"]
    except (OSError, ValueError, KeyError, TypeError):
        size = "the same size"
    how = f"--num-shards {size.split()[0]}" if str(size).endswith(" shards") else f"--shard-size {size}"
    return (
        f"{folder}: an in-place reshard was stopped after its commit point and has not finished; run "
        f"'objcli reshard {folder} {how}' again to finish it (nothing is lost)"
    )


def read_manifest(folder: str | Path) -> Manifest:
    return read_pinned_manifest(folder)[0]


def read_pinned_manifest(folder: str | Path) -> tuple[Manifest, ManifestPin]:
    """The manifest, and the pin of the bytes it was read from (``ManifestPin.check`` says later whether
    another run has replaced them)."""
    import os

    from ..errors import ObjcliError

    path = Path(folder) / MANIFEST_NAME
    try:
        with open(path, "rb") as file:
            data = file.read()
            pin = ManifestPin(path, hashlib.sha256(data).hexdigest(), _file_key(os.fstat(file.fileno())))
    except FileNotFoundError:
        pending = pending_reshard(folder)
        if pending:
            raise ObjcliError(pending) from None
        raise ObjcliError(
            f"{folder}: no {MANIFEST_NAME}; name a folder written by 'objcli transform' that finished"
        ) from None
    try:
        complete = msgspec.json.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError) as error:  # the latter: invalid UTF-8, msgspec < 0.23
        raise ObjcliError(f"{path}: not valid JSON ({error}); the run that wrote it did not finish") from None
    if not isinstance(complete, dict) or not complete.get("complete"):
        raise ObjcliError(f"{path}: the run did not complete; rerun 'objcli transform'")
    return decode_manifest(complete, str(path)), pin


def _file_key(stat) -> tuple[int, int, int, int]:
    return (stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size)


class ManifestPin:
    """The identity of the run a reader opened: its manifest's sha256. A run that replaces the output
    removes the manifest before any shard and writes the new one last (``storage/output.py``), so a
    shard read while the opened manifest is still in place is that run's."""

    def __init__(self, path: Path, sha256: str, key: tuple):
        self.path, self.sha256, self.key = path, sha256, key

    def check(self) -> None:
        """Refuse, in one line, when the manifest is gone or is another run's (a stat while it is not)."""
        import os

        from ..errors import ObjcliError

        try:
            if _file_key(os.stat(self.path)) == self.key:
                return
            with open(self.path, "rb") as file:
                same = hashlib.sha256(file.read()).hexdigest() == self.sha256
                key = _file_key(os.fstat(file.fileno()))
        except FileNotFoundError:
            same = False
        if not same:
            raise ObjcliError(
                f"{self.path.parent}: replaced by another run since this reader opened it ({MANIFEST_NAME} "
                "changed); open it again (a saved state of the old rows is refused)"
            )
        self.key = key  # the same bytes touched (a rerun with nothing to do stamps the manifest)
