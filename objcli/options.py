"""One definition of every option: help, default, choices and range live in the field metadata of
a frozen dataclass (the run's ``TransformConfig``, each objective's options), and both the
validation here and the Click options of ``objcli transform`` are generated from it.

    mask_prob: float = option(0.15, "Probability of selecting a token.", minimum=0, maximum=1)

becomes ``--mask-prob FLOAT`` with that help and default, and ``--mask-prob 2`` fails with
``--mask-prob 2: must be between 0 and 1``. The names an option chooses among (objectives, packers,
formats, ...) are a ``Registry``'s, below: one mechanism for every extension point.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import pkgutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

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


# One way to extend objcli: every extension point is a ``Registry`` (objectives, store kinds, token
# inputs, output formats, packers, text formats). A thing registers where it is defined, under the name
# it goes by: ``@register("chat", "sft")`` on a class (objectives: the name, then aliases), ``@register``
# on a class that names itself (store kinds, token inputs), ``register(ARROW)`` for an instance (output
# formats). The package that holds an extension point imports each of its modules once (``discover``), so
# a new one is one module and its test, with no list to edit: ``--help``, the options' choices, recipes
# and the docs ask the registry.
T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    """The things of one extension point by name, in the order ``order`` gives (registration's, else)."""

    def __init__(
        self,
        what: str,
        *,
        instances: bool = False,
        order: Callable[[Any], Any] | None = None,
        check: Callable[[Any, Registry], None] | None = None,
    ):
        self.what = what  # how a message names one: "objective", "store kind"
        self.instances = instances  # a class registered is kept as an instance of it
        self.order = order  # a key on each thing: the order names() and iteration give
        self.check = check  # refuses a thing that clashes with the others (ValueError)
        self.aliases: dict[str, str] = {}
        self._things: dict[str, T] = {}

    def register(self, *spelled):
        """``@register`` (the thing names itself), ``@register("name", "alias", ...)``, or ``register(thing)``."""
        if spelled and not isinstance(spelled[0], str):
            return self._add(spelled[0], spelled[0].name, ())
        return lambda thing: self._add(thing, spelled[0], spelled[1:])

    def _add(self, thing, name: str, aliases: tuple[str, ...]):
        for key in (name, *aliases):
            again = key in self._things and thing in (self._things[key], type(self._things[key]))
            if (key in self._things and not again) or key in self.aliases:
                raise ValueError(f"{self.what} name {key!r} is registered twice")
        kept = thing() if self.instances and isinstance(thing, type) else thing
        if isinstance(thing, type) and getattr(thing, "name", None) != name:
            thing.name = name
        if self.check is not None:
            self.check(kept, self)
        self._things[name] = kept
        self.aliases.update({alias: name for alias in aliases})
        if self.order is not None:
            self._things = dict(sorted(self._things.items(), key=lambda item: self.order(item[1])))
        return thing

    def unregister(self, name: str) -> None:
        """Takes a thing out (a test's own, registered for the test)."""
        self._things.pop(name)
        self.aliases = {alias: target for alias, target in self.aliases.items() if target != name}

    def named(self, name: str) -> T:
        """The thing a name (or an alias) spells; else one line naming the close ones and the known ones."""
        canonical = self.aliases.get(name, name)
        if canonical in self._things:
            return self._things[canonical]
        close = difflib.get_close_matches(name, [*self._things, *self.aliases], n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise ObjcliError(f"unknown {self.what} '{name}'; {hint}known {self.what}s: {', '.join(sorted(self))}")

    def names(self) -> list[str]:
        return list(self._things)

    def __getitem__(self, name: str) -> T:
        return self._things[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._things)

    def __len__(self) -> int:
        return len(self._things)


def discover(package: str, path) -> None:
    """Imports every module of a package (its ``__name__`` and ``__path__``): each registers what it defines.
    A private helper (``_name.py``) is left to the modules that use it (formats' Arrow columns import pyarrow,
    which a run writing another format never needs)."""
    for module in pkgutil.iter_modules(path):
        if not module.name.startswith("_"):
            importlib.import_module(f"{package}.{module.name}")
