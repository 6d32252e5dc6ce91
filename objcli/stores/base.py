"""What a token store (``objcli tokenize``) holds, as one class a kind: ``StoreKind``. A kind says
everything about itself that the rest of objcli asks: its columns (named with its prefix), how a
batch of text becomes its rows (``encode``), how its rows come back and are checked (``read``), what
it gives objectives and how a refusal words what it holds, the ``objcli tokenize`` option that asks
for it, the objective that renders its records and the options a derived run takes from it. The
registry (``stores/__init__.py``) is the only list of kinds; nothing else names one.

Every store also has the columns below (``STORE_COLUMNS``): a document's batch, sizes, keyed hash
and BOS flag, and with ``--provenance`` where it comes from (``ORIGINS``) and, where a kind places
its tokens, each token's place in its text (``PLACES``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Protocol

import numpy as np

from ..objectives.supply import Provides, Supplied, Supply
from ..options import Registry
from ..rows import ColumnSpec


@dataclass(frozen=True)
class StoredColumn:
    """One column of a store shard besides ``ids``: a scalar a document, or a list (``listed``) that runs
    alongside itself, or alongside the ids where it holds a value a token (role ``positions``)."""

    name: str
    arrow: str  # the Arrow type (of a list's items): a pyarrow factory's name
    dtype: Any  # its NumPy dtype
    doc: str
    listed: bool = False
    low: int = 0
    high: int = 2**31 - 1
    role: str = "per_segment"  # the ColumnSpec role: per_segment, or positions for a value a token

    def spec(self) -> ColumnSpec:
        """As the manifest lists it: a list runs alongside itself, a scalar alongside the ids."""
        kind, own = ("ragged", self.role != "positions") if self.listed else ("scalar", False)
        return ColumnSpec(self.name, kind, self.low, self.high, self.doc, self.role, self.name if own else "ids")

    def arrow_type(self) -> str:
        """How the manifest spells its stored type: ``int32``, ``list<item: int32>``."""
        return f"list<item: {self.arrow}>" if self.listed else self.arrow


def _scalar(name, arrow, dtype, doc, high=2**32 - 1) -> StoredColumn:
    return StoredColumn(name, arrow, dtype, doc, high=high)


STORE_COLUMNS = (
    _scalar("batch", "int32", np.int32, "the batch the text run encoded the document in"),
    _scalar("chars", "int64", np.int64, "characters of the document's text"),
    _scalar("utf8", "int64", np.int64, "UTF-8 bytes of the document's text"),
    _scalar("crc", "uint32", np.uint32, "CRC-32 of the document's UTF-8 bytes"),
    _scalar("bos_text", "bool_", np.bool_, "the text begins with the BOS piece"),
)
# --provenance: where each document comes from, and where a kind places its tokens (whole documents):
# the tokens whose characters the tokenizer's piece table does not predict (kernels/places.py), a few
# bytes a document; the table itself is in the manifest (token_store.piece_chars).
ORIGINS = (
    _scalar("p_file", "int32", np.int32, "the input file, an index into the store's manifest's inputs", 2**62),
    _scalar("p_record", "int64", np.int64, "the record's index in the file", 2**62),
    _scalar("p_start", "int64", np.int64, "the document's first character in the record's text", 2**62),
)
PLACES = (
    StoredColumn("p_fix_at", "int32", np.int32, "tokens whose places the piece table does not predict", True),
    StoredColumn("p_fix_len", "int32", np.int32, "each of those tokens' characters", True),
    StoredColumn("p_fix_back", "int8", np.int8, "how far each starts before the previous one's end", True, -128),
)
# What stores made before kept instead: each token's end and back, 5 bytes a token (still read).
PLACES_BEFORE = (
    StoredColumn(
        "p_ends",
        "int32",
        np.int32,
        "each token's end, in characters of the document's text",
        True,
        -128,
        role="positions",
    ),
    StoredColumn(
        "p_back",
        "int8",
        np.int8,
        "how far each token starts before the previous one's end (up to 127)",
        True,
        -128,
        role="positions",
    ),
)


class Encoded(NamedTuple):
    """A batch of documents as a kind keeps them: the ids, each document's offsets in them, the kind's
    own columns, and the records it could not render (their reasons, a counted skip)."""

    tokens: np.ndarray
    offsets: np.ndarray
    columns: dict
    failed: tuple[str, ...] = ()


class KindRecords(Protocol):
    """What a kind's ``read`` may give besides ids (``StoredDocuments.records``): per-document data of its
    own, cut and joined with the documents, and handed to the objective that reads it as
    ``DocumentBatch.records`` (``batch``: for the batch whose documents' ids lie at ``offsets``). A chat
    store's ``StoredConversations`` and a pair store's ``StoredPairs`` are two."""

    def slice(self, start: int, stop: int) -> KindRecords: ...

    def take(self, indices: np.ndarray) -> KindRecords: ...

    @staticmethod
    def concat(parts: list) -> KindRecords: ...

    def batch(self, offsets: np.ndarray) -> Any: ...


@dataclass(frozen=True)
class KindOption:
    """The ``objcli tokenize`` option that asks for a kind: a flag (``--chat``), or an option whose value
    is the kind's parameter (``--sentences prose``)."""

    name: str  # the option's field name
    help: str
    takes_value: bool = False
    choices: Any = None  # for a value: its choices (a LiveChoices, looked up when asked)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


class StoreKind:
    """One kind of store. An instance is what one store holds (``parameter``: a sentence store's
    splitter); the manifest spells it ``str(kind)`` (``config.token_store``) and names its class
    ``kind.name`` (``token_store.tokenized``).

    Required: ``name``, ``holds``, ``label``, ``what``; a kind with columns of its own adds ``prefix``,
    ``columns``, ``option``, ``encode()`` and ``read()`` (what it keeps for an objective: ``records``, a
    ``KindRecords``). Optional, each with the default declared below: a kind of records rendered by an
    objective (``renders``, ``serves``, ``section``, ``section_type``, ``rendering``, ``rendering_run``),
    stores made before (``columns_before``), ``places_tokens``, ``parameterized``."""

    name: ClassVar[str]
    holds: ClassVar[Supplied]  # what it gives objectives (supply.py's vocabulary: Provides', or its own)
    label: ClassVar[str]  # how messages name a store of it: "a chat store"
    what: ClassVar[str]  # how a refusal says what a store of it holds: "holds rendered conversations"
    serves: ClassVar[str] = ""  # said to an objective that does not read it: "for --objective chat; ..."
    prefix: ClassVar[str] = ""  # its own columns' names begin with it
    columns: ClassVar[tuple[StoredColumn, ...]] = ()
    columns_before: ClassVar[tuple[tuple[StoredColumn, ...], ...]] = ()  # its columns as stores made before kept them
    option: ClassVar[KindOption | None] = None  # None: what objcli tokenize makes when asked for no other
    renders: ClassVar[str] = ""  # the objective that renders its records ("" for documents' text)
    section: ClassVar[str] = ""  # its manifest section under token_store, holding how it rendered
    section_type: ClassVar[Any] = None  # that section's msgspec type (a damaged one is one line)
    rendering: ClassVar[tuple[str, ...]] = ()  # objective options it renders with: a derived run takes them
    rendering_run: ClassVar[tuple[str, ...]] = ()  # the run's options it renders with (bos, eos)
    places_tokens: ClassVar[bool] = False  # --provenance keeps each token's place (PLACES)
    parameterized: ClassVar[bool] = False  # spelled by its parameter (a splitter's name), not its name

    def __init__(self, parameter: str = ""):
        self.parameter = parameter

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.parameter == self.parameter

    def __hash__(self) -> int:
        return hash((self.name, self.parameter))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.parameter!r})" if self.parameter else f"{type(self).__name__}()"

    def __str__(self) -> str:
        return self.parameter if self.parameterized else self.name

    @property
    def splitter(self) -> str:
        """The sentence splitter a per-sentence store was made with ("" for any other kind)."""
        return self.parameter if self.holds is Provides.SENTENCES else ""

    @property
    def supply(self) -> Supply:
        return Supply(frozenset({self.holds}), self.splitter, self.what, store=True, serves=self.serves)

    def column_specs(self, origins: bool, places=PLACES, own=None) -> list[ColumnSpec]:
        """Its columns besides ``ids`` and ``STORE_COLUMNS`` (``own``: one of ``columns_before``), then the
        origins' with ``--provenance`` (``places``: the token places' columns, ``PLACES_BEFORE`` as stores made
        before kept them)."""
        where = (*ORIGINS, *(places if self.places_tokens else ())) if origins else ()
        return [c.spec() for c in (*(self.columns if own is None else own), *where)]

    def encode(self, texts: list, batch_index: int, encode, renderer) -> Encoded:
        """A batch of texts as its rows (``encode``: the run's tokenizer call; ``renderer``: the
        objective's partition that renders and encodes records, for a kind that ``renders``)."""
        tokens, offsets = encode(texts)
        return Encoded(tokens, offsets, {})

    def read(self, metadata: dict, reasons: tuple[str, ...], path, record_tokens: np.ndarray) -> dict:
        """Its columns of a shard (``metadata``) as ``StoredDocuments``' fields (``sentences``,
        ``records``), checked against the shard's ids (``record_tokens``: each row's count); a
        disagreement is one line naming the shard. ``reasons``: the manifest's render_failures."""
        return {}

    def summary(self, config) -> dict:
        """Its part of the manifest's ``token_store`` section: how it was made, for a derived run (a
        kind that renders: its rendering, and the names its failure codes index)."""
        if not self.section:
            return {self.name: self.parameter} if self.parameterized else {}
        from ..objectives.conversations import RENDER_FAILURES

        made = {key: getattr(config.objective_options, key) for key in self.rendering}
        made |= {key: getattr(config, key) for key in self.rendering_run}
        return {self.section: made, "render_failures": list(RENDER_FAILURES)}

    @classmethod
    def takes(cls, parameter: str) -> bool:
        """Whether a kind spelled by its parameter has this one (a known splitter's name)."""
        return not cls.parameterized

    @classmethod
    def asked(cls, value) -> StoreKind | None:
        """The kind its ``objcli tokenize`` option's value asks for (None: not asked)."""
        if not value:
            return None
        return cls(value) if cls.option.takes_value else cls()


def checked_failures(codes: np.ndarray, reasons: tuple[str, ...], path) -> np.ndarray:
    """A record store's failure codes (0, or 1 + an index into the manifest's ``reasons``), checked."""
    failed = np.asarray(codes).astype(np.int8)
    if len(failed) and not 0 <= failed.min() <= failed.max() <= len(reasons):  # the manifest edited since
        from ..errors import ObjcliError

        raise ObjcliError(
            f"input {path.parent}/manifest.json: its render_failures do not name the reasons {path.name} records; "
            "tokenize the records again"
        )
    return failed


# Every kind, by name: filled by ``register`` as ``stores/__init__.py`` imports each module of the package.
def _own_columns(kind: type[StoreKind], kinds: Registry) -> None:
    """A kind's columns are its own, named with its prefix, which no other kind has."""
    if kind.prefix and any(k.prefix == kind.prefix for k in kinds.values() if k is not kind):
        raise ValueError(f"store kind {kind.name}: the column prefix {kind.prefix!r} is another kind's")
    taken = {c.name for k in kinds.values() if k is not kind for c in k.columns}
    if taken & {c.name for c in kind.columns} or any(not c.name.startswith(kind.prefix) for c in kind.columns):
        raise ValueError(f"store kind {kind.name}: its columns must be its own, each named {kind.prefix}*")


# Store kinds by name (objcli tokenize's options, the store's columns): ``@register`` on a StoreKind.
STORE_KINDS: Registry[type[StoreKind]] = Registry("store kind", check=_own_columns)
register = STORE_KINDS.register
