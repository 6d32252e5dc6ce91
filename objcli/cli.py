"""The command line: a thin Click layer over the library API. Here: ``transform``, ``tokenize``,
``train-tokenizer`` and ``help``; the commands over an output folder are ``commands/folder_commands.py``'s.

Heavy imports (NumPy, pyarrow, SentencePiece) happen inside commands so ``--help`` stays fast.
"""

from __future__ import annotations

import signal
import sys
import time

import click

from . import __version__
from .cli_options import Fail as _Fail
from .cli_options import TokenizeCommand, TransformCommand, collect_values, tokenize_values, warn_line
from .commands.folder_commands import FOLDER_COMMANDS, check_output_open
from .commands.stops import (
    TERMINATED,
    Interrupted,
    Terminated,
    TerminatedLine,
    raise_terminated,
    reader_went_away,
    said,
)
from .errors import INTERRUPTED, ObjcliError, missing_module
from .options import TEXT_UNITS
from .run.progress import configure as configure_progress
from .run.progress import phase


class _Group(click.Group):
    def resolve_command(self, ctx, args):
        name, command, rest = super().resolve_command(ctx, args)
        check_output_open([name] if name else [])
        return name, command, rest

    def invoke(self, ctx):
        """Ctrl-C and SIGTERM are one line saying how to go on, not Click's "Aborted!" (nor a traceback)."""
        previous = signal.signal(signal.SIGTERM, raise_terminated)
        try:
            return super().invoke(ctx)
        except Terminated:
            said.append(True)
            raise TerminatedLine(TERMINATED) from None
        except KeyboardInterrupt:
            raise Interrupted(INTERRUPTED) from None
        except BrokenPipeError:
            reader_went_away()
        except ObjcliError as error:  # raised before a command's own handling (a bad OBJCLI_PROGRESS)
            raise _Fail(str(error)) from None
        except ModuleNotFoundError as error:  # an optional module a feature imports: name its extra
            missing = missing_module(error)
            if missing is None:
                raise
            raise _Fail(str(missing)) from None
        finally:
            signal.signal(signal.SIGTERM, previous)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="objcli")
def main() -> None:
    """Turn raw text into training-ready shards for a pretraining objective."""


@main.command(cls=TransformCommand, context_settings={"max_content_width": 132, "terminal_width": 132})
def transform(**values):
    """Tokenize INPUTS and write training-ready shards.

    INPUTS are files, folders (searched recursively) and globs; '-' reads standard input. Example:

        objcli transform corpus/ -t tok.model --objective clm --seq-len 2048 -o shards/
    """
    from .recipe import config_from_values, recipe_of, to_toml
    from .transform import transform as run_transform

    ctx = click.get_current_context()
    try:
        given, execution = collect_values(ctx, values)
        appended = None
        if execution.pop("append"):
            from .run.append import appended_values

            given, appended = appended_values(given, execution)
            if appended.get("config", {}).get("token_store"):
                raise ObjcliError(
                    f"--append: {given['output']} is a token store; add the new inputs to it with "
                    f"objcli tokenize NEW -t TOKENIZER -o {given['output']} --append"
                )
        config = config_from_values(_with_store_tokenizer(given))
        if execution.pop("print_recipe"):
            click.echo(to_toml(recipe_of(config)), nl=False)
            return
        _check_complete(config)
        bar = _TransformProgress() if configure_progress(execution.pop("quiet")) else None
        try:
            summary = run_transform(config, **execution, progress=bar, warn=warn_line, append=appended)
        finally:
            if bar:
                bar.close()
    except ObjcliError as error:
        raise _Fail(str(error)) from None
    summary.defaulted = tuple(n for n in ("seq_len",) if n not in given)
    # A person at a terminal reads labelled lines; a log or a pipe keeps one line a run.
    click.echo(summary.lines() if sys.stderr.isatty() else summary.line(), err=True)


def _with_store_tokenizer(given: dict) -> dict:
    """A run over token stores finds the tokenizer where they name it, when none is given."""
    if given.get("tokenizer"):
        return given
    from .order.mixture import parse_sources
    from .run.stores import store_tokenizer

    sources = [p for ps in parse_sources(tuple(given.get("source", ()))).values() for p in ps]
    found = store_tokenizer([*given.get("inputs", ()), *sources])
    return {**given, "tokenizer": found} if found else given


def _check_complete(config) -> None:
    named = (("INPUTS", config.inputs or config.source), ("--tokenizer", config.tokenizer), ("--output", config.output))
    missing = [name for name, value in named if not value]
    if missing:
        raise ObjcliError(f"missing {', '.join(missing)}; give them on the command line or in the --recipe")


@main.command(cls=TokenizeCommand, context_settings={"max_content_width": 132, "terminal_width": 132})
def tokenize(**values):
    """Tokenize INPUTS once into a token store, which every transform then reads with no tokenizer run.

    The store keeps each document's ids (2 bytes a token under a 65,536-id vocabulary), in the text
    run's partitions and batches: `objcli transform STORE --objective X ...` writes the same shards as
    the same command over the text. Example:

        objcli tokenize corpus/ -t tok.model -o store/ && objcli transform store/ --objective ul2 -o ul2/
    """
    from .recipe import config_from_values
    from .stores import WHOLE_DOCUMENTS
    from .transform import tokenize as run_tokenize

    try:
        given, execution, kind = tokenize_values(values)
        missing = [
            n
            for n, key in (("INPUTS", "inputs"), ("--tokenizer", "tokenizer"), ("--output", "output"))
            if not given.get(key)
        ]
        if missing:
            raise ObjcliError(f"missing {', '.join(missing)}; objcli tokenize INPUTS -t TOKENIZER -o STORE")
        if given["output"] == "-":
            raise ObjcliError("-o -: objcli tokenize writes a token store, a folder; give -o STORE")
        appended = None
        if execution.pop("append"):
            from .run.append import appended_values

            given, appended = appended_values(given, execution)
            kind = _appended_kind(appended, kind)
        config = config_from_values(given)
        bar = _TransformProgress() if configure_progress(execution.pop("quiet")) else None
        try:
            summary = run_tokenize(
                config, kind or WHOLE_DOCUMENTS, **execution, progress=bar, warn=warn_line, append=appended
            )
        finally:
            if bar:
                bar.close()
    except ObjcliError as error:
        raise _Fail(str(error)) from None
    click.echo(store_line(summary), err=True)


def _appended_kind(manifest: dict, given):
    """What ``--append`` adds to: a token store, of the kind asked (the kind asked for must be its kind)."""
    from .stores import parse

    kind = parse(manifest.get("config", {}).get("token_store"))
    if not kind:
        raise ObjcliError("--append: the output is no token store; append to it with objcli transform --append")
    if given and given != kind:
        flag = given.option.flag
        raise ObjcliError(f"--append: {f'{flag} {given.parameter}'.strip()}: the store holds {kind}; drop {flag}")
    return kind


def store_line(summary) -> str:
    """``objcli tokenize``'s one summary line."""
    m = summary.manifest
    t, size = m["totals"], m["token_store"]["bytes"]
    skipped = ", ".join(f"{n:,} {reason}" for reason, n in t["skipped_by_reason"].items())
    # A chat store's records the template cannot render: kept, so a derived run skips and counts them.
    unrendered = ", ".join(f"{n:,} {k.removeprefix('not_rendered:')}" for k, n in t.items() if "not_rendered:" in k)
    return (
        f"objcli tokenize: {t['documents_read']:,} documents read, {t['documents_written']:,} stored"
        f"{f' ({unrendered} not rendered: a derived run skips them)' if unrendered else ''}"
        f"{f', skipped {skipped}' if skipped else ''}; {t['tokens']:,} tokens ({m['token_store']['ids_dtype']}): "
        f"{size['tokens'] / max(t['tokens'], 1):.2f} bytes a token, {size['boundaries_and_metadata']:,} bytes of "
        f"boundaries and metadata; {t['shards']:,} shards -> {summary.output} in {summary.seconds:.1f}s"
        + (
            f"; {summary.kept:,} partitions kept from the interrupted run"
            if summary.kept and not summary.appended
            else ""
        )
        + (f"; appended after the store's {summary.kept:,} partitions" if summary.appended else "")
        + (" (nothing to do: the store is complete)" if summary.already_complete else "")
    )


class _TransformProgress:
    """The run's phases as ``run/progress.py`` shows them: bytes of input against the total for the
    partitions (documents, MB of text and tokens/s beside), a named phase for a first pass or the
    row shuffle."""

    def __init__(self):
        self.display = None
        self.text_bytes = self.tokens = self.documents = 0
        self.started = time.monotonic()

    def __call__(self, progress) -> None:
        if progress.phase:
            self.close()
            unit = "B" if progress.phase in ("transform", "tokenize") else "step"  # the run's bytes of input
            self.display = phase(progress.phase, progress.total if unit == "B" else None, unit, progress.done)
            return
        self.text_bytes += progress.text_bytes
        self.tokens += progress.tokens
        self.documents += progress.documents
        rate = self.tokens / max(time.monotonic() - self.started, 1e-9)
        if self.display is not None:
            self.display.update(
                progress.input_bytes,
                f"{self.documents:,} docs, {self.text_bytes / 1e6:.1f} MB of text, {rate:,.0f} tokens/s",
            )

    def close(self) -> None:
        if self.display is not None:
            self.display.close()
            self.display = None


@main.command("train-tokenizer", context_settings={"show_default": True})
@click.argument("inputs", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    required=True,
    help="The file to write: NAME.model (SentencePiece) or tokenizer.json (byte-level BPE).",
)
@click.option("--vocab-size", type=int, required=True, help="Pieces in the model, special pieces included.")
@click.option("--model-type", type=click.Choice(["unigram", "bpe"]), default="unigram")
@click.option(
    "--preset",
    type=click.Choice(["text", "code"]),
    default="text",
    help="text: NFKC, whitespace collapsed, line by line; code: text kept exactly, newlines learnable.",
)
@click.option("--special", multiple=True, help="Reserve a special piece (repeatable), e.g. --special '[MASK]'.")
@click.option("--text-key", default="text", help="JSON field or Parquet column holding the text (meta.body: nested).")
@click.option("--text-unit", type=click.Choice(TEXT_UNITS), default="line")
@click.option("--character-coverage", type=click.FloatRange(0.5, 1.0), default=0.9995)
@click.option(
    "--max-lines",
    type=click.IntRange(min=0),
    default=None,
    help="Train on at most this many lines (0: all) [default: a sample of 400 characters a piece].",
)
@click.option(
    "--threads", type=click.IntRange(1, 1024), default=1, help="Trainer threads (1 keeps training reproducible)."
)
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
def train_tokenizer_command(quiet, **params):
    """Train a SentencePiece model on INPUTS (read like 'transform' reads them). Example:

    objcli train-tokenizer corpus/ --vocab-size 32000 --special '[MASK]' -o tok.model
    """
    from .commands.train_tokenizer import TrainingRequest, train_tokenizer, training_line

    ctx = click.get_current_context()
    given = {name for name in ctx.params if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE}
    request = TrainingRequest(**{**params, "inputs": list(params["inputs"])})  # the options are its fields
    try:
        if request.byte_level_bpe:
            from .commands.train_bpe import check_bpe_request

            check_bpe_request(request, given)
        result = train_tokenizer(request, progress=not quiet)
    except ObjcliError as error:
        raise _Fail(str(error)) from None
    except KeyboardInterrupt as stop:  # the trainer was killed first: no model, no temp file
        what = "terminated (SIGTERM)" if isinstance(stop, Terminated) else "interrupted"
        error = TerminatedLine if isinstance(stop, Terminated) else Interrupted
        raise error(f"train-tokenizer: {what}; the trainer was stopped and no model written") from None
    click.echo(training_line(request, result), err=True)


@main.command("help")
@click.argument("topic", required=False)
def help_command(topic):
    """The manual, one page per TOPIC, as installed (the same pages as objcli/docs/ in the
    repository). Without a TOPIC, the list of pages. Example:

        objcli help objectives | less
    """
    from .docs import TOPICS, page

    if topic is None:
        width = max(map(len, TOPICS))
        click.echo("objcli help TOPIC prints a page of the manual:\n")
        for name, about in TOPICS.items():
            click.echo(f"  {name:{width}}  {about}")
        return
    if topic not in TOPICS:
        import difflib

        close = difflib.get_close_matches(topic, list(TOPICS), n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise _Fail(f"help {topic}: no such page; {hint}'objcli help' lists them")
    click.echo(page(topic), nl=False)


for _command in FOLDER_COMMANDS:  # the commands over an output folder (commands/folder_commands.py)
    main.add_command(_command)


if __name__ == "__main__":
    main()
