"""What a run reads before its partitions, when an option needs the whole corpus first: the bounds
of splits given as a count (``--split test=1000``), the rates of a mixture's sources
(``--source``/``--weights``) and the types of value columns the records decide (``--objective
prompts``). Each pass reads the documents exactly as the partitions will (same records, long ones
cut alike) and keeps only small summaries, so memory holds one batch."""

from __future__ import annotations

import math
import os

import numpy as np

from ..config import TransformConfig
from ..errors import ObjcliError
from ..inputs import Partition, RecordLog
from ..inputs.cutting import utf8_bytes
from ..inputs.pieces import InputKind
from ..objectives.value_types import NULL, type_of, unify, writable
from ..order.document_windows import char_lengths
from ..order.mixture import SAMPLE_CHARS, MixtureDraws, exact_cut, source_rates, taken
from ..order.splits import counted, plan_bounds, smallest, uniforms
from ..tokenizers import Tokenizer
from .document_batches import partition_documents, token_count


def _documents(config: TransformConfig, partition: Partition, tokenizer: Tokenizer):
    options = config.read_options(config.strict, partition.source)
    return partition_documents(partition, config, options, RecordLog(strict=config.strict), tokenizer)


def _refuse_streams(option: str, partitions: list[Partition], hint: str) -> None:
    streams = [p.input.path for p in partitions if p.input.is_stream]
    if streams:
        raise ObjcliError(
            f"{option} needs a first pass over the inputs, and {streams[0]} is a stream, read once; {hint}"
        )


def split_bounds(config: TransformConfig, partitions: list[Partition], tokenizer: Tokenizer) -> tuple:
    """Where each held-out split's interval of ``u`` ends. Splits given as a count need the smallest
    ``u`` of the whole corpus: a first pass reads every partition (as the run will: same records,
    long ones cut alike) and keeps only the smallest values, so memory holds one batch and the count."""
    if not config.split:
        return ()
    k = counted(config.split)
    if not k:
        return tuple(plan_bounds(config.split))
    _refuse_streams(f"--split {config.split}: a count", partitions, "give the split as a fraction (test=0.1%)")
    kept = np.zeros(0)
    for partition in partitions:
        for texts in _documents(config, partition, tokenizer):
            # One more than the counts: whether any document is left to train.
            kept = smallest(np.concatenate([kept, uniforms(texts, config.seed)]), k + 1)
    if len(kept) <= k:  # train would be empty: surely not what was meant
        raise ObjcliError(
            f"--split {config.split}: the counts ask for {k:,} documents and the corpus has {len(kept):,}, "
            "which would leave none to train; ask for fewer, or give fractions (test=1%)"
        )
    return tuple(plan_bounds(config.split, kept[:k]))


def mixture_rates(config: TransformConfig, partitions: list[Partition], tokenizer: Tokenizer) -> dict[str, dict]:
    """Each source's tokens and the rate that gives it its share or budget: a token store's and a text
    source's counted (the text encoded once here, on every core, as the run will encode it), their
    documents then taken to the token (``exact_cut``), so the shares written are the shares asked;
    other tools' ids estimated from their sizes; ``--max-epochs`` caps a rate."""
    if not config.source:
        return {}
    _refuse_streams(f"--source {config.source[0]}: a mixture", partitions, "save the stream to a file first")
    names, kind, values = list(config.mixture.names), config.mixture.kind, config.mixture.weights
    if config.format.blends_sources:  # the trainer samples the sources by the blend file: no copies here
        total = sum(values.values())
        return {name: {kind: values[name], "blend_share": values[name] / total, "rate": 1.0} for name in names}
    caps = config.mixture.max_epochs
    # A conversation's ids hold what its template writes (BOS, ends of turns): chat adds none around them.
    boundary = 0 if config.reads.records else int(bool(config.bos)) + int(bool(config.eos))
    tokens, counted = {}, {}
    for name in names:
        mine = [p for p in partitions if p.source == name]
        if mine and all(p.input.kind in (InputKind.STORE, InputKind.TEXT) for p in mine):
            counted[name] = _counted(config, mine, tokenizer, boundary, name)
            tokens[name] = float(counted[name][2].sum())
        else:
            tokens[name] = _estimated(config, mine, tokenizer, boundary)
    rates = source_rates(kind, values, tokens)
    by_source = {}
    for name in names:
        how = "counted_tokens" if name in counted else "estimated_tokens"
        by_source[name] = {kind: values[name], how: round(tokens[name]), "rate": rates[name]}
        if rates[name] > caps.get(name, rates[name]):
            by_source[name]["capped_from"], by_source[name]["rate"] = rates[name], caps[name]
    exact = [name for name in counted if "capped_from" not in by_source[name]]
    wanted = {name: rates[name] * tokens[name] for name in exact}
    for _ in range(ROUNDS if kind == "share" and len(exact) == len(names) else 1):
        for name in exact:  # the asked tokens, to the token: whole copies, then documents by their uniform
            by_source[name].update(_cut(counted[name], wanted[name]))
        # Shares are of the whole: a source that fell short (its documents too long to fit what was left)
        # sets the whole, and the others are cut again to it.
        scale = min(by_source[name]["rate"] * tokens[name] / wanted[name] for name in exact) if exact else 1.0
        if scale >= 1.0 - 1e-9:
            break
        wanted = {name: wanted[name] * scale for name in exact}
    return by_source


ROUNDS = 3  # a share's sources cut again to the one that fell shortest: one round, rarely two


def _cut(counted: tuple, wanted: float) -> dict:
    """A source's cut (``exact_cut``) and rate for ``wanted`` tokens, from its counted documents."""
    uniform, chars, lengths = counted
    total = float(lengths.sum())
    whole = math.floor(wanted / total)
    cut = exact_cut(uniform, chars, lengths, wanted - whole * total)
    return {"cut": cut, "rate": whole + float(lengths[taken(uniform, chars, cut)].sum()) / total}


def _estimated(config: TransformConfig, partitions: list[Partition], tokenizer: Tokenizer, boundary: int) -> float:
    text_bytes = documents = sample_chars = sample_bytes = sample_tokens = 0
    for partition in partitions:
        for texts in _documents(config, partition, tokenizer):
            text_bytes += utf8_bytes(texts)
            documents += len(texts)
            if sample_chars < SAMPLE_CHARS:  # the first MiB of text: a store counted its tokens
                sample_tokens += token_count(texts, tokenizer)
                sample_bytes += utf8_bytes(texts)
                sample_chars += int(char_lengths(texts).sum())
    per_byte = sample_tokens / sample_bytes if sample_bytes else 0.0
    return text_bytes * per_byte + documents * boundary


def _counted(config, partitions: list[Partition], tokenizer: Tokenizer, boundary: int, source: str):
    """(each document's keyed uniform, its characters, its tokens with its BOS/EOS) over a source of token
    stores or text (encoded here as the run encodes it: the same documents, long ones cut alike), drawn
    as the run draws them (``MixtureDraws``: each partition's documents in reading order)."""
    uniform, chars, lengths = [], [], []
    threads = os.cpu_count() or 1
    for partition in partitions:
        draws = MixtureDraws(config.seed, source, partition.index)
        for documents in _documents(config, partition, tokenizer):
            uniform.append(draws.next(len(documents)))
            chars.append(char_lengths(documents))
            offsets = documents.offsets if hasattr(documents, "offsets") else tokenizer.encode(documents, threads)[1]
            lengths.append(np.diff(offsets) + boundary)
    return tuple(np.concatenate(parts or [np.zeros(0, np.int64)]) for parts in (uniform, chars, lengths))


def value_types(config: TransformConfig, partitions: list[Partition], tokenizer: Tokenizer, objective) -> tuple:
    """The common type of each value column the records decide (``Objective.inferred_values``): every
    record's values read once, their types joined (``value_types.unify``; a clash is one line naming
    the column and field). A record that gives no row adds nothing (the run counts it)."""
    if not objective.inferred_values:
        return ()
    _refuse_streams(f"--objective {objective.name} (its columns' types)", partitions, "save the stream to a file first")
    found = dict.fromkeys(objective.inferred_values, NULL)
    for partition in partitions:
        for texts in _documents(config, partition, tokenizer):
            for record in texts:
                values = objective.record_values(record)
                for name, value in (values or {}).items():
                    found[name] = unify(found[name], type_of(value), name)
    return tuple((name, writable(kind)) for name, kind in found.items())
