"""The manual: one Markdown page per topic, shipped with the package so that ``objcli help TOPIC``
always prints the pages of the installed version. ``options.md`` is generated from the one
definition of each option (``options_reference``); a test fails when the page and the code differ,
and ``python -m objcli.docs`` rewrites it."""

from __future__ import annotations

import dataclasses
import typing
from importlib import resources

# Topic -> what it covers, in reading order.
TOPICS = {
    "quickstart": "from a clone to Llama-style shards read back by datasets",
    "inputs": "inputs, bad records, tokenizers and engines",
    "objectives": "every objective, exactly, with its reference",
    "packing": "packing, partitions, shuffles, splits and mixtures",
    "formats": "output formats, the trainers that read them, the manifest",
    "reliability": "atomic writes, resume, locks, accounting, memory",
    "storage": "object storage (s3://, gs://, hf://) and Dask clusters",
    "commands": "inspect, verify, stats, trace, merge, reshard, --append, export-tokenizer, train-tokenizer",
    "options": "every transform option (generated from the code)",
    "performance": "the benchmarks and what they show",
    "architecture": "module map, dependencies, adding an objective",
}


def page(topic: str) -> str:
    return resources.files(__name__).joinpath(f"{topic}.md").read_text(encoding="utf-8")


def _type_name(hint) -> str:
    names = [getattr(t, "__name__", str(t)) for t in (typing.get_args(hint) or (hint,)) if t is not type(None)]
    return {"str": "text", "int": "integer", "float": "number", "bool": "flag", "tuple": "text, repeatable"}.get(
        names[0] if names else "", names[0] if names else ""
    )


def _rows(options_type: type) -> list[str]:
    from ..cli_options import filled_help
    from ..options import flag_of, option_fields

    hints = typing.get_type_hints(options_type)
    rows = []
    for f in option_fields(options_type):
        meta = f.metadata
        bar = " \\| "
        kind = bar.join(map(str, meta["choices"])) if meta["choices"] else _type_name(hints[f.name])
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        shown = (
            "—" if default in (None, "", ()) else f"`{str(default).lower() if isinstance(default, bool) else default}`"
        )
        flag = (
            flag_of(f)
            if not (hints[f.name] is bool or "bool" in str(hints[f.name])) or f.default is False
            else f"{flag_of(f)}/--no-{flag_of(f)[2:]}"
        )
        help_text = filled_help(meta["help"]).replace("|", "\\|")
        rows.append(f"| `{flag}` | {kind} | {shown} | {help_text} |")
    return rows


def options_reference() -> str:
    """``objcli transform``'s options by section, then each objective's own, from their definitions."""
    from ..cli_options import Execution
    from ..config import TransformConfig
    from ..objectives import REGISTRY
    from ..options import HELP_SECTIONS, option_fields

    lines = [
        "# Options of `objcli transform`",
        "",
        "*Generated from the options' one definition in the code (`python -m objcli.docs` rewrites it; a test "
        "fails when it is stale). `objcli transform --objective NAME --help` prints the same for one objective.*",
        "",
    ]
    header = ["| option | value | default | what it does |", "|---|---|---|---|"]
    for section in HELP_SECTIONS:
        lines += [f"## {section}", "", *header]
        for owner in (TransformConfig, Execution):
            fields = {f.name for f in option_fields(owner) if f.metadata["group"] == section}
            lines += [row for row, f in zip(_rows(owner), option_fields(owner)) if f.name in fields]
        lines.append("")
    for name in REGISTRY.names():
        options_type = REGISTRY.named(name).options_type
        if option_fields(options_type):
            lines += [f"## `--objective {name}`", "", *header, *_rows(options_type), ""]
    return "\n".join([*lines, *_store_kinds()]).rstrip() + "\n"


def _store_kinds() -> list[str]:
    """``objcli tokenize``'s kinds of store, from their registry (``objcli/stores/``)."""
    from ..stores import STORE_KINDS

    lines = [
        "## What `objcli tokenize` keeps: kinds of token store",
        "",
        "| kind | asked for by | holds | its own columns | rendered by |",
        "|---|---|---|---|---|",
    ]
    for name, kind in STORE_KINDS.items():
        asked = f"`{kind.option.flag}{' VALUE' if kind.option.takes_value else ''}`" if kind.option else "(default)"
        columns = ", ".join(f"`{c.name}`" for c in kind.columns) or "—"
        renders = f"`--objective {kind.renders}`" if kind.renders else "—"
        lines.append(f"| `{name}` | {asked} | {kind.holds.value} | {columns} | {renders} |")
    return lines
