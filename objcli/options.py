"""One definition of every option: help, default, choices and range live in the field metadata of
a frozen dataclass (the run's ``TransformConfig``, each objective's options), and both the
validation here and the Click options of ``objcli transform`` are generated from it.

    mask_prob: float = option(0.15, "Probability of selecting a token.", minimum=0, maximum=1)

becomes ``--mask-prob FLOAT`` with that help and default, and ``--mask-prob 2`` fails with
``--mask-prob 2: must be between 0 and 1``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import ObjcliError

# The sections of ``objcli transform --help``, in order; an objective's own options come after ROWS.
INPUT, ROWS, ORDER, OUTPUT, RUN = "Input", "Objective and rows", "Order, splits and mixture", "Output", "Execution"
HELP_SECTIONS = (INPUT, ROWS, ORDER, OUTPUT, RUN)

TEXT_UNITS = ("line", "paragraph", "file")  # --text-unit: a plain-text document per line, paragraph or file


def option(
    default: Any,
    help: str,
    *,
    choices: tuple | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive: bool = False,
    flag: str | None = None,
    aliases: tuple[str, ...] = (),
    short: str | None = None,
    cli: bool = True,
    group: str = "",
) -> Any:
    """A dataclass field that is also a command-line option. ``exclusive``: the range excludes its
    ends; ``aliases``: older spellings, accepted and hidden; ``cli=False``: recipe and API only;
    ``group``: the section of ``--help`` that lists it."""
    metadata = {
        "help": help,
        "choices": choices,
        "minimum": minimum,
        "maximum": maximum,
        "exclusive": exclusive,
        "flag": flag,
        "aliases": aliases,
        "short": short,
        "cli": cli,
        "group": group,
    }
    if isinstance(default, (list, dict, set)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def flag_of(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


INT_LIMIT = 2**63 - 1  # an integer option with no maximum of its own still fits NumPy's int64


def check_field(f: dataclasses.Field, value: Any) -> None:
    """Choices and range of one option value, with the one-line error the CLI prints."""
    meta, name = f.metadata, flag_of(f)
    if value is None or "help" not in meta:
        return
    if meta["choices"] and value not in meta["choices"]:
        raise ObjcliError(f"{name} {value}: choose one of {', '.join(map(str, meta['choices']))}")
    low, high = meta["minimum"], meta["maximum"]
    if isinstance(value, int) and not isinstance(value, bool):
        if (low is not None and value < low) or value > (INT_LIMIT if high is None else high):
            raise ObjcliError(f"{name} {value}: {_int_range(low, high)}")
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (low is None and high is None):
        return
    if meta["exclusive"]:
        if not (low < value < high):
            raise ObjcliError(f"{name} {value}: must be between {low:g} and {high:g} (exclusive)")
    elif high is None:
        if value < low:
            raise ObjcliError(f"{name} {value}: must be at least {low:g}")
    elif not (low <= value <= high):
        raise ObjcliError(f"{name} {value}: must be between {low:g} and {high:g}")


def _int_range(low, high) -> str:
    def shown(x):
        return str(int(x)) if float(x).is_integer() else f"{x:g}"

    if high is None:
        return (
            f"must be at least {shown(low)} (and at most {INT_LIMIT})"
            if low is not None
            else f"must be at most {INT_LIMIT}"
        )
    return f"must be between {shown(low)} and {shown(high)}" if low is not None else f"must be at most {shown(high)}"


@dataclass(frozen=True)
class Options:
    """Base of every options dataclass: checks each field against its metadata."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            check_field(f, getattr(self, f.name))


@dataclass(frozen=True)
class NoOptions(Options):
    """For an objective with no options of its own."""


def option_fields(options_type: type) -> list[dataclasses.Field]:
    """The fields of an options dataclass that are command-line options."""
    return [f for f in dataclasses.fields(options_type) if "help" in f.metadata and f.metadata["cli"]]


class LiveChoices(Sequence):
    """An option's choices read from a registry at every use (``names()``), in the order ``--help``
    lists them: a format registered later (an output format, an input format) is a choice like the rest."""

    def __init__(self, names: Callable[[], list[str]]):
        self.names = names

    def __getitem__(self, index):
        return self.names()[index]

    def __len__(self) -> int:
        return len(self.names())
