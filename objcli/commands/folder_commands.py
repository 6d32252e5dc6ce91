"""The commands that read or rebuild a finished output folder, as Click commands (``cli.py`` adds them
to ``objcli``): inspect, verify, stats, trace, merge, reshard and export-tokenizer
(``FOLDER_COMMANDS``). Heavy imports happen inside each command, so ``--help`` stays fast."""

from __future__ import annotations

import errno
import sys

import click

from ..cli_options import Fail as _Fail
from ..cli_options import warn_line
from ..errors import ObjcliError
from ..formats import FORMAT_NAMES
from ..run.progress import configure as configure_progress
from ..storage.remote import readable_output


def _damaged(folder: str, error: Exception) -> _Fail:
    """An output whose files do not match what its manifest says (edited, truncated, mixed with another
    run's): one line naming it, never a traceback."""
    detail = str(error).splitlines()[0] if str(error) else ""
    return _Fail(
        f"{folder}: its files do not match its manifest ({type(error).__name__}: {detail[:200]}); "
        f"run 'objcli verify {folder}', and rerun the transform with --overwrite to rebuild it"
    )


@click.command("export-tokenizer")
@click.argument("folder")
@click.option("-o", "--output", required=True, help="Folder to write the tokenizer into.")
@click.option("-t", "--tokenizer", default=None, help="Tokenizer, if it moved since the run.")
@click.option("--overwrite", is_flag=True, help="Replace tokenizer files already in the output folder.")
def export_tokenizer_command(folder, output, tokenizer, overwrite):
    """Write the tokenizer of an output FOLDER with every special objcli allocated added at its id,
    so vocabulary size and decoding downstream match the shards. Example:

        objcli export-tokenizer shards/ -o shards-tokenizer/
    """
    from .export_tokenizer import export_tokenizer

    try:
        with readable_output(folder, only=("manifest.json",)) as local:  # a URL too, as stats and verify read
            result = export_tokenizer(local, output, tokenizer, overwrite)
    except ObjcliError as error:
        raise _Fail(str(error)) from None
    click.echo(
        f"objcli: wrote {result['path']} ({result['kind']}, {result['vocab_size']:,} ids, {result['added']} added)",
        err=True,
    )


@click.command("inspect")
@click.argument("folder")
@click.option("-n", "--rows", type=click.IntRange(min=0), default=3, show_default=True, help="Rows to show.")
@click.option("-t", "--tokenizer", default=None, help="Tokenizer, if it moved since the run.")
@click.option("--split", default=None, help="Show this split's rows, numbered within it (train, validation, ...).")
@click.option("--start", type=click.IntRange(min=0), default=0, show_default=True, help="The first row to show.")
@click.option("--color/--no-color", default=None, help="Colour segments [default: when stdout is a terminal].")
def inspect_command(folder, rows, tokenizer, split, start, color):
    """Decode rows of an output FOLDER, with segments and padding made visible. Example:

    objcli inspect shards/ --split validation --start 48 --rows 2
    """
    from .show import inspect_output

    colour = sys.stdout.isatty() if color is None else color
    try:
        with readable_output(folder) as local:
            for line in inspect_output(local, rows, tokenizer, colour, split, start):
                click.echo(line, color=colour)
    except ObjcliError as error:
        raise _Fail(str(error)) from None
    except BrokenPipeError:
        raise
    except Exception as error:  # noqa: BLE001 - a damaged output is bad input: one line
        raise _damaged(folder, error) from None


@click.command("verify")
@click.argument("folder")
def verify_command(folder):
    """Re-read every shard of an output FOLDER and check it against the manifest: sha256, rows,
    schema and dtypes, and the objective's invariants. Exit status 0 only if every check holds.

        objcli verify shards/
    """
    from .verify import verify_output

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


@click.command("stats")
@click.argument("folder")
@click.option("--plot", "plot_path", default=None, help="Write a PNG with the length histogram and the fractions.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def stats_command(folder, plot_path, as_json):
    """What the trainer will see in an output FOLDER: rows, tokens, supervised tokens, padding,
    examples per row, length distribution, per-denoiser counts. Example:

        objcli stats shards/ --plot stats.png
    """
    import json

    from .stats import compute_stats, render_text
    from .stats_plot import check_plot_path, plot

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
            raise _Fail(
                f"{command}: {output}: no space left on the device for the new shards (what was there is "
                "unchanged); free some space, or write them to another disk with -o, and rerun"
            ) from None
        raise _Fail(f"{command}: {error.filename or output}: {error.strerror or error}; check the folders") from None


@click.command("merge")
@click.argument("sources", nargs=-1, required=True)
@click.option("-o", "--output", required=True, help="The merged output folder.")
@click.option("--overwrite", is_flag=True, help="Replace what the output folder holds.")
@click.option(
    "--shuffle-rows",
    "shuffle_seed",
    type=click.IntRange(0, 2**64 - 1),
    default=None,
    metavar="SEED",
    help="One permutation of all the merged rows, keyed to SEED (shards of the first source's --shard-size).",
)
@click.option("-q", "--quiet", is_flag=True, help="No summary line.")
def merge_command(sources, output, overwrite, shuffle_seed, quiet):
    """Merge finished outputs (SOURCES) of one tokenizer, objective, columns and format into one
    output: shards hard-linked (or copied) under one numbering, Megatron bin/idx pairs joined into
    one pair per split, one manifest with totals and per-source provenance. Example:

        objcli merge web/ code/ books/ -o all/
    """
    from .merge import merge

    configure_progress(quiet)
    manifest = _building("merge", output, lambda: merge(list(sources), output, overwrite, shuffle_seed, warn_line))
    if not quiet:
        t = manifest["totals"]
        click.echo(
            f"objcli merge: {len(sources)} outputs -> {output}: {t['shards']:,} shards, {t['rows']:,} rows, "
            f"{t['tokens']:,} tokens, {t['documents_written']:,} documents",
            err=True,
        )


@click.command("reshard")
@click.argument("source")
@click.option("--shard-size", default=None, help="Rows per shard (10000) or bytes of token data (1GB).")
@click.option(
    "--num-shards",
    type=int,
    default=None,
    help="Shards per split instead of --shard-size, rows balanced to within one (8 for 8 GPUs).",
)
@click.option(
    "-o", "--output", default=None, help="The new output folder (default: SOURCE itself, in place, atomically)."
)
@click.option("--overwrite", is_flag=True, help="Replace what the output folder holds.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(FORMAT_NAMES),
    default=None,
    help="Write the rows in this row format (default: the source's); a plan's rows are made: --format arrow.",
)
@click.option("-q", "--quiet", is_flag=True, help="No summary line.")
def reshard_command(source, shard_size, num_shards, output, output_format, overwrite, quiet):
    """The rows of a finished output SOURCE, byte-identical and in order, cut into shards of another
    size, in its format; the manifest rewritten. In place without -o (the old output stays valid
    until one atomic commit; a killed reshard is finished by the same command). Example:

        objcli reshard shards/ --shard-size 1GB -o shards-1gb/
    """
    from .reshard import reshard

    configure_progress(quiet)
    manifest = _building(
        "reshard",
        output or source,
        lambda: reshard(source, output, shard_size, overwrite, num_shards=num_shards, output_format=output_format),
    )
    if not quiet:
        t = manifest["totals"]
        click.echo(
            f"objcli reshard: {source} -> {output or 'in place'}: {t['shards']:,} shards, {t['rows']:,} rows", err=True
        )


@click.command("trace")
@click.argument("folder")
@click.argument("row", type=click.IntRange(min=0))
@click.option("--split", default=None, help="The split ROW counts in (an output with splits).")
@click.option("--json", "as_json", is_flag=True, help="Print the spans as JSON: file, record, chars, segment.")
def trace_command(folder, row, split, as_json):
    """Where each segment of ROW (0-based, in shard order) of FOLDER comes from: its input file, record
    and character span, and the text itself where the file can be read. Needs --provenance. Example:

    objcli trace shards/ 1234
    """
    import json

    from .trace import trace, trace_lines

    try:
        with readable_output(folder) as local:
            if as_json:
                click.echo(json.dumps(trace(local, row, split)))
            else:
                for line in trace_lines(local, row, split):
                    click.echo(line)
    except ObjcliError as error:
        raise _Fail(str(error)) from None
    except BrokenPipeError:  # `objcli trace OUT 3 | head`: the reader went away, not a damaged output
        raise
    except Exception as error:  # noqa: BLE001 - a damaged output is bad input: one line
        raise _damaged(folder, error) from None


FOLDER_COMMANDS = [
    export_tokenizer_command,
    inspect_command,
    verify_command,
    stats_command,
    merge_command,
    reshard_command,
    trace_command,
]


SHOWING = ("inspect", "stats", "trace", "help")  # commands whose output is what they print


def check_output_open(command: list[str]) -> None:
    """A command that shows what it finds, with standard output closed (``>&-``), fails as ``ls >&-`` does."""
    if command and command[0] in SHOWING and getattr(sys.stdout, "closed_at_start", False):
        raise ObjcliError(
            f"{command[0]}: standard output is closed, so nothing would be shown; run it with output open"
        )
