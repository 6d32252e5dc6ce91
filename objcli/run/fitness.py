"""Whether each input gives the objective what it reads: the one check for text, other tools' token
ids and token stores alike (``supply.py``'s terms), and the one place that words the refusal."""

from __future__ import annotations

from ..errors import ObjcliError
from ..objectives.supply import Provides, Reads, Supplied, Supply
from ..stores import StoreKind, holding, manifest_kind


def _makes(needs: Supplied) -> str:
    """How to make a store of what an objective reads: objcli tokenize with the option of the kind that holds it."""
    kind = holding(needs)
    return f"make {kind.label}: objcli tokenize ... {kind.option.flag}" if kind else ""


def check_fitness(objective, inputs: list[tuple[str, Supply]]) -> None:
    """Every input's supply against ``objective.reads(options)``; the first that does not give it is one line
    saying what the objective reads, what the input holds, and how to make one that fits."""
    reads = objective.reads(objective.options)
    for name, supply in inputs:
        if not supply.gives(reads):
            raise ObjcliError(f"--objective {objective.name}: {_refusal(objective.name, reads, name, supply)}")


def _refusal(objective: str, reads: Reads, name: str, supply: Supply) -> str:
    holds = f"{name} {supply.what}"
    if reads.needs is Provides.TEXT:
        instead = f" (or pass {reads.instead})" if reads.instead else ""
        return (
            f"{objective} cuts each document's text into pieces of its own (characters or turns) and tokenizes "
            f"them, and {holds}, without their text; run it from the text{instead}"
        )
    if reads.needs is Provides.SENTENCES:
        if Provides.SENTENCES in supply.provides:
            return (
                f"splits sentences with --sentences {reads.splitter}, and {holds}; pass --sentences "
                f"{supply.splitter}, or tokenize the text again with --sentences {reads.splitter}"
            )
        make = f"{_makes(reads.needs)} {reads.splitter}"
        if not supply.store:
            make = "run it from the text (or from Megatron's split sentences: preprocess_data.py --split-sentences)"
        return f"{objective} tokenizes each document's sentences apart, and {holds}; {make}"
    if reads.needs is Provides.PAIRS:
        return (
            f"{objective} reads preference records (prompt, chosen, rejected), and {holds}; "
            f"{_makes(reads.needs)} (or run it from the records)"
        )
    if reads.needs is Provides.PROMPTS:
        return (
            f"{objective} reads prompt records, and {holds}; run it from the records themselves (no store keeps them)"
        )
    if supply.serves:  # a store of records, for the objectives that read them
        return f"{holds}, {supply.serves}"
    if reads.needs is Provides.CONVERSATIONS:
        return f"{objective} reads conversations, and {holds}, not rendered conversations; {_makes(reads.needs)}"
    if reads.needs is not Provides.DOCUMENTS:  # what a store kind of its own keeps (supply.Supplied)
        return f"{objective} reads {reads.needs.value}, and {holds}; {_makes(reads.needs) or 'run it from the text'}"
    return (
        f"{objective} reads whole documents, and {holds} (for nsp, sop, electra, bart and contrastive's "
        "sentence units); tokenize the text without --sentences"
    )


def store_supply(manifest: dict, path: str) -> tuple[str, Supply]:
    """A token store's supply, from the kind its manifest records."""
    kind = manifest_kind(manifest)
    return f"the token store {path}", kind.supply


def token_input_supply(path: str, fmt: str, split_sentences: bool) -> tuple[str, Supply]:
    """Another tool's ids: documents' tokens, and sentences where Megatron's split sentences are kept."""
    provides = {Provides.DOCUMENTS, *([Provides.SENTENCES] if split_sentences else [])}
    return f"input {path}", Supply(frozenset(provides), "", f"is {fmt} token ids")


def check_renderer(config, kind: StoreKind) -> None:
    """A store of records (a chat or pair store) is rendered by the objective that reads them: the
    configuration names it (``objcli tokenize --chat`` and ``--preference`` do)."""
    from ..objectives import REGISTRY

    if kind.renders and REGISTRY.named(config.objective).reads(config.objective_options).needs is not kind.holds:
        raise ObjcliError(f"{kind.label} is rendered by --objective {kind.renders}; give it in the configuration")
