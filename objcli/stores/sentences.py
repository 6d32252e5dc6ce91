"""A per-sentence store (``objcli tokenize --sentences SPLITTER``): each document's sentences encoded
apart, as the sentence objectives (nsp, sop, electra, bart, contrastive's units) encode them; its ids
are its sentences' ids one after another, and ``sentences`` lists each one's token count."""

from __future__ import annotations

import numpy as np

from ..errors import ObjcliError
from ..kernels.ragged import lengths_to_offsets
from ..objectives.sentences import SPLITTERS, split_batch
from ..objectives.supply import Provides
from ..rows import Ragged
from .base import Encoded, KindOption, StoredColumn, StoreKind, register

SENTENCES = "sentences"


@register
class SentenceStore(StoreKind):
    name = "sentences"
    holds = Provides.SENTENCES
    label = "a per-sentence store"
    columns = (StoredColumn(SENTENCES, "int32", np.int32, "tokens of each of the document's sentences", True),)
    option = KindOption(
        "sentences",
        "Tokenize each document's sentences apart (prose or lines, the splitters of --sentences), for the sentence "
        "objectives: nsp, sop, electra, bart, contrastive ict and adjacent [default: whole documents].",
        takes_value=True,
        choices=SPLITTERS,
    )
    parameterized = True  # the manifest spells it by its splitter's name

    @classmethod
    def takes(cls, parameter: str) -> bool:
        return parameter in SPLITTERS

    @property
    def what(self) -> str:
        return f"was tokenized per sentence (--sentences {self.parameter})"

    def encode(self, texts: list, batch_index: int, encode, renderer) -> Encoded:
        pieces, counts = split_batch(texts, self.parameter)
        tokens, cumulative = encode(pieces)
        offsets = cumulative[lengths_to_offsets(counts)]
        return Encoded(tokens, offsets, {SENTENCES: Ragged(np.diff(cumulative), lengths_to_offsets(counts))})

    def read(self, metadata: dict, reasons, path, record_tokens) -> dict:
        counts = metadata[SENTENCES]
        counts = Ragged(np.asarray(counts.values, np.int64), counts.offsets)
        added = np.concatenate([[0], np.cumsum(counts.values)])
        if np.any(counts.values < 0) or not np.array_equal(np.diff(added[counts.offsets]), record_tokens):
            raise ObjcliError(
                f"input {path}: its documents' sentences do not add up to their ids (edited?); tokenize the text again"
            )
        return {"sentences": counts}
