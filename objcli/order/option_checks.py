"""The configuration's checks of what orders, splits, mixes and traces documents (``--split``,
``--source``/``--weights``/``--max-epochs``, the shuffles, ``--provenance``): each refused in one line
before anything runs. ``config`` is a ``TransformConfig`` (``config.py`` calls these when it is made)."""

from __future__ import annotations

from ..errors import ObjcliError
from ..formats.sizes import parse_bytes
from ..storage.remote import is_url


def check_order_options(config) -> None:
    """Splits, mixtures and shuffles."""
    if config.split:
        from .splits import parse_splits

        parse_splits(config.split)
        if config.output == "-":
            raise ObjcliError("--split writes one set of shards per split; write to an output folder with -o")
        refused = config.format.refuses_splits(is_url(config.output))
        if refused:
            raise ObjcliError(f"--format {config.output_format} --split: {refused}")
    if config.source or config.weights or config.max_epochs:
        _check_mixture(config)
    if config.shuffle_rows and config.output == "-":
        raise ObjcliError("--shuffle-rows needs every row before it writes the first; write to a folder with -o")
    if config.shuffle_documents is not None:
        parse_bytes(config.shuffle_documents, "--shuffle-documents")
    if config.provenance:
        _check_provenance(config)


def _check_provenance(config) -> None:
    from ..objectives import REGISTRY

    objective = REGISTRY.named(config.objective)
    if objective.provenance_of(config.objective_options) is None:
        takes = ", ".join(n for n in REGISTRY.names() if REGISTRY.named(n).provenance)
        raise ObjcliError(
            f"--provenance: {objective.name} rewrites its documents into examples this way, and their spans "
            f"are not recorded yet; it is recorded for {takes}"
        )
    if config.output == "-":
        raise ObjcliError("--provenance writes a file beside each shard; write to an output folder with -o")


def _check_mixture(config) -> None:
    if not (config.source and config.weights):
        raise ObjcliError("--source and --weights go together: name each source, then its share or budget")
    if config.inputs:
        raise ObjcliError("--source names every input of a mixture; drop the INPUTS, or give them as one more --source")
    if config.format.whole_documents and not config.format.blends_sources:
        raise ObjcliError(
            f"--format {config.output_format} stores input_ids only, so no row could say its source; "
            "choose arrow, parquet, npy, or megatron (each source's shards and the blend file Megatron reads)"
        )
    if config.shuffle_rows and config.format.blends_sources:
        raise ObjcliError(
            f"--shuffle-rows: --format {config.output_format} keeps each source's rows in shards of their own, "
            "weighed by the blend file, and Megatron shuffles its samples itself; drop --shuffle-rows"
        )
    if config.max_epochs and config.format.blends_sources:
        raise ObjcliError(
            f"--max-epochs {config.max_epochs}: --format {config.output_format} copies no document (Megatron "
            "repeats a source as its blend weight asks, at training time); drop it"
        )
    config.mixture  # noqa: B018 - parsed now: a bad weight or cap is said before anything runs
