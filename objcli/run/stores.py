"""A run that reads token stores (``objcli tokenize``'s outputs) instead of text: where they enter
the plan, which of the run's settings they fix, and what such a run cannot do."""

from __future__ import annotations

import dataclasses
import os

from ..config import TransformConfig
from ..errors import ObjcliError
from ..inputs.pieces import InputKind
from ..inputs.token_store import store_input, store_manifest, store_partitions
from ..stores import manifest_kind

# What decides a text run's documents and batches before its objective: a store was made with them,
# so a derived run takes its values (the same command from text, with these, writes the same bytes).
READING = ("text_key", "text_unit", "input_format", "max_document_chars", "partition_size", "batch_size")


def store_group(paths: list[str]):
    """(files, partitions) of a group that is one token store (detection found it: input_groups.py)."""
    store = store_input(paths[0])
    return [store], store_partitions(store)


def adopt_store_settings(config: TransformConfig, stores: list[str]) -> TransformConfig:
    """The run's reading settings, taken from the stores it reads: each one the run leaves at its
    default is the store's; one given otherwise is refused, naming the store's value."""
    if not stores:
        return config
    for store in stores if config.provenance else ():
        if not store_manifest(store)["config"].get("provenance"):
            raise ObjcliError(
                f"--provenance: the token store {store} was made without it, so it keeps no origins; tokenize the "
                "text again with objcli tokenize --provenance (a few bytes a document more), or run from the text"
            )
    if config.store_kind:
        raise ObjcliError(f"input {stores[0]}: is a token store already; objcli tokenize reads text")
    config = _adopt_rendering(config, stores)
    defaults = {f.name: f.default for f in dataclasses.fields(TransformConfig)}
    source_of = {path: name for name, paths in config.mixture.sources.items() for path in paths}
    values = {}
    for store in stores:
        recorded = store_manifest(store)["token_store"]["reading"]
        for key in READING:
            stored, current = recorded.get(key), getattr(config, key)
            if key == "text_key" and config.source:  # a mixture's keys are per source: this store's own
                source = source_of.get(store, "")
                current = config.mixture.text_key_of(source)
                named = key in config.given and config.mixture.names_text_key(source)
                if current != stored and (named or current != defaults[key]):
                    raise ObjcliError(
                        f"--text-key {config.text_key}: the token store {store} was tokenized with --text-key "
                        f"{stored}; name that field for its source, or none"
                    )
                continue
            left = key not in config.given and current == defaults[key]  # the run's default: the store's value
            if current != stored and not left and values.get(key, current) != stored:
                flag = "--" + key.replace("_", "-")
                raise ObjcliError(
                    f"{flag} {current}: the token store {store} was tokenized with {flag} {stored}, which fixes its "
                    f"documents and batches; drop {flag} (or tokenize the text again with it)"
                )
            if key in values and values[key] != stored:
                raise ObjcliError(
                    f"input {store}: tokenized with --{key.replace('_', '-')} {stored}, another store of this run "
                    f"with {values[key]}; tokenize them alike"
                )
            values[key] = stored
    return dataclasses.replace(config, **values)


def _adopt_rendering(config: TransformConfig, stores: list[str]) -> TransformConfig:
    """A run over chat or pair stores renders nothing: it takes how they rendered (a value given
    otherwise is refused), and --bos/--eos, which plain text was rendered with."""
    from ..objectives import REGISTRY

    # What a record store rendered with (its template is compared by sha256) a derived run takes; how it
    # cuts, masks and packs them (--seq-len, --loss-on, --overlong, --packing) is its own.
    reads = REGISTRY.named(config.objective).reads(config.objective_options).needs
    kinds = [(store, manifest_kind(store_manifest(store))) for store in stores]
    chats = [(store, kind) for store, kind in kinds if kind.section and kind.holds is reads]
    if not chats:
        return config
    options, run = {}, {}
    for store, kind in chats:
        chat = store_manifest(store)["token_store"][kind.section]
        for key in (*kind.rendering, *kind.rendering_run):
            chosen = options if key in kind.rendering else run
            current = getattr(config.objective_options if key in kind.rendering else config, key)
            stored = chat.get(key)  # a key stores made before have not: None, its default (--processor)
            if key == "processor" and current is not None and stored is None:
                raise ObjcliError(
                    f"--processor {current}: {kind.label.replace('a ', 'the ', 1)} {store} was tokenized without "
                    "--processor (its records that show images are skips in it); tokenize the records again with it"
                )
            if key in ("chat_template", "processor") and current is not None and (stored or key == "chat_template"):
                continue  # any path: its files' contents are compared by sha256

            left = key not in config.given and current == _default(config, key)
            if (current != stored and not left) or chosen.get(key, stored) != stored:
                flag = "--" + key.replace("_", "-")
                raise ObjcliError(
                    f"{_spelled(flag, current)}: {kind.label.replace('a ', 'the ', 1)} {store} was rendered with "
                    f"{_spelled(flag, stored)}, and a derived run renders nothing; drop {flag} (or tokenize the "
                    "records again with it)"
                )
            chosen[key] = stored
    rendering = dataclasses.replace(config.objective_options, **options)
    return dataclasses.replace(config, objective_options=rendering, **run)


def _spelled(flag: str, value) -> str:
    if isinstance(value, bool) or value is None:
        return flag if value in (True, None) else flag.replace("--", "--no-", 1)
    return f"{flag} {value}"


def _default(config: TransformConfig, key: str):
    """A value that may be the run's default rather than given: the store's is taken (``--eos`` is
    resolved to chat's default, EOS after a prompt/completion pair, when the configuration is made)."""
    if key == "bos":
        return None
    if key == "eos":
        return True
    return next(f.default for f in dataclasses.fields(config.objective_options) if f.name == key)


def check_store_run(stores: list[str], tokenizer, objective, special) -> None:
    """The tokenizer must be the store's (by sha256), and its BOS the one the store knows texts by
    (whether the objective can read the store is ``fitness.py``'s to say)."""
    for store in stores:
        recorded = store_manifest(store)
        if recorded["tokenizer"]["sha256"] != tokenizer.sha256:
            raise ObjcliError(
                f"--tokenizer {tokenizer.path}: the token store {store} was made with {recorded['tokenizer']['path']} "
                f"(sha256 {recorded['tokenizer']['sha256'][:12]}…, this one {tokenizer.sha256[:12]}…); "
                "give that tokenizer, or tokenize the text again with this one"
            )
        refused = objective.store_refusal({c.get("name") for c in recorded.get("columns", ()) if isinstance(c, dict)})
        if refused:
            raise ObjcliError(f"input {store}: {refused}")
        bos = recorded["token_store"].get("bos_piece")
        if special.pieces.get("bos") not in (None, bos):
            raise ObjcliError(
                f"--bos-token {special.pieces['bos']}: the token store {store} knows which texts begin with "
                f"{bos!r}, not with this one; leave --bos-token out"
            )


def check_store_identity(stores: list[str], identity: dict) -> None:
    """A chat store's conversations were rendered with its template: the run's files besides the
    tokenizer (the template, the tokenizer's config holding one) must be those, by sha256."""
    from ..storage.identity import TOKENIZER, file_differences

    for store in stores:
        manifest = store_manifest(store)
        if not manifest_kind(manifest).renders:
            continue
        recorded = {what: e for what, e in manifest.get("identity", {}).items() if what != TOKENIZER}
        current = {what: e for what, e in identity.items() if what != TOKENIZER}
        differences = file_differences(recorded, current)
        if differences:
            what, before, now = differences[0]
            absent = "none (the tokenizer's own template)" if what == "chat template" else "none"
            made = f"{before['path']} (sha256 {before['sha256'][:12]}…)" if before else absent
            here = f"{now['path']} (sha256 {now['sha256'][:12]}…)" if now else absent
            raise ObjcliError(
                f"input {store}: the store was rendered with {what} {made}, and this run has {here}; "
                "give the store's, or tokenize the conversations again with this one"
            )


def check_plan_run(config: TransformConfig, stores: list[str], partitions: list) -> None:
    """--format plan: rows made on read from token stores' ids (formats/row_plan.py): one, or a mixture's."""
    if not config.format.packs_positions:
        return
    flag = f"--format {config.format.name}"
    if not stores or any(p.input.kind is not InputKind.STORE for p in partitions):
        raise ObjcliError(
            f"{flag}: a plan's rows are made on read from token stores' ids; give stores only "
            "(objcli tokenize the text first), or choose a row format such as --format arrow"
        )


def check_tokenize_inputs(config: TransformConfig, partitions: list) -> None:
    """objcli tokenize reads text: a store keeps each document's text measures (its characters, bytes and
    checksum) that ids read from token files do not have."""
    if not config.store_kind:
        return
    tokens = next((p.input for p in partitions if p.input.kind is not InputKind.TEXT), None)
    if tokens is not None:
        what = "a token store" if tokens.kind is InputKind.STORE else f"token ids already ({tokens.format})"
        raise ObjcliError(
            f"input {tokens.path}: is {what}, and objcli tokenize makes a store from text; derive rows from it "
            f"directly with 'objcli transform {tokens.path} ...', or tokenize the text it came from"
        )


def store_summary(config: TransformConfig, tokenizer, totals: dict, shards: list) -> dict:
    """The manifest's ``token_store`` section: what a derived run takes from it, and its size."""
    from ..formats.store import ids_dtype
    from .store_chain import bos_piece

    token_bytes = ids_dtype(tokenizer.total_vocab_size).itemsize * totals.get("tokens", 0)
    stored = sum(sum(s.bytes.values()) for s in shards)
    kind = config.store_kind
    return {
        "tokenized": kind.name,
        **kind.summary(config),
        "ids_dtype": ids_dtype(tokenizer.total_vocab_size).name,
        "bos_piece": bos_piece(tokenizer, tokenizer.special),
        "reading": {key: getattr(config, key) for key in READING},
        "bytes": {"tokens": token_bytes, "boundaries_and_metadata": stored - token_bytes, "total": stored},
        **(
            {"piece_chars": encode_table(tokenizer.piece_char_table())}
            if config.provenance and kind.places_tokens
            else {}
        ),
    }


def encode_table(table) -> str:
    """A per-id table of small numbers as the manifest keeps it: zlib, then base64 (a 32k vocabulary's in
    a few KB)."""
    import base64
    import zlib

    return base64.b64encode(zlib.compress(table.tobytes(), 9)).decode()


def store_tokenizer(inputs: list[str]) -> str | None:
    """The tokenizer a run over token stores uses when none is given: the one the (first) store names,
    where it still is."""
    for path in inputs:
        manifest = store_manifest(path)
        if manifest is not None:
            recorded = manifest["tokenizer"]["path"]
            return recorded if os.path.exists(recorded) else None
    return None
