"""The one door: every input (a file, a folder, a prefix in a bucket, a Megatron prefix, what a glob or
a folder walk finds) is recognised here, by asking each registered kind of input, in one order, the
same question, ``recognises(site, ids_key)``: the name of its format, or None. The answer is one
type, ``Detected(kind, format)``.

The order, and why:

1. **Token stores** (``objcli tokenize``'s outputs): a folder or prefix whose manifest says so. Nothing
   else claims a folder with an objcli manifest, and a store's own files are refused one by one (its
   folder is the input), so it is asked first.
2. **Token formats** other tools wrote (``token_inputs/``, in their registry's order: layouts of
   several files before single files, llm.c's header before nanoGPT's headerless ``.bin``). Each
   recognises itself by names and content, so a file is never taken for text that has an index or a
   header saying it is ids.
3. **Text formats** (``text_formats.py``), by name (their suffixes), else by first bytes when the
   file is read; plain text takes whatever no other kind does, so it is asked last.

``--input-format NAME`` answers for the kind that has that format, without asking; a store is still
recognised first (a run over one takes its own reading settings and refuses others)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import ObjcliError
from ..formats.store import STORE
from .folders import refuse_damaged_output
from .pieces import STDIN, InputKind
from .text_formats import TEXT_INPUTS, format_from_name
from .token_inputs import TOKEN_INPUTS, InputSite, site_of
from .token_store import is_store


@dataclass(frozen=True)
class Detected:
    """What an input is: its kind and its format's name (a text file's format may be ``auto``: its
    first bytes decide when it is read)."""

    kind: InputKind
    format: str


class StoreKindOfInput:
    kind = InputKind.STORE
    formats: tuple[str, ...] = ()  # never asked for by --input-format: a store is recognised

    def recognises(self, site: InputSite, ids_key: str) -> str | None:
        if site.remote:
            return STORE if is_store(site.given or site.name) else None
        path = site.path
        folder = os.path.dirname(path) or "."
        if os.path.isfile(path) and is_store(folder):
            raise ObjcliError(
                f"input {path}: is a file of the token store {folder}; give the store's folder ({folder})"
            )
        if os.path.isdir(path):
            refuse_damaged_output(Path(path))  # never read as a folder of text
        return STORE if is_store(path) else None


class TokenKindOfInput:
    kind = InputKind.TOKENS

    @property
    def formats(self) -> tuple[str, ...]:
        return tuple(TOKEN_INPUTS)

    def recognises(self, site: InputSite, ids_key: str) -> str | None:
        return next((name for name, f in TOKEN_INPUTS.items() if f.detect(site, ids_key)), None)


class TextKindOfInput:
    kind = InputKind.TEXT

    @property
    def formats(self) -> tuple[str, ...]:
        return tuple(TEXT_INPUTS)

    def recognises(self, site: InputSite, ids_key: str) -> str:
        return format_from_name(site.path) or "auto"  # any bytes are text: the first bytes say which, when read


STORE_INPUT, TOKEN_INPUT = StoreKindOfInput(), TokenKindOfInput()
# In the order they are asked (see above).
INPUT_KINDS = (STORE_INPUT, TOKEN_INPUT, TextKindOfInput())


def is_store_input(path: str) -> bool:
    """Whether ``path`` is a token store (the door's first question alone: no token format is looked at)."""
    return path != STDIN and STORE_INPUT.recognises(site_of(path), "") is not None


def detect(path: str, requested: str = "auto", ids_key: str = "input_ids") -> Detected:
    """What ``path`` is: the first kind that recognises it (``requested``: --input-format, which names
    the format of the kind that has it; a store is recognised whatever it names)."""
    if path == STDIN:  # a stream is never looked at ahead: the format named, else text its first bytes say
        named = next((kind for kind in INPUT_KINDS if requested in kind.formats), None)
        return Detected(named.kind, requested) if named else Detected(InputKind.TEXT, "auto")
    site = site_of(path)
    try:
        for kind in INPUT_KINDS:
            if requested != "auto" and requested in kind.formats:
                return Detected(kind.kind, requested)
            found = kind.recognises(site, ids_key) if requested == "auto" or not kind.formats else None
            if found:
                return Detected(kind.kind, found)
    except _storage_errors() as error:
        raise _unreadable(error, site, path) from None
    return Detected(InputKind.TEXT, "auto")


def _storage_errors():
    from ..storage.remote import storage_errors

    return storage_errors()


def _unreadable(error, site: InputSite, path: str) -> ObjcliError:
    from ..storage.remote import storage_error

    if not site.remote:
        return ObjcliError(f"input {path}: cannot read ({error}); check the path and its permissions")
    return storage_error(error, path, "looking at its objects")
