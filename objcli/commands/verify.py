"""``objcli verify``: re-read a finished output and check it against its manifest.

Checks, shard by shard (one shard in memory at a time):

- every listed file exists and has the sha256 the manifest records, and no unlisted ``part-*``
  file lies beside them;
- the file parses; its schema (Arrow/Parquet types, npy dtypes, the Megatron index) matches the
  manifest's columns; its row count matches;
- invariants that follow from the columns' *roles* (never their names or the objective's):
  values within each column's range; segment ids, positions, attention masks and token types as
  long as the rows of their family; segment ids count up from 1 with padding (0) only at the end
  and positions restart at every segment; sentinels appear in order in labels, and the same in
  inputs where labels have a length of their own (encoder-decoder); labels are -100 on every
  prefix (per row or per segment); sentence pairs start with [CLS], close each segment with [SEP]
  and have an attention mask of ones then zeros;
- the totals: rows and shards add up to the manifest's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from ..formats import Column, format_of
from ..formats.provenance import provenance_file
from ..formats.store import STORE
from ..inputs.token_inputs.digests import changed_token_inputs
from ..order.mixture import manifest_blend
from ..reading.shards import stored_columns
from ..run.progress import phase
from ..storage.files import file_sha256
from ..storage.identity import check_identity
from ..storage.manifest import MANIFEST_NAME, Manifest, ShardRecord, read_manifest
from ..storage.output import is_shard_name
from .verify_roles import check_by_role

ALONGSIDE = ("segment_ids", "positions", "attention_mask", "token_type_ids")  # roles as long as their family


@dataclass
class Report:
    folder: Path
    shards: int = 0
    rows: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def line(self) -> str:
        if self.ok:
            return f"objcli verify: {self.folder}: {self.shards} shards, {self.rows:,} rows; every check passed"
        return (
            f"objcli verify: {self.folder}: {len(self.problems)} problem(s) in {self.shards} shards; "
            "rerun the transform with --overwrite to rebuild the output"
        )


def _added_identity_files(manifest) -> list[str]:
    """Files that a transform with the same options would read now beside the tokenizer and the run
    did not (a ``tokenizer_config.json`` or ``chat_template.jinja`` put there since): the transform
    refuses for them, so verify names them as it names an edited one."""
    from ..storage.remote import is_url
    from ..tokenizers import open_tokenizer

    path = manifest.identity.get("tokenizer", {}).get("path", "")
    if not path or is_url(path) or not Path(path).is_file():
        return []  # the output was moved to another machine: nothing here to compare
    try:
        beside = dict(open_tokenizer(path).side_files())
    except (ObjcliError, OSError, ValueError):
        return []  # an edited tokenizer is named by check_identity
    template = Path(path).with_name("chat_template.jinja")
    if manifest.config.get("objective") == "chat" and not manifest.config.get("chat_template") and template.is_file():
        beside["chat template"] = template
    recorded = {Path(entry["path"]).resolve() for entry in manifest.identity.values() if entry.get("path")}
    return [
        f"{what} {file}: added beside the tokenizer since the run, which read no such file; rerun the transform "
        "with --overwrite to rebuild the output with it"
        for what, file in beside.items()
        if Path(file).resolve() not in recorded
    ]


def _shard_kind(name: str) -> str:
    """What follows a shard's number: ``.arrow`` of ``part-00000-of-00002.arrow``."""
    return name[name.index("-of-") + len("-of-") + 5 :]


def verify_output(folder: str | Path) -> Report:
    folder = Path(folder)
    manifest = read_manifest(folder)
    report = Report(folder)
    listed = {name for shard in manifest.shards for name in shard.files}
    kinds = {_shard_kind(name) for name in listed}  # a user's data-00000-of-00001.csv is none of objcli's
    for path in sorted(p for p in folder.iterdir() if is_shard_name(p.name) and _shard_kind(p.name) in kinds):
        if path.name not in listed:
            report.problems.append(f"{path.name}: not listed in the manifest (left by another run?)")
    shown = phase("verify", len(manifest.shards), "shards")
    for shard in manifest.shards:
        shown.update(1)
        report.shards += 1
        problems = _check_files(folder, shard)
        if not problems:
            try:
                columns = stored_columns(folder, manifest, shard)
            except Exception as error:  # any parse failure of a damaged file is a finding, not a crash
                columns = None
                problems = [
                    f"cannot be read ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})"
                ]
            if columns is not None:
                problems = _check_columns(manifest, shard, columns) + _check_provenance(folder, manifest, shard)
                report.rows += shard.rows
        report.problems += [f"{shard.files[0]}: {p}" for p in problems]
    shown.close()
    report.problems += _check_format_files(folder, manifest)
    report.problems += check_identity(manifest.identity)  # the template and configs, where they are here
    report.problems += _added_identity_files(manifest)
    report.problems += changed_token_inputs(manifest.inputs)
    report.problems += _store_problems(folder, manifest)
    totals = manifest.totals
    if totals["shards"] != len(manifest.shards):
        report.problems.append(f"manifest: totals say {totals['shards']} shards, {len(manifest.shards)} listed")
    if totals["rows"] != sum(s.rows for s in manifest.shards):
        report.problems.append("manifest: totals.rows is not the sum of the shards' rows")
    return report


def _check_format_files(folder: Path, manifest: Manifest) -> list[str]:
    """The files a format's loader opens besides the shards (Megatron's data-args lists, the HF
    saved-dataset files) follow from the manifest: each must be there, byte for byte (an edited
    ``megatron.txt`` could send a trainer anywhere)."""
    expected = format_of(manifest.format).side_files(
        manifest.shards, manifest.columns, manifest.config_sha256, manifest_blend(manifest)
    )
    problems = []
    for name, text in expected.items():
        path = folder / name
        if not path.is_file():
            problems.append(f"{name} is missing (the format's loader opens it)")
        elif path.read_bytes() != text.encode():
            problems.append(f"{name}: differs from what the manifest's shards make it (edited after the run?)")
    return problems


def _check_provenance(folder: Path, manifest: Manifest, shard: ShardRecord) -> list[str]:
    """With --provenance: the shard's provenance file gives every row at least one span, rows in range."""
    if not manifest.config.get("provenance") or manifest.format == STORE:  # a store keeps origins in its columns
        return []
    name = provenance_file(shard)
    if name is None:
        return ["has no provenance file (the run was made with --provenance)"]
    from ..formats._arrow_columns import column_numpy, read_parquet

    try:
        table = read_parquet(folder / name, ["row", "start", "end"])
    except Exception as error:  # noqa: BLE001 - a damaged file is a finding
        return [f"{name} cannot be read ({type(error).__name__})"]
    rows = column_numpy(table.column("row"))
    if len(np.unique(rows)) != shard.rows or (len(rows) and (rows.min() < 0 or rows.max() >= shard.rows)):
        return [f"{name}: spans do not name each of the shard's {shard.rows} rows"]
    if np.any(column_numpy(table.column("end")) < column_numpy(table.column("start"))):
        return [f"{name}: a span ends before it starts"]
    return []


def _check_files(folder: Path, shard: ShardRecord) -> list[str]:
    problems = []
    for name, digest in shard.sha256.items():
        path = folder / name
        if not path.exists():
            problems.append(f"{name} is missing")
        elif file_sha256(path) != digest:
            problems.append(f"{name}: sha256 differs from the manifest (changed or truncated after it was written)")
    return problems


def _check_columns(manifest: Manifest, shard: ShardRecord, columns: dict[str, Column]) -> list[str]:
    problems = []
    specs = {c.name: c for c in manifest.columns}
    rows = {name: len(c.offsets) - 1 for name, c in columns.items()}
    if set(rows.values()) != {shard.rows}:
        return [f"holds {sorted(set(rows.values()))} rows, the manifest says {shard.rows}"]
    for name, column in columns.items():
        spec = specs[name]
        if spec.kind == "value":  # strings and records: no range to check
            continue
        values = column.values
        if len(values) and (values.min() < spec.min_value or values.max() > spec.max_value):
            problems.append(f"{name} has values outside [{spec.min_value}, {spec.max_value}]")
        if spec.kind == "fixed" and len(set(column.lengths.tolist())) > 1:
            problems.append(f"{name} is a fixed-length column with rows of different lengths")
    for spec in specs.values():
        family = spec.family
        if spec.role in ALONGSIDE and family in columns and spec.name in columns:
            if not np.array_equal(columns[family].lengths, columns[spec.name].lengths):
                problems.append(f"{spec.name} rows are not as long as the {family} rows")
    if problems:
        return problems  # the structural checks below assume aligned columns
    return problems + check_by_role(manifest, specs, columns)


def _store_problems(folder: Path, manifest: Manifest) -> list[str]:
    """A token store's own rules (partitions, counts; ``inputs/token_store.py`` refuses a derived run
    over one that breaks them) and its text inputs, where here, unchanged since it was tokenized."""
    from ..inputs.store_checks import check_store_sections
    from ..storage.identity import changed_store_inputs

    if manifest.format != STORE:
        return []
    raw = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    try:
        check_store_sections(raw, f"{folder}/{MANIFEST_NAME}")
    except ObjcliError as error:
        return [str(error)]
    return changed_store_inputs(str(folder), raw["inputs"])
