"""A run whose inputs other tools tokenized (``inputs/token_inputs/``): where they enter the plan,
and what such a run cannot do without text."""

from __future__ import annotations

from ..config import TransformConfig
from ..errors import ObjcliError
from ..inputs.pieces import InputKind
from ..inputs.token_inputs import token_format
from ..inputs.token_inputs.partitions import opened_once, token_input, token_partitions


def token_group(found: dict, config: TransformConfig, source: str = ""):
    """(files, partitions) of a group of tokenized inputs (``found``: each one's ``Detected``, from the
    one door: input_groups.py)."""
    key = config.mixture.ids_key(source)
    files = [token_input(path, detected.format, key) for path, detected in found.items()]
    partitions = [p for f in files for p in token_partitions(f, config.partition_bytes, key)]
    return files, partitions


def check_token_run(partitions: list, config: TransformConfig, tokenizer) -> None:
    """What a run over token files refuses: ids wider than the file, another tool's end of document
    (whether the objective can read them is ``fitness.py``'s to say)."""
    sources = {p.input: p.source for p in partitions if p.input.kind is InputKind.TOKENS}
    if not sources:
        return
    files = list(sources)
    for f in files:
        opened = opened_once(f.path, f.format, config.mixture.ids_key(sources[f]))
        limit = 1 << (8 * opened.tokens.dtype.itemsize) if opened.tokens.dtype.kind == "u" else None
        if limit is not None and tokenizer.vocab_size > limit:
            raise ObjcliError(
                f"input {f.path}: holds {opened.tokens.dtype.itemsize}-byte ids (below {limit:,}) and the tokenizer "
                f"{tokenizer.path} has {tokenizer.vocab_size:,}; give the tokenizer the file was made with"
            )
        check_foreign_end(opened, f, tokenizer)


def check_foreign_end(opened, f, tokenizer) -> None:
    """A file whose every document ends in one special token that is not the run's EOS was made with
    another EOD (Megatron's --append-eod with <|endoftext|>, read with a config naming <|im_end|>): it
    would stay in every document and the run's EOS follow it, two ends. Refused, naming the fix."""
    import numpy as np

    lengths = np.diff(opened.offsets)
    ends = opened.offsets[1:][lengths > 0] - 1
    if token_format(f.format).splits_at_eos or len(ends) < 2:
        return
    last = np.asarray(opened.tokens[ends])
    end, eos = int(last[0]), tokenizer.special.ids.get("eos")
    controls = tokenizer.control_mask()
    if eos is None or end == eos or not np.all(last == end) or not (0 <= end < len(controls) and controls[end]):
        return
    piece = tokenizer.pieces()[end]  # a control token decodes to nothing: its piece names it
    raise ObjcliError(
        f"input {f.path}: every document ends in {piece!r} (id {end}), a special token that is not the run's EOS "
        f"({tokenizer.special.pieces.get('eos')!r}): the file's own end of document. Pass --eos-token '{piece}' so "
        "it is taken off and each document ends once, or give the tokenizer configuration the file was made with"
    )


def token_supplies(files: list, config: TransformConfig, sources: dict) -> list:
    """What each tokenized input gives an objective (``fitness.py``): documents' tokens, and sentences
    where Megatron's split sentences are kept."""
    from .fitness import token_input_supply

    supplies = []
    for f in files:
        opened = opened_once(f.path, f.format, config.mixture.ids_key(sources.get(f, "")))
        supplies.append(token_input_supply(f.path, f.format, opened.sentences is not None))
    return supplies
