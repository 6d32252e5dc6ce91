"""Recipes: a run's configuration as data (TOML), as datatrove keeps ``executor.json`` and T5 its
gin files, so a Makefile target can depend on the file that describes it.

A recipe is one flat table whose keys are the option names of ``objcli transform`` without the
leading dashes (``seq-len = 512``, ``whole-word = true``) plus ``inputs``; ``--print-recipe``
writes the resolved configuration of a command line in that form, and every ``manifest.json``
holds it under ``"recipe"``, so ``objcli transform --recipe out/manifest.json`` repeats a run.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import shlex
import types
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomllib

from .config import TransformConfig
from .errors import ObjcliError
from .objectives import REGISTRY
from .objectives.base import Objective, ObjectiveContext
from .options import flag_of, option_fields
from .packing import PACKERS

if TYPE_CHECKING:
    from .tokenizers import Tokenizer

RUN_FIELDS = {f.name: f for f in dataclasses.fields(TransformConfig) if "help" in f.metadata}


def key_of(f: dataclasses.Field) -> str:
    return flag_of(f).removeprefix("--")


def objective_fields() -> dict[str, tuple[dataclasses.Field, set[str]]]:
    """Every objective option: field name -> (its field, the objectives that take it)."""
    fields: dict[str, tuple[dataclasses.Field, set[str]]] = {}
    for name in REGISTRY.names():
        for f in option_fields(REGISTRY.named(name).options_type):
            fields.setdefault(f.name, (f, set()))[1].add(name)
    return fields


def _by_key() -> types.MappingProxyType:
    """Recipe key -> (field name, its type): every option's name and the old spellings the command
    line still accepts (``preset``, ``mask``)."""
    return _keys_of(tuple((name, REGISTRY.named(name).options_type) for name in REGISTRY.names()))


@functools.cache  # typing.get_type_hints evaluates every annotation again: 20 ms a call
def _keys_of(objectives: tuple[tuple[str, type], ...]) -> types.MappingProxyType:
    """``_by_key`` for these registered objectives (an objective registered later is another key)."""
    hints = typing.get_type_hints(TransformConfig)
    keys = {key_of(f): (name, hints[name]) for name, f in RUN_FIELDS.items()}
    for name, (f, owners) in objective_fields().items():
        hint = typing.get_type_hints(REGISTRY.named(sorted(owners)[0]).options_type)[name]
        for key in (key_of(f), *(alias.removeprefix("--") for alias in f.metadata["aliases"])):
            keys.setdefault(key, (name, hint))
    return types.MappingProxyType(keys)  # read-only: every caller shares it


def _typed(value: Any, hint, where: str) -> Any:
    """``value`` as the option's type, or one line naming the key: TOML and JSON give strings, numbers,
    booleans and lists, and a wrong one must never be misread (``strict = "false"`` is not false)."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    options = typing.get_args(hint) if union else (hint,)
    kind = next(k for k in options if k is not type(None))
    if value is None and type(None) in options:
        return None
    if typing.get_origin(kind) is tuple or kind is tuple:
        item = (typing.get_args(kind) or (str,))[0]  # tuple[str, ...] (inputs), tuple[int, ...] (input_breaks)
        items = [value] if isinstance(value, str) and item is str else value
        if isinstance(items, list) and all(isinstance(v, item) and not isinstance(v, bool) for v in items):
            return tuple(items)
        expected = "a list of strings" if item is str else "a list of integers"
    elif kind is bool:
        if isinstance(value, bool):
            return value
        expected = "true or false"
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        expected = "an integer"
    elif kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        expected = "a number"
    else:
        if isinstance(value, str):
            return value
        expected = "a string"
    shown = json.dumps(value, ensure_ascii=False) if not isinstance(value, float) else repr(value)
    raise ObjcliError(f"{where} must be {expected}, not {shown} ({type(value).__name__})")


def config_from_values(values: dict[str, Any]) -> TransformConfig:
    """A configuration from option values by field name (from the command line, a recipe or both)."""
    objective = REGISTRY.named(values.get("objective", "clm"))
    accepted = {f.name for f in option_fields(objective.options_type)}
    owners = objective_fields()
    run, own = {}, {}
    for name, value in values.items():
        if name in RUN_FIELDS:
            run[name] = tuple(value) if name in ("inputs", "source") else value
        elif name in accepted:
            own[name] = value
        elif name not in owners:  # only through the library API: the CLI and recipes know their names
            close = difflib.get_close_matches(name, [*RUN_FIELDS, *owners], n=1)
            raise ObjcliError(f"unknown option '{name}'" + (f"; did you mean '{close[0]}'?" if close else ""))
        else:
            flag = "--" + name.replace("_", "-")
            raise ObjcliError(f"{flag} applies to {', '.join(sorted(owners[name][1]))}, not to {objective.name}")
    run["objective"] = objective.name
    given = frozenset(name for name in values if name != "objective")
    return TransformConfig(objective_options=objective.options_type(**own), given=given, **run)


def recipe_of(config: TransformConfig, with_output: bool = True) -> dict[str, Any]:
    """The resolved configuration as a flat table (what ``--print-recipe`` prints). The manifest's
    copy leaves out the output folder, so that a run's manifest is the same wherever it was
    written; ``--recipe out/manifest.json -o other/`` repeats the run elsewhere."""
    table: dict[str, Any] = {}
    for name, f in RUN_FIELDS.items():
        if name == "output" and not with_output:
            continue
        value = getattr(config, name)
        table["inputs" if name == "inputs" else key_of(f)] = list(value) if isinstance(value, tuple) else value
    for f in option_fields(type(config.objective_options)):
        table[key_of(f)] = getattr(config.objective_options, f.name)
    return {k: v for k, v in table.items() if v is not None}


def command_line(recipe: dict[str, Any]) -> str:
    """``objcli transform ...`` that runs a recipe again (``-o`` left to add): its inputs and tokenizer,
    its objective, then every option it sets away from the default, spelled as the command line takes
    them (a repeated option once a value; a flag on by default turned off with ``--no-``)."""
    options = REGISTRY.named(recipe.get("objective", "clm")).options_type
    fields = {key_of(f): f for f in [*RUN_FIELDS.values(), *option_fields(options)]}
    words = ["objcli", "transform", *recipe.get("inputs", []), "--tokenizer", str(recipe.get("tokenizer", ""))]
    for key, value in recipe.items():
        f = fields.get(key)
        if key in ("inputs", "tokenizer", "input-breaks", "engine") or f is None:
            continue
        if key != "objective" and value == (list(f.default) if isinstance(f.default, tuple) else f.default):
            continue
        if isinstance(value, bool):
            words.append(f"--{key}" if value else f"--no-{key}")
        else:
            words += [w for v in (value if isinstance(value, list) else [value]) for w in (f"--{key}", str(v))]
    return " ".join(shlex.quote(w) if not w.startswith("--") else w for w in words)


def load_recipe(path: str, warn=None) -> dict[str, Any]:
    """Option values by field name from a TOML recipe or a ``manifest.json``; unknown keys fail,
    naming the closest valid one."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
        document = json.loads(text) if file.suffix == ".json" else None
        table = document.get("recipe") if file.suffix == ".json" else tomllib.loads(text)
    except OSError as error:
        raise ObjcliError(f"--recipe {path}: {error.strerror}; pass a TOML recipe or a manifest.json") from None
    except (ValueError, AttributeError) as error:
        raise ObjcliError(
            f"--recipe {path}: not a valid recipe ({error}); pass a TOML file or a manifest.json"
        ) from None
    if not isinstance(table, dict):
        raise ObjcliError(f"--recipe {path}: holds no recipe; pass a TOML file or a manifest.json written by objcli")
    _warn_other_version(path, document, warn)
    by_key, values = _by_key(), {}
    for key, value in table.items():
        if key == "inputs":
            values["inputs"] = list(_typed(value, tuple[str, ...], f"--recipe {path}: 'inputs'"))
            continue
        if key not in by_key:
            close = difflib.get_close_matches(key, [*by_key, "inputs"], n=1)
            hint = f"did you mean '{close[0]}'?" if close else "see 'objcli transform --help'"
            raise ObjcliError(f"--recipe {path}: unknown key '{key}'; {hint}")
        name, hint = by_key[key]
        values[name] = _typed(value, hint, f"--recipe {path}: '{key}'")
    return values


def _warn_other_version(path: str, document: dict | None, warn) -> None:
    """A manifest written by another objcli (or manifest version) may mean other defaults: say so."""
    from . import __version__
    from .storage.manifest import MANIFEST_VERSION

    if warn is None or not isinstance(document, dict):
        return
    written = (document.get("objcli_version"), document.get("manifest_version"))
    if written != (__version__, MANIFEST_VERSION):
        warn(
            f"--recipe {path}: written by objcli {written[0]} (manifest version {written[1]}), this is {__version__} "
            f"(manifest version {MANIFEST_VERSION}); options it does not name take this version's defaults"
        )


def to_toml(table: dict[str, Any]) -> str:
    """A flat table of strings, numbers, booleans and lists as TOML (JSON strings are TOML strings)."""
    lines = []
    for key, value in table.items():
        text = json.dumps(value, ensure_ascii=False)
        lines.append(f"{key} = {text}")
    return "\n".join(lines) + "\n"


def objective_context(config: TransformConfig) -> ObjectiveContext:
    """What the objective knows of the run (objectives never read the configuration or the packer's name)."""
    return ObjectiveContext(
        config.objective_options,
        config.seq_len if config.pad_to_multiple == 1 else config.sequence_limit,  # what a whole example may hold
        config.row_length,
        config.seed,
        config.bos,
        config.eos,
        PACKERS[config.packing].pads_rows(config.remainder),
        config.packing != "none",
        config.provenance,
        config.value_types,
    )


def build_objective(config: TransformConfig, tokenizer: Tokenizer) -> Objective:
    """The objective a configuration makes: the same in the run's setup, each worker and a plan's reader."""
    return REGISTRY.named(config.objective)(objective_context(config), tokenizer)
