"""A run whose inputs other tools tokenized (``inputs/token_inputs/``): where they enter the plan,
and what such a run cannot do without text."""

from __future__ import annotations

import glob
import os

from ..config import TransformConfig
from ..errors import ObjcliError
from ..inputs.folders import folder_files
from ..inputs.input_kinds import TOKEN_INPUT, detect
from ..inputs.pieces import InputKind
from ..inputs.text_formats import format_from_name
from ..inputs.token_inputs import TOKEN_INPUTS, input_files, megatron_list, site_of, token_format
from ..inputs.token_inputs.partitions import opened_once, token_input, token_partitions
from ..storage.remote import is_url


def token_group(found: dict, config: TransformConfig, source: str = ""):
    """(files, partitions) of a group of tokenized inputs (``found``: each one's ``Detected``, from the
    one door: input_groups.py)."""
    key = config.mixture.ids_key(source)
    files = [token_input(path, detected.format, key) for path, detected in found.items()]
    partitions = [p for f in files for p in token_partitions(f, config.partition_bytes, key)]
    return files, partitions


def token_members(spec: str, requested: str, key: str) -> list[str]:
    """The token inputs a glob or a folder holds, each once (a Megatron pair, a datatrove file and its
    index), so files found that way are detected as the same files named one by one; ``[spec]`` for
    anything else (a file, a prefix, text). Text files beside token files are refused, as when named."""
    if spec == "-" or is_url(spec):
        return [spec]
    if glob.has_magic(spec):
        paths = sorted(p for p in glob.glob(spec, recursive=True) if os.path.isfile(p))
    elif os.path.isdir(spec) and detect(spec, "auto", key).kind is not InputKind.TOKENS:  # save_to_disk: one
        paths = folder_files(spec, lambda name: name)
    else:
        return [spec]
    found, claimed, text = {}, set(), []
    for path in paths:
        if os.path.normpath(path) in claimed or megatron_list(path) is not None:
            continue
        kind = _member_kind(path, requested, key)
        if kind is None:
            text.append(path)
            continue
        members = {os.path.normpath(m) for m in input_files(path, kind)}
        found.setdefault(frozenset(members), path)
        claimed |= members
    text = [p for p in text if os.path.normpath(p) not in claimed and format_from_name(p) is not None]
    if found and text:
        raise ObjcliError(
            f"input {spec}: holds text ({text[0]}) and token files ({next(iter(found.values()))}); give them to "
            "separate runs (or as separate --source), or tokenize the text first with objcli tokenize"
        )
    return list(found.values()) or [spec]


def _member_kind(path: str, requested: str, key: str) -> str | None:
    """A found file's token format: the one --input-format names, if it recognises the file; else the one
    the door's token kind recognises (a file a glob or a folder holds is no store: a store's own files are
    left out as text inputs leave them, by the text side's walk)."""
    if requested == "auto":
        return TOKEN_INPUT.recognises(site_of(path), key)
    fmt = TOKEN_INPUTS.get(requested)
    return requested if fmt is not None and fmt.detect(site_of(path), key) else None


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
