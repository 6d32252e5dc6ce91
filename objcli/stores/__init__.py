"""Token store kinds, one ``StoreKind`` a module: every module of this package is imported here (the first
time a kind is asked for), and each registers its kind (``@register``), so the registry is the only list
of them. Everything else asks it (what a store's manifest spells, which kind an ``objcli tokenize`` option
asks for, which kind holds what an objective reads); see architecture.md, "Adding a store kind", and the
options page's table of kinds, generated from it (``python -m objcli.docs``)."""

from __future__ import annotations

from ..errors import ObjcliError
from ..options import discover
from .base import Encoded, KindOption, StoredColumn, StoreKind, register


def _kinds() -> dict[str, type[StoreKind]]:
    """Every kind, the package's modules imported the first time one is asked for (a reader of stores'
    columns imports no kind's objective)."""
    from .base import STORE_KINDS

    if "STORE_KINDS" not in globals():
        discover(__name__, __path__)  # each module registers its kind
        globals()["STORE_KINDS"] = STORE_KINDS
        globals()["WHOLE_DOCUMENTS"] = STORE_KINDS["documents"]()  # objcli tokenize's default
    return STORE_KINDS


def __getattr__(name: str):
    if name in ("STORE_KINDS", "WHOLE_DOCUMENTS"):
        _kinds()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse(spelled: str | None) -> StoreKind | None:
    """The kind a manifest's ``config.token_store`` spells (None: not a store): a kind's name, or the
    parameter of a kind spelled by it (a per-sentence store by its splitter's name)."""
    if not spelled:
        return None
    named = _kinds().get(spelled)
    if named is not None and not named.parameterized:
        return named()
    return next((k(spelled) for k in _kinds().values() if k.parameterized and k.takes(spelled)), None)


def manifest_kind(manifest: dict) -> StoreKind | None:
    """What a token store's manifest says it holds (a store made before kinds were named holds documents)."""
    return parse(manifest["config"].get("token_store") or "documents")


def holding(provides) -> type[StoreKind] | None:
    """The kind whose stores hold what an objective reads (``supply.Provides``), if a store holds it."""
    return next((k for k in _kinds().values() if k.holds is provides), None)


def asked_kind(values: dict) -> StoreKind | None:
    """The kind ``objcli tokenize``'s options ask for (their values are taken out of ``values``);
    more than one is one line."""
    asked = [(k, k.asked(values.pop(k.option.name, None))) for k in _kinds().values() if k.option]
    asked = [(k, kind) for k, kind in asked if kind is not None]
    if len(asked) > 1:
        (first, _), (other, _) = asked[:2]
        raise ObjcliError(
            f"{first.option.flag} and {other.option.flag}: a store holds one kind ({first.label} or "
            f"{other.label}); drop one of them, and make the other store with another objcli tokenize"
        )
    return asked[0][1] if asked else None


def renderings() -> dict[str, list[type[StoreKind]]]:
    """Each option a kind renders with -> the kinds that take it (objcli tokenize lists them)."""
    taken: dict[str, list[type[StoreKind]]] = {}
    for kind in _kinds().values():
        for key in (*kind.rendering, *kind.rendering_run):
            taken.setdefault(key, []).append(kind)
    return taken


__all__ = [
    "STORE_KINDS",
    "WHOLE_DOCUMENTS",
    "Encoded",
    "KindOption",
    "StoreKind",
    "StoredColumn",
    "asked_kind",
    "holding",
    "manifest_kind",
    "parse",
    "register",
    "renderings",
]
