"""``manifest.json``: what a run read, how it was configured, and what it wrote.

Written last and atomically: a folder whose manifest says ``"complete": true`` holds exactly the
shards it lists, with the sha256 it lists.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1


def totals(results) -> dict:
    skipped: Counter = Counter()
    counters: Counter = Counter()
    for result in results:
        skipped.update(result.skipped)
        counters.update(result.counters)
    shards = [s for r in results for s in r.shards]
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


def read_manifest(folder: str | Path) -> dict:
    from .errors import ObjcliError

    path = Path(folder) / MANIFEST_NAME
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        raise ObjcliError(
            f"{folder}: no {MANIFEST_NAME}; name a folder written by 'objcli transform' that finished"
        ) from None
    except json.JSONDecodeError as error:
        raise ObjcliError(f"{path}: not valid JSON ({error}); the run that wrote it did not finish") from None
    if not manifest.get("complete"):
        raise ObjcliError(f"{path}: the run did not complete; rerun 'objcli transform'")
    return manifest
