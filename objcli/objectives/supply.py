"""What inputs provide and objectives read, in one vocabulary, and what a token store holds: the
terms the plan's fitness check (``run/fitness.py``) decides with. No module of objcli is imported
here: objectives declare what they read in it, the run says what each input gives."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Provides(enum.Enum):
    """One thing an input can give an objective."""

    TEXT = "text"  # the documents' text: everything else can be made from it
    DOCUMENTS = "documents' tokens"
    SENTENCES = "sentences' tokens"  # each encoded apart, as the sentence objectives encode them
    CONVERSATIONS = "rendered conversations"
    PAIRS = "preference pairs"  # only text gives them: no store keeps pairs yet
    PROMPTS = "prompts"  # RL prompts with their answers: only text gives them


@dataclass(frozen=True)
class Supply:
    """What one input provides: text, or the token kinds it holds (a sentence splitter's, or any
    splitter's where another tool split them: Megatron's ``--split-sentences``)."""

    provides: frozenset[Provides]
    splitter: str = ""  # "": sentences of any splitter (or none held)
    what: str = ""  # how refusals say what it holds ("keeps whole documents' tokens", "is megatron token ids")
    store: bool = False  # an objcli token store (another can be tokenized from the text), not another tool's

    def gives(self, reads: Reads) -> bool:
        if Provides.TEXT in self.provides:
            return True
        if reads.needs is not Provides.SENTENCES:
            return reads.needs in self.provides
        return Provides.SENTENCES in self.provides and self.splitter in ("", reads.splitter)


@dataclass(frozen=True)
class Reads:
    """What an objective reads (``Objective.reads``): its one need, with the splitter for sentences and
    a way to read tokens instead where there is one (FIM's ``--fim-level context``)."""

    needs: Provides
    splitter: str = ""
    instead: str = ""


DOCUMENTS_READ = Reads(Provides.DOCUMENTS)


@dataclass(frozen=True)
class StoreKind:
    """What a token store holds (``objcli tokenize``'s ``--sentences S`` / ``--chat``), one value from the
    command line to the objective that reads it; spelled as the manifest's ``config.token_store``:
    ``documents``, ``conversations``, or the sentence splitter's name."""

    holds: Provides
    splitter: str = ""

    @classmethod
    def parse(cls, value: str | None) -> StoreKind | None:
        if not value:
            return None
        if value in (DOCUMENTS, CONVERSATIONS, PAIRS):
            return cls({DOCUMENTS: Provides.DOCUMENTS, PAIRS: Provides.PAIRS}.get(value, Provides.CONVERSATIONS))
        return cls(Provides.SENTENCES, value)

    def __str__(self) -> str:
        return self.splitter if self.holds is Provides.SENTENCES else self.name

    @property
    def name(self) -> str:
        """``documents``, ``sentences`` or ``conversations``: the manifest's ``token_store.tokenized``."""
        names = {Provides.DOCUMENTS: DOCUMENTS, Provides.SENTENCES: "sentences", Provides.PAIRS: PAIRS}
        return names.get(self.holds, CONVERSATIONS)

    @property
    def supply(self) -> Supply:
        what = {
            Provides.DOCUMENTS: "keeps whole documents' tokens",
            Provides.SENTENCES: f"was tokenized per sentence (--sentences {self.splitter})",
            Provides.CONVERSATIONS: "holds rendered conversations",
            Provides.PAIRS: "holds rendered preference pairs",
        }[self.holds]
        return Supply(frozenset({self.holds}), self.splitter, what, store=True)


DOCUMENTS, CONVERSATIONS, PAIRS = "documents", "conversations", "pairs"
WHOLE_DOCUMENTS = StoreKind(Provides.DOCUMENTS)  # objcli tokenize's default
CHAT_STORE = StoreKind(Provides.CONVERSATIONS)  # objcli tokenize --chat
PAIR_STORE = StoreKind(Provides.PAIRS)  # objcli tokenize --preference
