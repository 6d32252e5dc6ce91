"""A store of whole documents (``objcli tokenize``'s default): each document's ids, nothing else of
its own. With ``--provenance`` it also places each token in its text, as a text run's provenance does."""

from __future__ import annotations

from ..objectives.supply import Provides
from .base import StoreKind, register


@register
class WholeDocuments(StoreKind):
    name = "documents"
    holds = Provides.DOCUMENTS
    label = "a store of whole documents"
    what = "keeps whole documents' tokens"
    places_tokens = True
