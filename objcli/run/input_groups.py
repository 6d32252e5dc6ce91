"""Each group of a run's inputs (a source, or what an ``--append`` added) through the one door
(``inputs/input_kinds.detect``): every input the group names, and every one a glob or a folder holds,
recognised by asking each kind of input the same question in one order; the group's one kind found
(kinds never mix in a group: one line names the two that do); the group opened by its kind."""

from __future__ import annotations

from ..config import TransformConfig
from ..errors import ObjcliError
from ..inputs import cut_partitions, resolve_inputs
from ..inputs.input_kinds import Detected, detect, is_store_input
from ..inputs.pieces import STDIN, InputKind
from ..inputs.token_inputs import megatron_list
from ..storage.remote import is_url
from .stores import store_group
from .token_inputs import token_group, token_members


def open_group(group: list[str], config: TransformConfig, source: str, warn) -> tuple[list, list]:
    """(files, partitions) of a group of inputs, by the kind detection finds."""
    key = config.mixture.ids_key(source)
    found = {member: detect(member, config.input_format, key) for member in _members(group, config, key)}
    kind = _one_kind(found)
    if kind is InputKind.STORE:
        return store_group(list(found))
    if kind is InputKind.TOKENS:
        if STDIN in found:
            raise ObjcliError(
                f"input -: --input-format {found[STDIN].format} names token files, which are read from their files "
                "(an index beside the ids), never from standard input; name the files"
            )
        return token_group(found, config, source)
    # Text: each file's format from its name or bytes (--text-unit file: a folder's every file).
    files = resolve_inputs(group, config.input_format, warn, config.text_unit)
    return files, cut_partitions(files, config.partition_bytes, config.text_unit)


def _members(group: list[str], config: TransformConfig, key: str) -> list[str]:
    """The inputs a group names: a glob's or a folder's token inputs each once (a Megatron pair, a
    datatrove file and its index), a megatron.txt-style list's prefixes; anything else as named."""
    members = []
    for spec in group:
        if spec == STDIN or is_url(spec) or is_store_input(spec):
            members.append(spec)
            continue
        for path in token_members(spec, config.input_format, key):
            members += megatron_list(path) or [path]
    return list(dict.fromkeys(members))


def _one_kind(found: dict[str, Detected]) -> InputKind:
    """The group's kind; a store beside anything, or text beside token ids, is one line."""
    kinds = {path: detected.kind for path, detected in found.items()}
    stores = [path for path, kind in kinds.items() if kind is InputKind.STORE]
    if stores and len(found) > 1:
        raise ObjcliError(
            f"input {stores[0]}: a token store is read on its own; give it alone (or as one --source), "
            "and tokenize text inputs into a store of their own"
        )
    tokens = [path for path, kind in kinds.items() if kind is InputKind.TOKENS]
    text = [path for path, kind in kinds.items() if kind is InputKind.TEXT]
    if tokens and text:
        raise ObjcliError(
            f"input {text[0]}: is text, and {tokens[0]} is already tokenized ({found[tokens[0]].format}); give them "
            "to separate runs (or as separate --source), or tokenize the text first with objcli tokenize"
        )
    return next(iter(kinds.values()), InputKind.TEXT)
