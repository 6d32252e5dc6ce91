"""What a derived run trusts of a token store's manifest (``objcli tokenize``'s), typed and checked
against itself before a token is read: a hand-edited or damaged manifest is one line, never documents
read twice, none read, or counts that do not add up."""

from __future__ import annotations

import msgspec

from ..errors import ObjcliError
from ..stores import manifest_kind


class _Partition(msgspec.Struct):
    """What a derived run reads of each partition of a store's manifest (typed: a damaged one is one line)."""

    index: int
    documents_read: int
    skipped_by_reason: dict[str, int]
    shards: list[str]
    counters: dict[str, int] = {}
    documents_written: int | None = None


class _Totals(msgspec.Struct):
    documents_read: int
    documents_written: int
    documents_skipped: int


class _Reading(msgspec.Struct):
    """How the store's text was read: what a derived run takes (run/stores.READING)."""

    text_key: str
    text_unit: str
    input_format: str
    max_document_chars: int
    partition_size: str
    batch_size: str


class _Input(msgspec.Struct):
    """What a derived run reads of each of the store's inputs: the name its provenance gives the file."""

    path: str


class _Section(msgspec.Struct):
    tokenized: str
    reading: _Reading
    bos_piece: str | None = None
    sentences: str | None = None
    render_failures: list[str] = []  # a record store's: what its records' failure codes name
    piece_chars: str | None = None  # --provenance: the piece table its token places are predicted from


def check_store_sections(manifest: dict, where: str) -> None:
    """What a derived run trusts of a store's manifest, checked against itself (a hand-edited one is
    one line): its sections typed; partitions numbered 0, 1, 2, ... in order; every shard in exactly
    one partition; each partition's documents written equal to its shards' rows, read = written +
    skipped; the totals the partitions' sums."""
    from ..storage.manifest import decode_manifest

    shards = decode_manifest(manifest, where).shards  # shards, tokenizer and config as every manifest has them
    try:
        partitions = msgspec.convert(manifest["partitions"], list[_Partition])
        msgspec.convert(manifest["token_store"], _Section)
        kind = manifest_kind(manifest)
        if kind is None:
            raise KeyError(f"config.token_store {manifest['config'].get('token_store')!r} names no kind of store")
        if kind.section_type is not None:  # how the kind rendered its records: what a derived run takes
            msgspec.convert(manifest["token_store"][kind.section], kind.section_type)
        msgspec.convert(manifest["inputs"], list[_Input])  # --provenance names its documents' files by them
        totals = msgspec.convert(manifest["totals"], _Totals)
    except (msgspec.ValidationError, KeyError) as error:
        raise ObjcliError(f"{where}: a damaged token store manifest ({error}); tokenize the text again") from None
    _check_kind_columns(manifest, kind, where)

    def refuse(what: str) -> ObjcliError:
        return ObjcliError(f"{where}: {what} (the manifest was edited?); tokenize the text again")

    rows = {shard.files[0]: shard.rows for shard in shards if shard.files}
    named = [name for p in partitions for name in p.shards]
    unknown = sorted(set(named) - set(rows))
    if unknown:
        raise refuse(f"a partition names {unknown[0]}, no shard of the store")
    if [p.index for p in partitions] != list(range(len(partitions))):
        raise refuse("its partitions are not numbered 0, 1, 2, ... once each")
    if len(named) != len(set(named)) or set(named) != set(rows):
        twice = sorted({n for n in named if named.count(n) > 1} or set(rows) - set(named))
        raise refuse(f"shard {twice[0]} is not in exactly one partition")
    for p in partitions:
        written = sum(rows[name] for name in p.shards)
        skipped = sum(p.skipped_by_reason.values())
        if p.documents_written not in (None, written) or p.documents_read != written + skipped:
            raise refuse(f"partition {p.index}'s counts disagree with its shards' {written:,} documents")
    read = sum(p.documents_read for p in partitions)
    skipped = sum(sum(p.skipped_by_reason.values()) for p in partitions)
    if (totals.documents_read, totals.documents_written, totals.documents_skipped) != (read, read - skipped, skipped):
        raise refuse("its totals are not the sums of its partitions")


def _check_kind_columns(manifest: dict, kind, where: str) -> None:
    """The kind the manifest names is the one its sections and columns were written for: a store of one
    kind relabelled another would be read with the other's meaning (sentences as documents, chats as text)."""
    from ..formats.store import store_columns
    from ..stores.base import PLACES, PLACES_BEFORE

    section = manifest["token_store"]["tokenized"]
    names = [c.get("name") for c in manifest["columns"] if isinstance(c, dict)]
    layouts = ((False, PLACES), (True, PLACES), (True, PLACES_BEFORE))  # without origins, with them, as before
    eras = (None, *kind.columns_before)  # the kind's own columns now, and as stores made before kept them
    expected = [
        [c.name for c in store_columns(2, kind, origins, places, own)] for origins, places in layouts for own in eras
    ]
    if section != kind.name or names not in expected:
        raise ObjcliError(
            f"{where}: names a {kind.name!r} token store, but its sections and columns are a "
            f"{section!r} store's ({', '.join(map(str, names))}) (the manifest was edited?); tokenize the text again"
        )
