"""The command line: a thin Click layer over the library API.

Heavy imports (NumPy, pyarrow, SentencePiece) happen inside commands so ``--help`` stays fast.
"""

from __future__ import annotations

import dataclasses
import sys

import click

from . import __version__
from .config import OUTPUT_FORMATS
from .errors import ObjcliError
from .readers.inputs import FORMATS, TEXT_UNITS


def _objective_option_names() -> dict[str, set[str]]:
    """Option name -> objectives that accept it (from each objective's options dataclass)."""
    from .objectives import REGISTRY

    accepted: dict[str, set[str]] = {}
    for name in REGISTRY.names():
        for f in dataclasses.fields(REGISTRY.get(name).options_type):
            accepted.setdefault(f.name, set()).add(name)
    return accepted


class _Fail(click.ClickException):
    """Prints ``Error: <one line>`` and exits 1."""


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="objcli")
def main() -> None:
    """Turn raw text into training-ready shards for a pretraining objective."""


@main.command(context_settings={"show_default": True})
@click.argument("inputs", nargs=-1, required=True)
@click.option("-t", "--tokenizer", required=True, help="SentencePiece .model, or Hugging Face tokenizer.json (or its folder).")
@click.option("--objective", default="clm", help="clm, fim, mlm, electra, nsp, sop, span-corruption (t5), prefix-lm, ul2, bart.")
@click.option("--seq-len", type=int, default=2048, help="Tokens per row (the most per row with --packing none).")
@click.option("-o", "--output", required=True, help="Output folder, or '-' for an Arrow IPC stream on stdout.")
@click.option("--format", "output_format", type=click.Choice(OUTPUT_FORMATS), default="arrow", help="Shard format.")
@click.option("--shard-size", default="256MB", help="Rows per shard (10000) or bytes of token data (256MB).")
@click.option("--input-format", type=click.Choice(FORMATS), default="auto", help="Input format; auto uses extension, then content.")
@click.option("--text-key", default="text", help="JSON field or Parquet column holding the text.")
@click.option("--text-unit", type=click.Choice(TEXT_UNITS), default="line", help="Plain text: one document per line, blank-line-separated paragraph, or file.")
@click.option("--strict", is_flag=True, help="Stop at the first bad record instead of skipping and counting it.")
@click.option("--bos/--no-bos", default=False, help="Put BOS before every document.")
@click.option("--eos/--no-eos", default=None, help="Put EOS after every document [default: yes for clm and prefix-lm, no for span-corruption and ul2, as T5].")
@click.option("--seed", type=int, default=0, help="Seed for objectives that draw random numbers.")
@click.option("--bos-token", default=None, help="BOS piece, overriding the tokenizer's own (looked up, else allocated).")
@click.option("--eos-token", default=None, help="EOS piece, overriding the tokenizer's own (looked up, else allocated).")
@click.option("--workers", type=int, default=None, help="Worker processes [default: all cores].")
@click.option("--partition-size", default="64MiB", help="Large uncompressed line-based files are split into partitions of this size.")
@click.option("--batch-size", default="1MiB", help="Text per tokenizer batch (memory per worker grows with it; larger is not faster).")
@click.option("--max-document-chars", type=int, default=10_000_000, help="A record longer than this becomes several documents, cut where the tokens do not change; bounds memory per worker (0: never cut).")
@click.option("--overwrite", is_flag=True, help="Replace whatever an earlier run left in the output folder.")
@click.option("--resume", is_flag=True, help="Continue an interrupted run in the output folder; fail if it holds none of this configuration. A run of the same configuration is resumed even without it.")
@click.option("--executor", type=click.Choice(["local", "dask"]), default="local", help="local: a process pool on this machine; dask: one Dask task per partition.")
@click.option("--pool", type=click.Choice(["auto", "threads", "processes"]), default="auto", help="[--executor local] Run partitions in threads (tokenizers release the GIL; no start-up cost) or processes (for objectives that work in Python); auto: processes for nsp, sop, electra, bart and tokenizer.json, else threads.")
@click.option("--scheduler", default=None, help="[--executor dask] Address of a running Dask scheduler (tcp://host:8786) [default: start a local cluster of --workers processes].")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar (the summary line is still printed).")
@click.option("--packing", type=click.Choice(["concat", "best-fit", "none"]), default=None, help="[clm, fim, mlm] concat: join documents and cut rows; best-fit: best-fit-decreasing, only over-long documents split; none: one document per row (clm).  [default: concat]")
@click.option("--pack-window", type=int, default=None, help="[clm, fim, mlm] best-fit packs windows of about this many tokens.  [default: 4000000]")
@click.option("--remainder", type=click.Choice(["drop", "pad"]), default=None, help="[clm] With concat packing, the last partial row of each partition.  [default: drop]")
@click.option("--noise-density", type=float, default=None, help="[span-corruption] Fraction of tokens corrupted.  [default: 0.15]")
@click.option("--mean-span", type=float, default=None, help="[span-corruption] Mean noise span length.  [default: 3]")
@click.option("--final-chunk", type=click.Choice(["drop", "pad"]), default=None, help="[span-corruption, prefix-lm] A partition's last, short chunk.  [default: drop]")
@click.option("--extra-ids", type=int, default=None, help="[span-corruption, ul2] Sentinels appended when the model has no <extra_id_N>.  [default: 100, or as many as a row needs]")
@click.option("--layout", type=click.Choice(["decoder", "encdec"]), default=None, help="[prefix-lm, ul2] Rows for a decoder-only or an encoder-decoder model.  [default: decoder for prefix-lm, encdec for ul2]")
@click.option("--mixture", default=None, help="[ul2] Preset (ul2, ul2-3, ul2r) or a TOML file of [[denoiser]] tables.  [default: ul2]")
@click.option("--mask-prob", type=float, default=None, help="[mlm, electra, nsp, sop] Probability of selecting a token.  [default: 0.15; 0.25 is ELECTRA-large]")
@click.option("--mask-replace", type=float, default=None, help="[mlm, nsp, sop] Selected tokens that become [MASK].  [default: 0.8]")
@click.option("--random-replace", type=float, default=None, help="[mlm, nsp, sop] Selected tokens that become a random ordinary token.  [default: 0.1]")
@click.option("--count", type=click.Choice(["bernoulli", "exact"]), default=None, help="[mlm, nsp, sop] Bernoulli per token (HF) or exactly min(max-predictions, max(1, round(n*p))) (Google BERT).  [default: bernoulli]")
@click.option("--max-predictions", type=int, default=None, help="[mlm, nsp, sop] Cap on selected tokens per row with --count exact.")
@click.option("--whole-word/--no-whole-word", default=None, help="[mlm, nsp, sop] Select whole words (a word starts at a piece beginning with U+2581).  [default: off]")
@click.option("--dupe-factor", type=int, default=None, help="[mlm, nsp, sop] Write K differently-masked copies of each row.  [default: 1]")
@click.option("--sentences", type=click.Choice(["prose", "lines"]), default=None, help="[nsp, sop, electra, bart] Sentence splitting: prose rules, or one sentence per line (code).  [default: prose]")
@click.option("--short-seq-prob", type=float, default=None, help="[nsp, sop] Probability of a shorter target length.  [default: 0.1]")
@click.option("--mlm/--no-mlm", default=None, help="[nsp, sop] Also apply BERT masking (labels), as BERT pretraining does.  [default: off]")
@click.option("--fim-rate", type=float, default=None, help="[fim] Probability that a document (or segment) is transformed.  [default: 0.5]")
@click.option("--fim-spm-rate", type=float, default=None, help="[fim] Probability of SPM rather than PSM.  [default: 0.5]")
@click.option("--spm-order", type=click.Choice(["starcoder", "naive"]), default=None, help="[fim] starcoder: <PRE><SUF>suffix<MID>prefix middle; naive: <SUF>suffix<PRE>prefix<MID>middle.  [default: starcoder]")
@click.option("--fim-level", type=click.Choice(["document", "context"]), default=None, help="[fim] Transform documents before packing, or segments of packed rows (Megatron).  [default: document]")
@click.option("--fim-tokens", default=None, help="[fim] starcoder, codellama, or four names 'PRE,SUF,MID,PAD'.  [default: starcoder]")
@click.option("--fim-split-token", default=None, help="[fim] Split documents at this text and transform fragments independently (file-level FIM).")
@click.option("--preset", type=click.Choice(["bart-large", "mbart", "fairseq"]), default=None, help="[bart] Fills the bart options not given.  [default: bart-large]")
@click.option("--mask", type=float, default=None, help="[bart] Fraction of words masked (fairseq --mask).")
@click.option("--mask-random", type=float, default=None, help="[bart] Masked spans that become random tokens.")
@click.option("--insert", type=float, default=None, help="[bart] Fraction of tokens inserted as noise.")
@click.option("--permute-sentences", type=float, default=None, help="[bart] Fraction of sentences permuted.")
@click.option("--rotate", type=float, default=None, help="[bart] Probability of rotating an example.")
@click.option("--poisson-lambda", type=float, default=None, help="[bart] Mean span length in words (span-poisson).")
@click.option("--replace-length", type=click.IntRange(-1, 1), default=None, help="[bart] 1: a span becomes one <mask>; 0: deleted; -1: every token masked.")
@click.option("--mask-length", type=click.Choice(["span-poisson", "word", "subword"]), default=None, help="[bart] Span unit.")
@click.option("--pack/--no-pack", default=None, help="[prefix-lm, bart] Trim-and-pack encoder-decoder examples into rows with input and label segment ids.  [default: off]")
@click.option("--mode-tokens", type=click.Choice(["text", "special", "none"]), default=None, help="[ul2] [NLU]/[NLG]/[S2S] as text, one special id each, or none.  [default: text]")
def transform(inputs, tokenizer, objective, seq_len, output, output_format, shard_size, input_format, text_key,
              text_unit, strict, bos, eos, seed, bos_token, eos_token, workers, partition_size, batch_size, max_document_chars, overwrite, resume, executor, pool, scheduler, quiet, **objective_kwargs):
    """Tokenize INPUTS and write training-ready shards.

    INPUTS are files, folders (searched recursively for .jsonl/.txt/.parquet, compressed or
    not) and globs; '-' reads standard input. Example:

        objcli transform corpus/ -t tok.model --objective clm --seq-len 2048 -o shards/
    """
    from .config import ShardSize, TransformConfig, parse_bytes
    from .objectives import REGISTRY
    from .transform import transform as run_transform

    ctx = click.get_current_context()
    try:
        objective_type = REGISTRY.get(objective)
        accepted = {f.name for f in dataclasses.fields(objective_type.options_type)}
        for name, owners in _objective_option_names().items():
            given = ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
            if given and name not in accepted and name in objective_kwargs:
                flag = "--" + name.replace("_", "-")
                raise ObjcliError(f"{flag} applies to {', '.join(sorted(owners))}, not to {objective_type.name}")
        options = objective_type.options_type(
            **{k: v for k, v in objective_kwargs.items() if k in accepted and v is not None}
        )
        config = TransformConfig(
            inputs=tuple(inputs), tokenizer=tokenizer, objective=objective_type.name, objective_options=options,
            output=output, seq_len=seq_len, output_format=output_format, shard_size=ShardSize.parse(shard_size),
            input_format=input_format, text_key=text_key, text_unit=text_unit, strict=strict, bos=bos, eos=eos,
            seed=seed, bos_token=bos_token, eos_token=eos_token, partition_bytes=parse_bytes(partition_size, "--partition-size"),
            batch_bytes=parse_bytes(batch_size, "--batch-size"), max_document_chars=max_document_chars,
        )
        if scheduler and workers is not None:
            raise ObjcliError("--workers sizes a local pool or cluster; with --scheduler the cluster's own workers run")
        bar = None if quiet or not sys.stderr.isatty() else _progress_bar()
        summary = run_transform(
            config, workers=workers, overwrite=overwrite, resume=resume, executor=executor, scheduler=scheduler, pool=pool,
            progress=bar.update if bar else None,
            warn=lambda message: click.echo(f"objcli: warning: {message}", err=True),
        )
        if bar:
            bar.close()
    except ObjcliError as error:
        raise _Fail(str(error)) from None
    click.echo(summary.line(), err=True)


class _progress_bar:
    """tqdm on stderr: documents, MB of text and tokens/s."""

    def __init__(self):
        from tqdm import tqdm

        self.bar = tqdm(unit=" docs", file=sys.stderr, dynamic_ncols=True, smoothing=0.1)
        self.text_bytes = 0
        self.tokens = 0

    def update(self, progress) -> None:
        self.text_bytes += progress.text_bytes
        self.tokens += progress.tokens
        rate = self.tokens / max(self.bar.format_dict["elapsed"], 1e-9)
        self.bar.set_postfix_str(f"{self.text_bytes / 1e6:.1f} MB, {rate:,.0f} tokens/s", refresh=False)
        self.bar.update(progress.documents)

    def close(self) -> None:
        self.bar.close()


@main.command("train-tokenizer", context_settings={"show_default": True})
@click.argument("inputs", nargs=-1, required=True)
@click.option("-o", "--output", required=True, help="Where to write the .model file.")
@click.option("--vocab-size", type=int, required=True, help="Pieces in the model, special pieces included.")
@click.option("--model-type", type=click.Choice(["unigram", "bpe"]), default="unigram")
@click.option("--preset", type=click.Choice(["text", "code"]), default="text", help="text: NFKC, whitespace collapsed; code: text kept exactly.")
@click.option("--special", multiple=True, help="Reserve a special piece (repeatable), e.g. --special '[MASK]'.")
@click.option("--text-key", default="text", help="JSON field or Parquet column holding the text.")
@click.option("--text-unit", type=click.Choice(TEXT_UNITS), default="line")
@click.option("--character-coverage", type=float, default=0.9995)
@click.option("--max-lines", type=int, default=0, help="Train on at most this many lines (0: all).")
@click.option("--threads", type=int, default=1, help="Trainer threads (1 keeps training reproducible).")
def train_tokenizer_command(inputs, output, vocab_size, model_type, preset, special, text_key, text_unit,
                            character_coverage, max_lines, threads):
    """Train a SentencePiece model on INPUTS (read like 'transform' reads them). Example:

        objcli train-tokenizer corpus/ --vocab-size 32000 --special '[MASK]' -o tok.model
    """
    from .train_tokenizer import train_tokenizer

    try:
        result = train_tokenizer(list(inputs), output, vocab_size, model_type, preset, special, text_key,
                                 text_unit, character_coverage, max_lines, threads)
    except ObjcliError as error:
        raise _Fail(str(error)) from None
    click.echo(f"objcli: wrote {result['path']} ({result['model_type']}, {result['vocab_size']:,} pieces, "
               f"preset {result['preset']})", err=True)


@main.command("inspect")
@click.argument("folder")
@click.option("-n", "--rows", type=int, default=3, show_default=True, help="Rows to show.")
@click.option("-t", "--tokenizer", default=None, help="Tokenizer, if it moved since the run.")
@click.option("--color/--no-color", default=None, help="Colour segments [default: when stdout is a terminal].")
def inspect_command(folder, rows, tokenizer, color):
    """Decode the first rows of an output FOLDER, with segments and padding made visible. Example:

        objcli inspect shards/ --rows 2
    """
    from .show import inspect_output

    colour = sys.stdout.isatty() if color is None else color
    try:
        for line in inspect_output(folder, rows, tokenizer, colour):
            click.echo(line, color=colour)
    except ObjcliError as error:
        raise _Fail(str(error)) from None


@main.command("verify")
@click.argument("folder")
def verify_command(folder):
    """Re-read every shard of an output FOLDER and check it against the manifest: sha256, rows,
    schema and dtypes, and the objective's invariants. Exit status 0 only if every check holds.

        objcli verify shards/
    """
    from .verify import verify_output

    try:
        report = verify_output(folder)
    except ObjcliError as error:
        raise _Fail(str(error)) from None
    for problem in report.problems:
        click.echo(f"objcli verify: {problem}", err=True)
    click.echo(report.line(), err=True)
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

    from .stats import compute_stats, plot, render_text

    try:
        stats = compute_stats(folder)
    except ObjcliError as error:
        raise _Fail(str(error)) from None
    if plot_path:
        try:
            plot(stats, plot_path)
        except ImportError:
            raise _Fail("--plot needs matplotlib; install it with: pip install 'objcli[plot]'") from None
    if as_json:
        click.echo(json.dumps(stats, indent=2))
    else:
        for line in render_text(stats):
            click.echo(line)


if __name__ == "__main__":
    main()
