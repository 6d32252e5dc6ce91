"""What inputs provide and objectives read, in one vocabulary: the terms the plan's fitness check
(``run/fitness.py``) decides with. No module of objcli is imported here: objectives declare what they
read in it, the run says what each input gives, and a token store's kind (``stores/``) what it holds."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class Supplied:
    """One thing an input can give an objective. The vocabulary is open: a store kind that keeps something
    new declares it in its own module (``Supplied("documents' tokens and their words", tokens=True)``), the
    objective that reads it names the same object in ``reads``, and text gives it as it gives everything.
    Compared by identity, as the members of an enumeration."""

    value: str  # how messages and the options page name it
    tokens: bool = False  # the run hands the objective its documents' tokens (else it tokenizes its own pieces)
    records: bool = False  # whole JSON records: the reader hands over each record's JSON text, never cut

    def __repr__(self) -> str:
        return f"Supplied({self.value!r})"


class Provides:
    """What objcli's own inputs and objectives give and read."""

    TEXT = Supplied("text")  # the documents' text: everything else can be made from it
    DOCUMENTS = Supplied("documents' tokens", tokens=True)
    SENTENCES = Supplied("sentences' tokens")  # each encoded apart, as the sentence objectives encode them
    CONVERSATIONS = Supplied("rendered conversations", records=True)
    PAIRS = Supplied("preference pairs", records=True)  # records, and a pair store (objcli tokenize --preference)
    PROMPTS = Supplied("prompts", records=True)  # RL prompts with their answers: only text gives them


@dataclass(frozen=True)
class Supply:
    """What one input provides: text, or the token kinds it holds (a sentence splitter's, or any
    splitter's where another tool split them: Megatron's ``--split-sentences``)."""

    provides: frozenset[Supplied]
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

    needs: Supplied
    splitter: str = ""
    instead: str = ""

    @property
    def records(self) -> bool:
        """Whole JSON records (conversations, pairs, prompts), not a text field: the reader hands over each
        record's JSON text and never cuts one."""
        return self.needs.records

    @property
    def tokenizes_itself(self) -> bool:
        """It tokenizes pieces of its own (sentences, FIM's prefix/middle/suffix, rendered records) with
        ``DocumentBatch.encode``, not documents: the pipeline hands it texts untokenized, and Python then
        does much of the work (the pool defaults to processes)."""
        return not self.needs.tokens


DOCUMENTS_READ = Reads(Provides.DOCUMENTS)
