"""A run's identity: everything that can change the bytes it writes. The configuration, and every
file it reads besides its inputs, by content: the tokenizer file (a tiktoken rank file with its side
file), the ``tokenizer_config.json`` beside a ``tokenizer.json`` (its BOS/EOS/PAD names, its chat
template) and a chat template read from a file of its own.

The digests of the files beside the tokenizer enter the configuration's sha256 (``config_sha256``), so a rerun
after an edit is another run (rebuilt under ``--overwrite``, refused otherwise, naming what changed);
``--append`` and ``merge`` compare them; the manifest records each file's path and sha256, which
``verify`` checks against the files when they are present.
"""

from __future__ import annotations

import os
from pathlib import Path

from .files import file_sha256
from .remote import is_url

TOKENIZER = "tokenizer"


def run_identity(tokenizer, objective) -> dict[str, dict[str, str]]:
    """``{what: {"path", "sha256"}}`` of every file the run reads besides its inputs."""
    identity = {TOKENIZER: {"path": str(tokenizer.path), "sha256": file_sha256(tokenizer.path)}}
    seen = {Path(tokenizer.path).resolve()}
    for what, path in [*tokenizer.side_files().items(), *objective.identity_files().items()]:
        if Path(path).resolve() not in seen:
            seen.add(Path(path).resolve())
            identity[what] = {"path": str(path), "sha256": file_sha256(path)}
    return identity


def side_digests(identity: dict) -> dict[str, str]:
    """What ``config_sha256`` adds to the tokenizer's own sha256: the other files' digests."""
    return {what: entry["sha256"] for what, entry in identity.items() if what != TOKENIZER}


def changed_files(recorded: dict | None, current: dict) -> list[str]:
    """The files whose content differs from what a run recorded, named for a person ("chat
    template t.jinja", "tokenizer config gone"). Nothing recorded (an output older than identities):
    only the tokenizer can be compared, by the caller."""
    if not recorded:
        return []
    changes = []
    for what, before, now in file_differences(recorded, current):
        name = Path((now or before)["path"]).name
        state = "added" if before is None else "gone" if now is None else "edited"
        changes.append(f"{what} {name} ({state})")
    return changes


def file_differences(recorded: dict, current: dict) -> list[tuple[str, dict | None, dict | None]]:
    """(what, recorded entry, current entry) for each file whose sha256 differs, or that only one has:
    the one comparison of identities, which the rerun check and a chat store's check word their own way."""
    differences = []
    for what in dict.fromkeys([*recorded, *current]):
        before, now = recorded.get(what), current.get(what)
        if (before or {}).get("sha256") != (now or {}).get("sha256"):
            differences.append((what, before, now))
    return differences


def changed_options(recorded_config: dict | None, config: dict) -> list[str]:
    """The options whose values differ from a recorded configuration, as flags."""
    if not recorded_config:
        return []
    keys = dict.fromkeys([*recorded_config, *config])
    return [
        f"--{k.replace('_', '-')}"
        for k in keys
        if k not in ("inputs", "input_breaks") and recorded_config.get(k) != config.get(k)
    ]


def what_changed(record: dict | None, config: dict, identity: dict) -> str:
    """`` (changed: chat template t.jinja (edited), --seq-len)``, or "" when nothing can be named."""
    record = record or {}
    names = changed_files(record.get("identity"), identity) + changed_options(record.get("config"), config)
    return f" (changed: {', '.join(names)})" if names else ""


def check_identity(recorded: dict) -> list[str]:
    """For ``verify``: each recorded file that is here and holds other bytes now. A file that is not
    here (the output was moved to another machine) is not checked."""
    problems = []
    for what, entry in recorded.items():
        path = entry.get("path", "")
        if not path or is_url(path) or not Path(path).is_file():
            continue
        if file_sha256(path) != entry.get("sha256"):
            problems.append(
                f"{what} {path}: its sha256 differs from the one the run recorded (edited since the "
                "run?); rerun the transform with --overwrite to rebuild the output with it"
            )
    return problems


def input_changed(entry: dict, since: str = "the run") -> str:
    """Why a text input a manifest records is not the file that run read ("" when it is, by the size
    and modification time recorded; a stream, object storage, or an entry from before objcli recorded
    where, cannot be compared and is taken as it is)."""
    where = entry.get("resolved")
    if not isinstance(where, str) or "bytes" not in entry:
        return ""
    try:
        stat = os.stat(where)
    except OSError:
        return f"{where} is gone since {since}"
    if stat.st_size != entry.get("bytes") or stat.st_mtime_ns != entry.get("modified_ns"):
        return f"{where} changed since {since} (its size or modification time differs)"
    return ""


def changed_store_inputs(store: str, inputs: list[dict]) -> list[str]:
    """For a run derived from a token store and for ``verify``: each text input of the store that
    changed since it was tokenized (the store holds the old text's tokens). One not here (the store
    was moved to another machine) is not compared: a store needs no text."""
    here = [e for e in inputs if isinstance(e.get("resolved"), str) and os.path.exists(e["resolved"])]
    return [
        f"token store {store}: its input {why}, so the store holds the tokens of the text as it was; "
        f"tokenize the text again (objcli tokenize ... -o {store} --overwrite) to take the change"
        for why in (input_changed(e, "it was tokenized") for e in here)
        if why
    ]
