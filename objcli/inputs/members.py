"""Every input a group names, found by one walk and recognised once, by the one door
(``input_kinds.detect``): a glob's matches and a folder's files are listed once, each file is asked the
door's question once (a token store, then the token formats, then text by its name), and a text
file's bytes are looked at later only where the door's answer is ``auto`` or its suffix is one another
format claims by content (``text_formats.content_format``). A token input of several files (a Megatron
pair, a datatrove file and its index) is one member, whichever of its files a walk found first."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import ObjcliError
from ..storage.remote import is_url
from .folders import folder_files
from .input_kinds import TOKEN_INPUT, Detected, detect
from .objects import list_objects
from .pieces import STDIN, InputKind
from .text_formats import format_from_name, suffix_list
from .token_inputs import TOKEN_INPUTS, input_files, megatron_list, site_of
from .token_store import is_store


@dataclass(frozen=True)
class Member:
    """One input as the door recognised it; ``listed``: an object's listing (size, version, first
    bytes), so it is not asked for again."""

    path: str
    detected: Detected
    listed: dict | None = None

    @property
    def kind(self) -> InputKind:
        return self.detected.kind


def group_members(
    specs: list[str], requested: str = "auto", ids_key: str = "input_ids", text_unit: str = "line", warn=None
) -> list[Member]:
    """The members of a group of inputs, in the order named (each path once). ``text_unit`` "file": a
    folder's every file is a text document (man pages, source code), else those a text format names."""
    if not specs:
        raise ObjcliError("no input given; name files, folders or globs, or '-' for standard input")
    members = [m for spec in specs for m in _spec_members(spec, requested, ids_key, text_unit, warn)]
    if sum(m.path == STDIN for m in members) > 1:
        raise ObjcliError("standard input '-' is named twice; name it once")
    # A token input or store named twice is read once; a text file named twice is said (text_files).
    first = {m.path: m for m in reversed(members)}
    return [m for m in members if m.kind is InputKind.TEXT or first[m.path] is m]


def _spec_members(spec: str, requested: str, key: str, text_unit: str, warn) -> list[Member]:
    if spec == STDIN:
        return [Member(STDIN, detect(STDIN, requested, key))]
    if is_url(spec):
        found = detect(spec, requested, key)
        if found.kind is not InputKind.TEXT:
            return [Member(spec, found)]
        listed = list_objects(spec, lambda name: format_from_name(name) is not None)
        return [Member(url, _text(url, requested), info) for url, info in listed]
    # A folder is walked unless it is itself an input (a store, a save_to_disk dataset's token files).
    if glob.has_magic(spec) or (os.path.isdir(spec) and detect(spec, "auto", key).kind is InputKind.TEXT):
        return _walked(spec, requested, key, text_unit, warn)
    members = [Member(path, detect(path, requested, key)) for path in megatron_list(spec) or [spec]]
    if len(members) == 1 and members[0].kind is InputKind.TEXT and not os.path.exists(spec):
        raise ObjcliError(f"input {spec}: no such file or directory; check the path")
    return members


def _text(path: str, requested: str) -> Detected:
    """A text file's answer from the door: the format asked for, else the one its name says (``auto``:
    its first bytes say, when it is read)."""
    return Detected(InputKind.TEXT, requested if requested != "auto" else format_from_name(path) or "auto")


def _walked(spec: str, requested: str, key: str, text_unit: str, warn) -> list[Member]:
    """A glob's or a folder's files, listed once: its token inputs (each once), else its text files; both
    is one line. A glob's every match is text (its bytes say which); a folder's, those a text format names."""
    if glob.has_magic(spec):
        paths = sorted(p for p in glob.glob(spec, recursive=True) if os.path.isfile(p))
        if not paths:
            raise ObjcliError(f"input {spec}: the pattern matches no file; check the glob")
        paths = _not_objcli_files(spec, paths)
        is_text = lambda path: True  # noqa: E731
    else:
        paths = folder_files(spec, lambda name: name, warn)
        named = format_from_name if text_unit != "file" else (lambda name: format_from_name(name) or "text")
        is_text = lambda path: named(os.path.basename(path)) is not None  # noqa: E731
    tokens, text = _token_members(paths, requested, key)
    if tokens and any(format_from_name(p) is not None for p in text):
        named_text = next(p for p in text if format_from_name(p) is not None)
        raise ObjcliError(
            f"input {spec}: holds text ({named_text}) and token files ({tokens[0].path}); give them to "
            "separate runs (or as separate --source), or tokenize the text first with objcli tokenize"
        )
    if tokens:
        return tokens
    if requested in TOKEN_INPUTS:  # none of its files is what --input-format names: the door's answer says why
        return [Member(spec, detect(spec, requested, key))]
    text = [p for p in text if is_text(p)]
    if not text:
        raise ObjcliError(
            f"input {spec}: the folder holds no {suffix_list()} file (compressed or not); name the files "
            "directly, or pass --text-unit file to read every file of it as a document"
            if text_unit != "file"
            else f"input {spec}: the folder holds no file; name the files directly"
        )
    return [Member(path, _text(path, requested)) for path in text]


def _token_members(paths: list[str], requested: str, key: str) -> tuple[list[Member], list[str]]:
    """(the token inputs among ``paths``, each once, a list's prefixes expanded; the other files)."""
    tokens, claimed, text = [], set(), []
    for path in paths:
        if os.path.normpath(path) in claimed or megatron_list(path) is not None:  # a list is read when named
            continue
        fmt = _token_format(path, requested, key)
        if fmt is None:
            text.append(path)
            continue
        members = {os.path.normpath(m) for m in input_files(path, fmt)}
        if not members & claimed:
            tokens.append(Member(path, Detected(InputKind.TOKENS, fmt)))
        claimed |= members
    return tokens, [p for p in text if os.path.normpath(p) not in claimed]


def _token_format(path: str, requested: str, key: str) -> str | None:
    """A found file's token format: the one --input-format names, if it recognises the file; else the one
    the door's token kind recognises (a file a glob or a folder holds is no store: a store's own files are
    left out by the walk)."""
    if requested == "auto":
        return TOKEN_INPUT.recognises(site_of(path), key)
    fmt = TOKEN_INPUTS.get(requested)
    return requested if fmt is not None and fmt.detect(site_of(path), key) else None


def _not_objcli_files(spec: str, matches: list[str]) -> list[str]:
    """A glob's files less a token store's own (its manifest, ``.store`` shards, side files), as a
    folder walk leaves an output's out: they are no text, and a store is read by its folder. Only
    those matched: one line naming the store."""
    from .folders import objcli_output_files

    own = {}
    for folder in {os.path.dirname(p) or "." for p in matches}:
        found = objcli_output_files(Path(folder)) if is_store(folder) else None
        own[folder] = found[0] if found else set()
    kept = [p for p in matches if os.path.basename(p) not in own[os.path.dirname(p) or "."]]
    if not kept:
        folder = os.path.dirname(matches[0]) or "."
        raise ObjcliError(
            f"input {spec}: the pattern matches only the files of the token store {folder}, which are no text; "
            f"give the store's folder ({folder}) to read its tokens, or name the text files"
        )
    return kept
