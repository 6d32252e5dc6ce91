"""The options of ``objcli transform``, generated from their one definition (``options.option``
metadata on ``TransformConfig``, on each objective's options and on ``Execution`` below).

``objcli transform --objective mlm --help`` lists the run's options and mlm's own, nothing else.
Values come from the command line, then the ``--recipe`` file, then the dataclass defaults.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from functools import cached_property

import click

from .errors import ObjcliError
from .options import HELP_SECTIONS, ROWS, RUN, check_field, flag_of, option, option_fields


@dataclass(frozen=True)
class Execution:
    """How a run executes: never part of its output, its config_sha256 or its recipe."""

    workers: int | None = option(
        None, "Workers (threads or processes) [default: all cores].", minimum=1, maximum=4096, group=RUN
    )
    executor: str = option(
        "local",
        "local: a pool on this machine; dask: one Dask task per partition.",
        choices=("local", "dask"),
        group=RUN,
    )
    pool: str = option(
        "auto",
        "[--executor local] auto picks per run (see performance.md).",
        choices=("auto", "threads", "processes"),
        group=RUN,
    )
    scheduler: str | None = option(
        None, "[--executor dask] A running scheduler (tcp://host:8786) [default: a local cluster].", group=RUN
    )
    overwrite: bool = option(False, "Replace whatever an earlier run left in the output folder.", group=RUN)
    resume: bool = option(
        False, "Insist on continuing an interrupted run (the same configuration resumes anyway).", group=RUN
    )
    quiet: bool = option(False, "No progress bar (the summary line is still printed).", short="-q", group=RUN)
    recipe: str | None = option(
        None, "Configuration from a TOML recipe or a manifest.json (options given here win).", group=RUN
    )
    append: bool = option(
        False, "Add INPUTS to the finished output -o as partitions after its own, with its configuration.", group=RUN
    )
    print_recipe: bool = option(False, "Print the resolved configuration as a TOML recipe and exit.", group=RUN)


def _click_type(f: dataclasses.Field, hint):
    base = [t for t in typing.get_args(hint) if t is not type(None)] or [hint]
    kind = base[0]
    if f.metadata["choices"] and kind is str:
        return click.Choice(tuple(f.metadata["choices"]))
    return {int: click.INT, float: click.FLOAT}.get(kind, click.STRING)


def filled_help(text: str) -> str:
    """An option's help with the registry's list filled in (``{objectives}``: every registered
    objective, so a new one is in --help and the options page with nothing else to edit)."""
    if "{objectives}" not in text:
        return text
    from .objectives import REGISTRY

    return text.replace("{objectives}", ", ".join(REGISTRY.names()))


def _make_option(f: dataclasses.Field, hint, owners: set[str] | None = None, hidden_name: str | None = None):
    """A Click option for a field; ``hidden_name``: an old spelling, stored as ``legacy_<field>``."""
    meta = f.metadata
    names = [hidden_name] if hidden_name else [flag_of(f), *([meta["short"]] if meta["short"] else [])]
    dest = "legacy_" + f.name if hidden_name else f.name
    help_text = (f"[{', '.join(sorted(owners))}] " if owners else "") + filled_help(meta["help"])
    if bool in (typing.get_args(hint) or (hint,)):
        if f.default is False:  # off unless given: a plain flag
            return click.Option([*names, dest], is_flag=True, default=None, hidden=bool(hidden_name), help=help_text)
        names[0] = f"{names[0]}/--no-{names[0][2:]}"
        return click.Option([*names, dest], default=None, hidden=bool(hidden_name), help=help_text)
    multiple = tuple in (typing.get_origin(hint), hint)  # a repeatable option (--source)
    return click.Option(
        [*names, dest],
        type=_click_type(f, hint),
        default=None,
        hidden=bool(hidden_name),
        help=help_text,
        show_default=False,
        multiple=multiple,
    )


def _options_of(fields: list[tuple[dataclasses.Field, object, set[str] | None]]) -> list[click.Option]:
    """Click options for (field, type hint, objectives that take it), each with its hidden old spellings."""
    params = []
    for f, hint, owners in fields:
        params.append(_make_option(f, hint, owners))
        params += [_make_option(f, hint, hidden_name=alias) for alias in f.metadata["aliases"]]
    return params


def _run_fields(cls) -> list[tuple[dataclasses.Field, object, None]]:
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name], None) for f in option_fields(cls)]


class TransformCommand(click.Command):
    """Builds its options on first use (so ``objcli --help`` imports nothing heavy) and shows, in
    ``--help``, only the options of the objective named on the command line."""

    @cached_property
    def generated(self) -> dict[str, list[click.Option]]:
        from .config import TransformConfig
        from .objectives import REGISTRY
        from .recipe import objective_fields

        objective_params = _options_of(
            [
                (f, typing.get_type_hints(REGISTRY.named(sorted(objectives)[0]).options_type)[name], objectives)
                for name, (f, objectives) in objective_fields().items()
            ]
        )
        inputs = click.Argument(["inputs"], nargs=-1)
        legacy_pack = click.Option(["--pack", "legacy_pack"], is_flag=True, default=None, hidden=True)
        run = [inputs, *_options_of(_run_fields(TransformConfig) + _run_fields(Execution)), legacy_pack]
        return {"run": run, "objective": objective_params}

    def get_params(self, ctx):
        return [*self.generated["run"], *self.generated["objective"], *super().get_params(ctx)]

    def parse_args(self, ctx, args):
        ctx.meta["objective"] = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "--objective"), None)
        return super().parse_args(ctx, args)

    def format_options(self, ctx, formatter):
        """One section per group of options (``options.HELP_SECTIONS``), the named objective's own
        options after the rows section."""
        from .config import TransformConfig
        from .objectives import REGISTRY

        name = ctx.meta.get("objective")
        defaults = {f.name: f.default for cls in (TransformConfig, Execution) for f in dataclasses.fields(cls)}
        groups = {
            f.name: f.metadata.get("group") for cls in (TransformConfig, Execution) for f in dataclasses.fields(cls)
        }
        own: set[str] = set()
        if name:
            objective = REGISTRY.named(name)
            own = {f.name for f in option_fields(objective.options_type)}
            defaults.update({f: getattr(objective.options_type(), f) for f in own})
            groups.update({f: f"{objective.name} options" for f in own})
        shown = [p for p in self.generated["run"] if isinstance(p, click.Option) and not p.hidden]
        shown += [p for p in self.generated["objective"] if p.name in own and not p.hidden]
        sections: dict[str, list] = {}
        for param in shown + super().get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            opts, text = record
            if param.name in own:
                text = text.split("] ", 1)[-1]  # the [objectives] prefix: this one is named
            value = defaults.get(param.name)
            if value not in (None, False, "", ()):
                text += f"  [default: {value}]"
            sections.setdefault(groups.get(param.name) or RUN, []).append((opts, text))
        order = [
            *HELP_SECTIONS[: HELP_SECTIONS.index(ROWS) + 1],
            *(s for s in sections if s not in HELP_SECTIONS),
            *HELP_SECTIONS[HELP_SECTIONS.index(ROWS) + 1 :],
        ]
        for section in (s for s in order if s in sections):
            with formatter.section(section):
                formatter.write_dl(sections[section], col_max=40)  # choice lists stay on the option's line
        if not name:
            formatter.write_paragraph()
            formatter.write_text("Each objective has options of its own: 'objcli transform --objective NAME --help'.")


def warn_line(message: str) -> None:
    click.echo(f"objcli: warning: {message}", err=True)


def collect_values(ctx: click.Context, values: dict) -> tuple[dict, dict]:
    """(option values that shape the output, by field name; execution settings): what the command
    line gave, then what the recipe gives, and nothing else (the dataclass defaults do the rest)."""
    from .objectives import REGISTRY
    from .recipe import load_recipe

    given = {}
    for name, value in values.items():
        if name.startswith("legacy_") or value is None or value == ():
            continue
        given[name] = value
    for name, value in values.items():  # hidden old spellings: --preset, --mask
        if name.startswith("legacy_") and value is not None and name != "legacy_pack":
            given.setdefault(name.removeprefix("legacy_"), value)
    execution_names = {f.name for f in dataclasses.fields(Execution)}
    execution = {n: given.pop(n, None) for n in execution_names}
    recipe_path = execution.pop("recipe")
    recipe = load_recipe(recipe_path, warn_line) if recipe_path else {}
    values_out = {**recipe, **given}
    if values.get("legacy_pack"):  # --pack: the packer it meant for this objective
        objective = REGISTRY.named(values_out.get("objective", "clm"))
        options = {k: v for k, v in values_out.items() if k in {f.name for f in option_fields(objective.options_type)}}
        values_out.setdefault("packing", objective.legacy_pack(objective.options_type(**options)))
    for f in dataclasses.fields(Execution):  # --workers 0 was "all cores", silently
        check_field(f, execution.get(f.name))
    for flag in ("overwrite", "resume", "quiet", "print_recipe", "append"):
        execution[flag] = bool(execution[flag])
    execution["executor"] = execution["executor"] or "local"
    execution["pool"] = execution["pool"] or "auto"
    return values_out, execution


# What `objcli tokenize` takes: how the text is read and cut into documents and batches, the tokenizer,
# where the store goes and how its shards are cut, and how the run executes.
TOKENIZE_FIELDS = (
    "tokenizer", "output", "engine", "text_key", "text_unit", "input_format", "max_document_chars",
    "partition_size", "batch_size", "shard_size", "strict", "provenance",
)  # fmt: skip
TOKENIZE_HELP = {
    "provenance": "Keep where each document comes from and its tokens' character ends (a few bytes a document), "
    "so transforms from the store can record --provenance.",
    "bos": "BOS before a prompt/completion pair's text [default: as the tokenizer's own template].",
    "eos": "EOS after a prompt/completion pair's text [default: yes].",
    "append": "Add INPUTS to the finished store -o as partitions after its own, with its configuration.",
}
TOKENIZE_EXECUTION = ("workers", "executor", "pool", "scheduler", "overwrite", "resume", "quiet", "append")


def _store_kind() -> type:
    """``objcli tokenize``'s options that ask for a kind of store, one a registered kind (built on first
    use: the kinds live with what they read, which ``objcli --help`` does not import)."""
    from .stores import STORE_KINDS

    fields = []
    for kind in STORE_KINDS.values():
        asks = kind.option
        if asks is not None:
            default, kind_type = (None, str | None) if asks.takes_value else (False, bool)
            fields.append((asks.name, kind_type, option(default, asks.help, choices=asks.choices, group=RUN)))
    return dataclasses.make_dataclass("StoreKindOptions", fields, frozen=True)


def _renderings() -> dict[str, list]:
    """Each option a kind of store renders with -> the kinds that take it (--chat's template, ...)."""
    from .stores import renderings

    return renderings()


class TokenizeCommand(click.Command):
    """``objcli tokenize``'s options: the same definitions as transform's, those a store is made with."""

    @cached_property
    def generated(self) -> list[click.Parameter]:
        from .config import TransformConfig
        from .objectives.chat_options import ChatOptions

        fields = [f for f in _run_fields(TransformConfig) if f[0].name in TOKENIZE_FIELDS]
        fields += _run_fields(_store_kind())
        rendering = _renderings()
        fields += [f for f in _run_fields(TransformConfig) + _run_fields(ChatOptions) if f[0].name in rendering]
        fields += [f for f in _run_fields(Execution) if f[0].name in TOKENIZE_EXECUTION]
        options = _options_of(fields)
        for param in options:  # the same option, said of what a store keeps
            param.help = TOKENIZE_HELP.get(param.name, param.help)
            if param.name in rendering:
                flags = " or ".join(kind.option.flag for kind in rendering[param.name])
                param.help = f"With {flags}: {param.help}"
        return [click.Argument(["inputs"], nargs=-1), *options]

    def get_params(self, ctx):
        return [*self.generated, *super().get_params(ctx)]


def tokenize_values(values: dict) -> tuple[dict, dict, object]:
    """(the run's configuration values, how it executes, the ``stores.StoreKind`` asked for or None)
    from ``objcli tokenize``'s command line."""
    from .stores import asked_kind

    given = {k: v for k, v in values.items() if v not in (None, ())}
    execution = {name: given.pop(name, None) for name in TOKENIZE_EXECUTION}
    for f in dataclasses.fields(Execution):
        check_field(f, execution.get(f.name))
    for flag in ("overwrite", "resume", "quiet", "append"):
        execution[flag] = bool(execution[flag])
    execution["executor"] = execution["executor"] or "local"
    execution["pool"] = execution["pool"] or "auto"
    kind = asked_kind(given)
    if kind is not None and kind.renders:
        given["objective"] = kind.renders
    _check_renderings(given, kind)
    return {**given, "inputs": list(values.get("inputs") or ())}, execution, kind


def _check_renderings(given: dict, kind) -> None:
    """An option of rendering given to a store that does not render with it is one line naming the kinds that do."""
    for key, kinds in _renderings().items():
        if key not in given or type(kind) in kinds:
            continue
        flag = "--" + key.replace("_", "-")
        if kind is None or not kind.renders:
            owners = " or ".join(f"{k.label} (objcli tokenize {k.option.flag})" for k in kinds)
            raise ObjcliError(f"{flag}: applies to {owners}; give it to the transform")
        owners = " or ".join(f"{k.label} ({k.option.flag})" for k in kinds)
        own = ", ".join("--" + k.replace("_", "-") for k in (*kind.rendering, *kind.rendering_run))
        raise ObjcliError(f"{flag}: applies to {owners}; {kind.label} renders with {own} only")


class Fail(click.ClickException):
    """Prints ``Error: <one line>`` and exits 1."""
