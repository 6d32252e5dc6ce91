"""The output's ``README.md``: a Hugging Face dataset card made from the manifest.

YAML front matter with ``configs`` (each split's ``data_files``, by the shards' names, so
``datasets.load_dataset(OUT)`` loads every split, whatever its name) and ``dataset_info`` (features
and their dtypes, bytes and rows per split), then a short text: the command, the tokenizer, the
objective and its options, the accounting, the mixture, packing. Every figure is the manifest's.
A ``README.md`` objcli did not write (no ``MARKER``) is the user's and is never overwritten.
"""

from __future__ import annotations

import json

from . import FORMATS

CARD_NAME = "README.md"
MARKER = "<!-- written by objcli from manifest.json: rewritten with it; remove this line to keep your edits -->"


def is_ours(text: str | None) -> bool:
    return text is None or MARKER in text


def card_files(place, manifest: dict, warn=None) -> dict[str, str]:
    """``{"README.md": card}`` to write with the output's format files, unless the folder holds a
    README.md of the user's own (said once through ``warn``)."""
    if is_ours(place.read_text(CARD_NAME)):
        return {CARD_NAME: dataset_card(manifest)}
    if warn:
        warn(
            f"output {place.where}: kept your {CARD_NAME}; the dataset card was not written (remove the file, or "
            "compare it with 'objcli stats')"
        )
    return {}


def dataset_card(manifest: dict) -> str:
    return "---\n" + _front_matter(manifest) + "---\n\n" + _text(manifest)


def _q(value) -> str:
    """A YAML scalar: JSON's quoting is valid YAML."""
    return json.dumps(value, ensure_ascii=False)


def _splits(manifest: dict) -> dict[str, list[dict]]:
    shards: dict[str, list[dict]] = {}
    for shard in manifest["shards"]:
        shards.setdefault(shard.get("split") or "train", []).append(shard)
    return shards


def _value_lines(value_type, indent: str) -> list[str]:
    """A value column's type in the card's YAML, as the Hub writes nested features (``struct:`` a list
    of named fields, ``list:`` its item's)."""
    if isinstance(value_type, str):
        return [f"{indent}dtype: {_q(value_type)}"]
    kind, inner = value_type
    if kind == "list":
        if isinstance(inner, str):
            return [f"{indent}sequence: {_q(inner)}"]
        if inner[0] == "struct":  # a list of records: the fields' list under ``list:``
            return [f"{indent}list:", *_value_lines(inner, indent)[1:]]
        return [f"{indent}list:", *_value_lines(inner, indent + "  ")]  # a list of lists
    lines = [f"{indent}struct:"]
    for name, field in inner:
        lines.append(f"{indent}- name: {_q(name)}")
        lines += _value_lines(field, indent + "  ")
    return lines


def _feature_lines(column: dict) -> list[str]:
    """A column's feature in the card's YAML: a named category is a class label (int64 on disk)."""
    if column["kind"] == "value":
        return _value_lines(column["value_type"], "    ")
    if column.get("role") == "category" and column["kind"] == "scalar" and column.get("categories"):
        names = [f"          {_q(str(i))}: {_q(name)}" for i, name in enumerate(column["categories"])]
        return ["    dtype:", "      class_label:", "        names:", *names]
    kind = "dtype" if column["kind"] == "scalar" else "sequence"
    length = [f"    length: {column['length']}"] if column.get("length") else []  # a fixed-size list
    return [f"    {kind}: {_q(column.get('disk_dtype', 'int32'))}", *length]


def _front_matter(manifest: dict) -> str:
    splits = _splits(manifest)
    lines = []
    stored = FORMATS.get(manifest["format"])
    if stored is not None and stored.hub_loadable and splits:
        lines += ["configs:", "- config_name: default", "  data_files:"]
        for name, shards in splits.items():
            lines += [f"  - split: {_q(name)}", "    path:"] + [f"    - {_q(s['files'][0])}" for s in shards]
    lines += ["dataset_info:", "  features:"]
    for column in manifest["columns"]:
        lines += [f"  - name: {_q(column['name'])}", *_feature_lines(column)]
    lines += ["  splits:"]
    total = 0
    for name, shards in splits.items():
        size = sum(sum(s.get("bytes", {}).values()) for s in shards)
        total += size
        lines += [
            f"  - name: {_q(name)}",
            f"    num_bytes: {size}",
            f"    num_examples: {sum(s['rows'] for s in shards)}",
        ]
    lines += [f"  dataset_size: {total}", "tags:", "- objcli", f"- {_q(manifest['objective'])}"]
    return "\n".join(lines) + "\n"


def _text(manifest: dict) -> str:
    t, tokenizer, special = manifest["totals"], manifest["tokenizer"], manifest["special_tokens"]
    # A transform's own command line (from its manifest); a merged or resharded output has none.
    command = manifest.get("command") or "objcli merge / reshard of earlier outputs: see manifest.json"
    ids = ", ".join(f"{role} {special['pieces'].get(role, '')!s} = {i}" for role, i in special["ids"].items())
    skipped = ", ".join(f"{n:,} {reason}" for reason, n in t["skipped_by_reason"].items()) or "none"
    parts = [
        MARKER,
        f"# {manifest['objective']} shards",
        f"Training-ready shards for the `{manifest['objective']}` objective in the `{manifest['format']}` format, "
        f"written by objcli {manifest.get('objcli_version', '')}; `manifest.json` beside this card records everything, "
        "and `objcli transform --recipe manifest.json -o OUT` makes them again.",
        "## How they were made",
        f"```\n{command}\n```",
        f"- Tokenizer: `{tokenizer['path']}` ({tokenizer['kind']}, sha256 `{tokenizer['sha256']}`), "
        f"{tokenizer['vocab_size']:,} ids ({tokenizer['total_vocab_size']:,} with the specials added); "
        f"special ids: {ids}.",
        f"- Objective: `{manifest['objective']}`, "
        f"options {json.dumps(manifest['config'].get('objective_options', {}))}; "
        f"seed {manifest.get('seed', 0)}.",
        "## What is in them",
        f"- Documents: {t['documents_read']:,} read, {t['documents_written']:,} written, "
        f"{t['documents_skipped']:,} skipped ({skipped}).",
        f"- Rows: {t['rows']:,} in {t['shards']:,} shards; {t['tokens']:,} tokens, {t['padding_tokens']:,} padding "
        f"({100 * t['padding_fraction']:.2f}%), {t['mean_segments_per_row']:.2f} segments per row, "
        f"{t['documents_split']:,} documents split across rows.",
    ]
    for name, split in (manifest.get("splits") or {}).items():
        parts.append(f"- Split `{name}`: {split['rows']:,} rows, {split['tokens']:,} tokens.")
    for name, source in (manifest.get("mixture") or {}).items():
        parts.append(f"- Source `{name}`: {json.dumps(source, sort_keys=True)}.")
    return "\n\n".join(parts) + "\n"
