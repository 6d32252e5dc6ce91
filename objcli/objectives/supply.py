"""What inputs provide and objectives read, in one vocabulary: the terms the plan's fitness check
(``run/fitness.py``) decides with. No module of objcli is imported here: objectives declare what they
read in it, the run says what each input gives, and a token store's kind (``stores/``) what it holds."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Provides(enum.Enum):
    """One thing an input can give an objective."""

    TEXT = "text"  # the documents' text: everything else can be made from it
    DOCUMENTS = "documents' tokens"
    SENTENCES = "sentences' tokens"  # each encoded apart, as the sentence objectives encode them
    CONVERSATIONS = "rendered conversations"
    PAIRS = "preference pairs"  # records, and a pair store (objcli tokenize --preference)
    PROMPTS = "prompts"  # RL prompts with their answers: only text gives them


@dataclass(frozen=True)
class Supply:
    """What one input provides: text, or the token kinds it holds (a sentence splitter's, or any
    splitter's where another tool split them: Megatron's ``--split-sentences``)."""

    provides: frozenset[Provides]
    splitter: str = ""  # "": sentences of any splitter (or none held)
    what: str = ""  # how refusals say what it holds ("keeps whole documents' tokens", "is megatron token ids")
    store: bool = False  # an objcli token store (another can be tokenized from the text), not another tool's
    serves: str = ""  # a store of records: the objectives it serves, said to any other ("for --objective chat; ...")

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

    @property
    def records(self) -> bool:
        """Whole JSON records (conversations, pairs, prompts), not a text field: the reader hands over each
        record's JSON text and never cuts one."""
        return self.needs in RECORDS

    @property
    def tokenizes_itself(self) -> bool:
        """It tokenizes pieces of its own (sentences, FIM's prefix/middle/suffix, rendered records) with
        ``DocumentBatch.encode``, not documents: the pipeline hands it texts untokenized, and Python then
        does much of the work (the pool defaults to processes)."""
        return self.needs is not Provides.DOCUMENTS


RECORDS = frozenset({Provides.CONVERSATIONS, Provides.PAIRS, Provides.PROMPTS})


DOCUMENTS_READ = Reads(Provides.DOCUMENTS)
