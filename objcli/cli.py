"""The command line: a thin Click layer over the library API.

Heavy imports (NumPy, pyarrow, SentencePiece) happen inside commands so ``--help`` stays fast.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import time

import click

from . import __version__
from .cli_options import TransformCommand, collect_values, warn_line
from .errors import INTERRUPTED, ObjcliError, missing_module
from .readers.inputs import TEXT_UNITS
from .run.progress import configure as configure_progress
from .run.progress import phase
from .storage.remote import readable_output


class _Fail(click.ClickException):
    """Prints ``Error: <one line>`` and exits 1."""


class _Interrupted(click.ClickException):
    exit_code = 130  # as a shell reports a command stopped by SIGINT


class _Terminated(click.ClickException):
    exit_code = 143  # as a shell reports a command stopped by SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's stop, ``kill``), handled as Ctrl-C is: workers stopped, the lock
    released, one line; the default action left the pool's semaphores to a warning of their own."""


def _raise_terminated(signum, frame):
    raise Terminated


def _damaged(folder: str, error: Exception) -> _Fail:
    """An output whose files do not match what its manifest says (edited, truncated, mixed with another
    run's): one line naming it, never a traceback."""
    detail = str(error).splitlines()[0] if str(error) else ""
    return _Fail(f"{folder}: its files do not match its manifest ({type(error).__name__}: {detail[:200]}); "
                 f"run 'objcli verify {folder}', and rerun the transform with --overwrite to rebuild it")


class _Group(click.Group):
    def invoke(self, ctx):
        """Ctrl-C and SIGTERM are one line saying how to go on, not Click's "Aborted!" (nor a traceback)."""
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
        try:
            return super().invoke(ctx)
        except Terminated:
            raise _Terminated(INTERRUPTED.replace("interrupted", "terminated (SIGTERM)", 1)) from None
        except KeyboardInterrupt:
            raise _Interrupted(INTERRUPTED) from None
        except BrokenPipeError:
            _reader_went_away()
        except ModuleNotFoundError as error:  # an optional module a feature imports: name its extra
            missing = missing_module(error)
            if missing is None:
                raise
            raise _Fail(str(missing)) from None
        finally:
            signal.signal(signal.SIGTERM, previous)


def _reader_went_away() -> None:
    """Standard output's reader stopped reading (``objcli inspect OUT | head``): stop quietly with the
    status a shell gives a command ended by SIGPIPE, as Unix tools do; nothing is wrong with the output.
    Standard output goes to /dev/null first, so that the interpreter's last flush finds no pipe."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(141)


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
        given, runner = collect_values(ctx, values)
        appended = None
        if runner.pop("append"):
            from .run.append import appended_values

            given, appended = appended_values(given, runner)
        config = config_from_values(given)
        if runner.pop("print_recipe"):
            click.echo(to_toml(recipe_of(config)), nl=False)
            return
        if not (config.inputs or config.source) or not config.tokenizer or not config.output:
            missing = [n for n, v in (("INPUTS", config.inputs or config.source), ("--tokenizer", config.tokenizer),
                                      ("--output", config.output)) if not v]
            raise ObjcliError(f"missing {', '.join(missing)}; give them on the command line or in the --recipe")
        if runner["scheduler"] and runner["workers"] is not None:
            raise ObjcliError("--workers sizes a local pool or cluster; with --scheduler the cluster's own workers run")
        bar = _TransformProgress() if configure_progress(runner.pop("quiet")) else None
        try:
            summary = run_transform(config, **runner, progress=bar, warn=warn_line, append=appended)
        finally:
            if bar:
                bar.close()
    except ObjcliError as error:
        raise _Fail(str(error)) from None
    # A person at a terminal reads labelled lines; a log or a pipe keeps one line a run.
    click.echo(summary.lines() if sys.stderr.isatty() else summary.line(), err=True)


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
            unit = "B" if progress.phase == "transform" else "step"
            self.display = phase(progress.phase, progress.total if unit == "B" else None, unit, progress.done)
            return
        self.text_bytes += progress.text_bytes
        self.tokens += progress.tokens
        self.documents += progress.documents
        rate = self.tokens / max(time.monotonic() - self.started, 1e-9)
        if self.display is not None:
            self.display.update(progress.input_bytes, f"{self.documents:,} docs, {self.text_bytes / 1e6:.1f} MB of text, "
                                                      f"{rate:,.0f} tokens/s")

    def close(self) -> None:
        if self.display is not None:
            self.display.close()
            self.display = None


@main.command("train-tokenizer", context_settings={"show_default": True})
@click.argument("inputs", nargs=-1, required=True)
@click.option("-o", "--output", required=True, help="Where to write the .model file.")
@click.option("--vocab-size", type=int, required=True, help="Pieces in the model, special pieces included.")
@click.option("--model-type", type=click.Choice(["unigram", "bpe"]), default="unigram")
@click.option("--preset", type=click.Choice(["text", "code"]), default="text",
              help="text: NFKC, whitespace collapsed, line by line; code: text kept exactly, newlines learnable.")
@click.option("--special", multiple=True, help="Reserve a special piece (repeatable), e.g. --special '[MASK]'.")
@click.option("--text-key", default="text", help="JSON field or Parquet column holding the text (meta.body: nested).")
@click.option("--text-unit", type=click.Choice(TEXT_UNITS), default="line")
@click.option("--character-coverage", type=click.FloatRange(0.5, 1.0), default=0.9995)
@click.option("--max-lines", type=click.IntRange(min=0), default=0, help="Train on at most this many lines (0: all).")
@click.option("--threads", type=click.IntRange(1, 1024), default=1,
              help="Trainer threads (1 keeps training reproducible).")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
def train_tokenizer_command(inputs, output, vocab_size, model_type, preset, special, text_key, text_unit,
                            character_coverage, max_lines, threads, quiet):
    """Train a SentencePiece model on INPUTS (read like 'transform' reads them). Example:

        objcli train-tokenizer corpus/ --vocab-size 32000 --special '[MASK]' -o tok.model
    """
    from .commands.train_tokenizer import TrainingRequest, train_tokenizer

    request = TrainingRequest(list(inputs), output, vocab_size, model_type, preset, special, text_key, text_unit,
                              character_coverage, max_lines, threads)
    try:
        result = train_tokenizer(request, progress=not quiet)
    except ObjcliError as error:
        raise _Fail(str(error)) from None
    click.echo(f"objcli: wrote {result['path']} ({result['model_type']}, {result['vocab_size']:,} pieces, "
               f"preset {result['preset']}, trained on {result['sentences']:,} sentences)", err=True)


@main.command("export-tokenizer")
@click.argument("folder")
@click.option("-o", "--output", required=True, help="Folder to write the tokenizer into.")
@click.option("-t", "--tokenizer", default=None, help="Tokenizer, if it moved since the run.")
@click.option("--overwrite", is_flag=True, help="Replace tokenizer files already in the output folder.")
def export_tokenizer_command(folder, output, tokenizer, overwrite):
    """Write the tokenizer of an output FOLDER with every special objcli allocated added at its id,
    so vocabulary size and decoding downstream match the shards. Example:

        objcli export-tokenizer shards/ -o shards-tokenizer/
    """
    from .commands.export_tokenizer import export_tokenizer

    try:
        with readable_output(folder, only=("manifest.json",)) as local:  # a URL too, as stats and verify read
            result = export_tokenizer(local, output, tokenizer, overwrite)
    except ObjcliError as error:
        raise _Fail(str(error)) from None
    click.echo(f"objcli: wrote {result['path']} ({result['kind']}, {result['vocab_size']:,} ids, "
               f"{result['added']} added)", err=True)


@main.command("inspect")
@click.argument("folder")
@click.option("-n", "--rows", type=click.IntRange(min=0), default=3, show_default=True, help="Rows to show.")
@click.option("-t", "--tokenizer", default=None, help="Tokenizer, if it moved since the run.")
@click.option("--color/--no-color", default=None, help="Colour segments [default: when stdout is a terminal].")
def inspect_command(folder, rows, tokenizer, color):
    """Decode the first rows of an output FOLDER, with segments and padding made visible. Example:

        objcli inspect shards/ --rows 2
    """
    from .commands.show import inspect_output

    colour = sys.stdout.isatty() if color is None else color
    try:
        with readable_output(folder) as local:
            for line in inspect_output(local, rows, tokenizer, colour):
                click.echo(line, color=colour)
    except ObjcliError as error:
        raise _Fail(str(error)) from None
    except BrokenPipeError:
        raise
    except Exception as error:  # noqa: BLE001 - a damaged output is bad input: one line
        raise _damaged(folder, error) from None


@main.command("verify")
@click.argument("folder")
def verify_command(folder):
    """Re-read every shard of an output FOLDER and check it against the manifest: sha256, rows,
    schema and dtypes, and the objective's invariants. Exit status 0 only if every check holds.

        objcli verify shards/
    """
    from .commands.verify import verify_output

    configure_progress(False)
    try:
        with readable_output(folder) as local:
            report = verify_output(local)
    except Exception as error:  # noqa: BLE001 - a damaged output is bad input: one line
        if not isinstance(error, ObjcliError):
            raise _damaged(folder, error) from None
        raise _Fail(str(error)) from None
    for problem in report.problems:  # named as given, not as the copy of an output in object storage
        click.echo(f"objcli verify: {problem.replace(local, folder.rstrip('/'))}", err=True)
    click.echo(report.line().replace(local, folder.rstrip("/")), err=True)
    sys.exit(0 if report.ok else 1)


@main.command("stats")
@click.argument("folder")
@click.option("--plot", "plot_path", default=None, help="Write a PNG with the length histogram and the fractions.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def stats_command(folder, plot_path, as_json):
    """What the trainer will see in an output FOLDER: rows, tokens, supervised tokens, padding,
    examples per row, length distribution, per-denoiser counts. Example:

        objcli stats shards/ --plot stats.png
    """
    import json

    from .commands.stats import check_plot_path, compute_stats, plot, render_text

    configure_progress(as_json)  # JSON output is for programs

    if plot_path:
        try:
            check_plot_path(plot_path)
        except ObjcliError as error:
            raise _Fail(str(error)) from None
    try:
        with readable_output(folder) as local:
            stats = compute_stats(local)
    except ObjcliError as error:
        raise _Fail(str(error)) from None
    except Exception as error:  # noqa: BLE001 - a damaged output is bad input: one line
        raise _damaged(folder, error) from None
    if as_json:
        click.echo(json.dumps(stats, indent=2))
    else:
        for line in render_text(stats):
            click.echo(line)
    if plot_path:  # after the text: a failed plot never loses the figures
        try:
            plot(stats, plot_path)
        except ImportError:
            raise _Fail("--plot needs matplotlib; install it with: pip install 'objcli[plot]'") from None
        except OSError as error:
            raise _Fail(f"--plot {plot_path}: {error.strerror or error}; choose a writable path") from None


def _building(command: str, output: str, build) -> dict:
    """Run a command that builds an output from others: its errors, and the system's, as one line."""
    try:
        return build()
    except ObjcliError as error:
        raise _Fail(str(error)) from None
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _Fail(f"{command}: {output}: no space left on the device for the new shards (what was there is "
                        "unchanged); free some space, or write them to another disk with -o, and rerun") from None
        raise _Fail(f"{command}: {error.filename or output}: {error.strerror or error}; check the folders") from None


@main.command("merge")
@click.argument("sources", nargs=-1, required=True)
@click.option("-o", "--output", required=True, help="The merged output folder.")
@click.option("--overwrite", is_flag=True, help="Replace what the output folder holds.")
@click.option("--shuffle-rows", "shuffle_seed", type=click.IntRange(0, 2**64 - 1), default=None, metavar="SEED",
              help="One permutation of all the merged rows, keyed to SEED (shards of the first source's --shard-size).")
@click.option("-q", "--quiet", is_flag=True, help="No summary line.")
def merge_command(sources, output, overwrite, shuffle_seed, quiet):
    """Merge finished outputs (SOURCES) of one tokenizer, objective, columns and format into one
    output: shards hard-linked (or copied) under one numbering, Megatron bin/idx pairs joined into
    one pair per split, one manifest with totals and per-source provenance. Example:

        objcli merge web/ code/ books/ -o all/
    """
    from .commands.merge import merge

    configure_progress(quiet)
    manifest = _building("merge", output, lambda: merge(list(sources), output, overwrite, shuffle_seed, warn_line))
    if not quiet:
        t = manifest["totals"]
        click.echo(f"objcli merge: {len(sources)} outputs -> {output}: {t['shards']:,} shards, {t['rows']:,} rows, "
                   f"{t['tokens']:,} tokens, {t['documents_written']:,} documents", err=True)


@main.command("reshard")
@click.argument("source")
@click.option("--shard-size", default=None, help="Rows per shard (10000) or bytes of token data (1GB).")
@click.option("--num-shards", type=int, default=None,
              help="Shards per split instead of --shard-size, rows balanced to within one (8 for 8 GPUs).")
@click.option("-o", "--output", default=None, help="The new output folder (default: SOURCE itself, in place, atomically).")
@click.option("--overwrite", is_flag=True, help="Replace what the output folder holds.")
@click.option("-q", "--quiet", is_flag=True, help="No summary line.")
def reshard_command(source, shard_size, num_shards, output, overwrite, quiet):
    """The rows of a finished output SOURCE, byte-identical and in order, cut into shards of another
    size, in its format; the manifest rewritten. In place without -o (the old output stays valid
    until one atomic commit; a killed reshard is finished by the same command). Example:

        objcli reshard shards/ --shard-size 1GB -o shards-1gb/
    """
    from .commands.reshard import reshard

    configure_progress(quiet)
    manifest = _building("reshard", output or source,
                         lambda: reshard(source, output, shard_size, overwrite, num_shards=num_shards))
    if not quiet:
        t = manifest["totals"]
        click.echo(f"objcli reshard: {source} -> {output or 'in place'}: {t['shards']:,} shards, {t['rows']:,} rows",
                   err=True)


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


if __name__ == "__main__":
    main()
