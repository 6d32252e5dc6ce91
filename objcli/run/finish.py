"""The manifest of a finished run: what ``transform`` writes last, from its plan and results."""

from __future__ import annotations

from .. import __version__
from ..formats import FORMATS
from ..order.mixture import mixture_totals
from ..order.splits import split_names
from ..recipe import recipe_of
from ..storage.manifest import MANIFEST_VERSION, split_totals, totals
from ..storage.remote import public_url, tokenizer_location


def build_manifest(plan, results: list, shards, run_key: str) -> dict:
    """The manifest of a finished run; ``shards`` are the run's, named as they will be."""
    config, tokenizer = plan.config, plan.tokenizer
    return {
        "objcli_version": __version__,
        "manifest_version": MANIFEST_VERSION,
        "complete": True,
        "objective": plan.objective.name,
        "supervision": plan.objective.supervision,
        "config": config.to_json(),
        "recipe": recipe_of(config, with_output=False),
        "config_sha256": plan.fingerprint,
        "run_key": run_key,  # configuration + every input's size and mtime: a rerun over changed inputs rebuilds
        "seed": config.seed,
        "tokenizer": {
            "kind": tokenizer.kind,
            "path": tokenizer_location(config.tokenizer),
            "sha256": tokenizer.sha256,
            "vocab_size": tokenizer.vocab_size,
            "total_vocab_size": tokenizer.total_vocab_size,
            "engine": tokenizer.engine_choice.to_json(),
        },
        "identity": plan.identity,
        "special_tokens": tokenizer.special.to_json(),
        "format": config.output_format,
        "columns": [c.to_json() for c in FORMATS[config.output_format].stored_columns(plan.columns)],
        "inputs": [
            {"path": public_url(f.path), "format": f.format, "compression": f.compression, "bytes": f.size} for f in plan.files
        ],
        "partitions": [
            {
                **p.to_json(),
                "documents_read": r.documents_read,
                "documents_written": r.documents_written,
                "documents_skipped": r.documents_skipped,
                "skipped_by_reason": r.skipped,
                "counters": r.counters,
                # With --shuffle-rows a partition's rows are spread over every shard.
                "shards": [] if config.shuffle_rows else [s.files[0] for s in r.shards],
            }
            for p, r in zip(plan.partitions, results)
        ],
        "shards": [s.to_json() for s in shards],
        "totals": totals(results, shards),
        **({"splits": split_totals(shards), "split_bounds": _bounds_json(plan)} if config.split else {}),
        **({"mixture": mixture_totals(plan.mixture, plan.partitions, results)} if config.source else {}),
    }


def _bounds_json(plan) -> dict:
    """Each held-out split's upper bound on the keyed uniform of its documents (splits.py)."""
    names = split_names(plan.config.split)
    return {names[index]: bound for index, bound in plan.split_bounds}
