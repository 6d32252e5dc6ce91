"""Each group of a run's inputs (a source, or what an ``--append`` added) through the one door
(``inputs/input_kinds.detect``): every input the group names, and every one a glob or a folder holds,
recognised by asking each kind of input the same question in one order; the group's one kind found
(kinds never mix in a group: one line names the two that do); the group opened by its kind."""

from __future__ import annotations

from ..config import TransformConfig
from ..errors import ObjcliError
from ..inputs import cut_partitions, group_members, text_files
from ..inputs.members import Member
from ..inputs.pieces import STDIN, InputKind
from .stores import store_group
from .token_inputs import token_group


def open_group(group: list[str], config: TransformConfig, source: str, warn) -> tuple[list, list]:
    """(files, partitions) of a group of inputs, by the kind the door finds."""
    key = config.mixture.ids_key(source)
    members = group_members(group, config.input_format, key, config.text_unit, warn)
    kind = _one_kind(members)
    if kind is InputKind.STORE:
        return store_group([m.path for m in members])
    if kind is InputKind.TOKENS:
        stdin = next((m for m in members if m.path == STDIN), None)
        if stdin is not None:
            raise ObjcliError(
                f"input -: --input-format {stdin.detected.format} names token files, which are read from their "
                "files (an index beside the ids), never from standard input; name the files"
            )
        return token_group({m.path: m.detected for m in members}, config, source)
    files = text_files(members, config.input_format, warn)  # each file's format: the door's, else its bytes'
    return files, cut_partitions(files, config.partition_bytes, config.text_unit)


def _one_kind(members: list[Member]) -> InputKind:
    """The group's kind; a store beside anything, or text beside token ids, is one line."""
    stores = [m.path for m in members if m.kind is InputKind.STORE]
    if stores and len(members) > 1:
        raise ObjcliError(
            f"input {stores[0]}: a token store is read on its own; give it alone (or as one --source), "
            "and tokenize text inputs into a store of their own"
        )
    tokens = [m for m in members if m.kind is InputKind.TOKENS]
    text = [m.path for m in members if m.kind is InputKind.TEXT]
    if tokens and text:
        raise ObjcliError(
            f"input {text[0]}: is text, and {tokens[0].path} is already tokenized ({tokens[0].detected.format}); "
            "give them to separate runs (or as separate --source), or tokenize the text first with objcli tokenize"
        )
    return members[0].kind if members else InputKind.TEXT
