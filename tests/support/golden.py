"""Command lines whose shards must stay byte-identical across refactors (``test_golden.py``).

``python tests/support/golden.py`` rewrites ``golden_sha256.json`` from the code as it is; do that only when
an output is *meant* to change, and say why in the commit. Each entry names its columns' widths on disk
(``widths``) and, where rows are fixed-size lists, their length (``lengths``) beside the shards' digests:
regenerated when Arrow, Parquet and ``hf`` shards took the width their values need (issue 73: uint16 ids,
positions and segments under 65,536), and again when rows of one length became fixed-size lists (no
offsets; the ``npy`` and ``megatron`` entries kept their bytes). The corpus is a fixed slice of
``sample_data`` built by ``golden_corpus``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from paths import ROOT
from runs import cli

SAMPLE = ROOT / "sample_data"
TABLE = Path(__file__).resolve().parent / "golden_sha256.json"

# Each entry: a name and the transform flags after INPUTS -t TOKENIZER -o OUT.
COMMANDS = {
    "clm-arrow": "--objective clm --seq-len 128",
    "clm-parquet": "--objective clm --seq-len 128 --format parquet",
    "clm-npy": "--objective clm --seq-len 128 --format npy",
    "clm-megatron": "--objective clm --seq-len 128 --format megatron",
    "clm-rows": "--objective clm --seq-len 64 --shard-size 40",
    "clm-bos-pad": "--objective clm --seq-len 128 --bos --remainder pad",
    "clm-best-fit": "--objective clm --seq-len 128 --packing best-fit --pack-window 3000",
    "clm-none": "--objective clm --seq-len 128 --packing none",
    "clm-none-npy": "--objective clm --seq-len 128 --packing none --format npy",
    "clm-none-megatron": "--objective clm --seq-len 128 --packing none --format megatron",
    "mtp-best-fit": "--objective mtp --seq-len 128 --packing best-fit --mtp-heads 3",
    "contrastive-crop": "--objective contrastive --seq-len 128 --negatives 2 --augment delete:0.1,swap:0.1",
    "contrastive-ict-padded": "--objective contrastive --seq-len 128 --pairs ict --views padded --format npy",
    "fim-document": "--objective fim --seq-len 128 --fim-rate 0.7",
    "fim-context": "--objective fim --seq-len 128 --fim-level context --fim-rate 0.9",
    "fim-best-fit": "--objective fim --seq-len 128 --packing best-fit --fim-spm-rate 0.3",
    "fim-split": "--objective fim --seq-len 128 --fim-split-token def --spm-order naive --fim-tokens codellama",
    "mlm": "--objective mlm --seq-len 128",
    "mlm-wwm-exact": "--objective mlm --seq-len 128 --whole-word --count exact --max-predictions 12",
    "mlm-best-fit-dupe": "--objective mlm --seq-len 128 --packing best-fit --dupe-factor 2 --seed 3",
    "electra": "--objective electra --seq-len 128",
    "nsp": "--objective nsp --seq-len 128",
    "nsp-mlm": "--objective nsp --seq-len 128 --mlm --whole-word",
    "sop-lines": "--objective sop --seq-len 96 --sentences lines",
    "t5": "--objective span-corruption --seq-len 128",
    "t5-pad-eos": "--objective t5 --seq-len 128 --final-chunk pad --eos",
    "t5-x": "--objective span-corruption --seq-len 128 --mean-span 8 --noise-density 0.5 --format npy",
    "prefix-decoder": "--objective prefix-lm --seq-len 128",
    "prefix-decoder-pad": "--objective prefix-lm --seq-len 128 --final-chunk pad",
    "prefix-encdec": "--objective prefix-lm --seq-len 128 --layout encdec",
    "prefix-encdec-npy": "--objective prefix-lm --seq-len 128 --layout encdec --format npy",
    "prefix-decoder-pack": "--objective prefix-lm --seq-len 128 --pack",
    "prefix-encdec-pack": "--objective prefix-lm --seq-len 128 --layout encdec --pack",
    "ul2": "--objective ul2 --seq-len 128",
    "ul2-decoder": "--objective ul2 --seq-len 128 --layout decoder --mixture ul2-3",
    "ul2-special": "--objective ul2 --seq-len 128 --mixture ul2r --mode-tokens special --format parquet",
    "bart": "--objective bart --seq-len 128",
    "bart-pack": "--objective bart --seq-len 128 --pack",
    "bart-mbart": "--objective bart --seq-len 128 --preset mbart --rotate 0.5 --insert 0.1",
    "bart-fairseq-npy": "--objective bart --seq-len 128 --preset fairseq --format npy",
}


def corpus_slice(
    folder: Path, prose_lines: int, code_lines: int, text_chars: int, names=("prose", "code", "reference")
) -> Path:
    """A folder holding the first lines of the sample prose and code JSONL and the first
    characters of the sample plain text."""
    folder.mkdir(parents=True, exist_ok=True)
    prose = (SAMPLE / "prose.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    code = (SAMPLE / "code.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (folder / f"{names[0]}.jsonl").write_text("".join(prose[:prose_lines]), encoding="utf-8")
    (folder / f"{names[1]}.jsonl").write_text("".join(code[:code_lines]), encoding="utf-8")
    text = (SAMPLE / "reference.txt").read_text(encoding="utf-8")
    (folder / f"{names[2]}.txt").write_text(text[:text_chars], encoding="utf-8")
    return folder


def golden_corpus(folder: Path) -> Path:
    """The fixed slice the golden table was recorded on."""
    return corpus_slice(folder, 60, 3, 20_000, ("a-prose", "b-code", "c-reference"))


def shard_digests(folder: Path) -> dict[str, str]:
    """sha256 of every shard file (everything but the manifest and the dataset card made from it), by name."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name not in ("manifest.json", "README.md") and not p.name.startswith(".")
    }


def run(name: str, corpus: Path, out: Path) -> dict[str, str]:

    args = [
        str(corpus),
        "-t",
        str(SAMPLE / "tokenizer.model"),
        "-o",
        str(out),
        "--workers",
        "1",
        "-q",
        "--overwrite",
        *COMMANDS[name].split(),
    ]
    result = cli(["transform", *args], catch_exceptions=False)
    if result.exit_code != 0:
        raise RuntimeError(f"{name}: exit {result.exit_code}: {result.output}")
    manifest = json.loads((out / "manifest.json").read_text())
    widths = {c["name"]: c["disk_dtype"] for c in manifest["columns"]}  # each column's width on disk, named
    lengths = {c["name"]: c["length"] for c in manifest["columns"] if c.get("length")}  # fixed-size lists' rows
    return {**shard_digests(out), "widths": widths, **({"lengths": lengths} if lengths else {})}


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        corpus = golden_corpus(Path(tmp) / "corpus")
        table = {name: run(name, corpus, Path(tmp) / name) for name in COMMANDS}
    TABLE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {TABLE} ({len(table)} command lines)", file=sys.stderr)
