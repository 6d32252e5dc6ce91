"""Token files are detected the same whether named one by one, matched by a glob or found in a folder
(issue 69, item 6), for every registered token format; a ``.bin`` of text is text (item 5)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from runs import SAMPLE, run_cli, run_transform, token_format_detected

from objcli.errors import ObjcliError
from objcli.inputs.token_inputs import TOKEN_INPUTS

SPM = SAMPLE / "tokenizer.model"
TOKEN_FILES = Path(__file__).resolve().parent.parent / "data" / "token_files"
TEXTS = [json.loads(line)["text"] for line in (SAMPLE / "prose.jsonl").read_text().splitlines()[:40]]
# How each format's files are made: objcli's own writers (each document + EOS), or the real tools' files.
WRITTEN = {"megatron": "megatron", "datatrove": "nanoset", "llmc": "llmc", "nanogpt": "tokens"}


@pytest.fixture(scope="module")
def token_folders(tmp_path_factory) -> dict[str, Path]:
    """A plain folder (no manifest) per registered token format holding two inputs of it."""
    root = tmp_path_factory.mktemp("doors")
    halves = [TEXTS[:20], TEXTS[20:]]
    folders = {}
    for name in TOKEN_INPUTS:
        folder = folders[name] = root / name
        folder.mkdir()
        for k, texts in enumerate(halves):
            text = root / f"text{k}.jsonl"
            text.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
            if name == "input-ids":
                import pyarrow as pa
                import pyarrow.parquet as pq

                from objcli.tokenizers import open_tokenizer

                tokens, offsets = open_tokenizer(str(SPM)).encode(texts, 1)
                ids = [tokens[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])]
                pq.write_table(pa.table({"input_ids": ids}), folder / f"part{k}.parquet")
                continue
            out = root / f"written-{name}-{k}"
            run_transform([text], SPM, out, output_format=WRITTEN[name])
            for file in out.iterdir():
                if file.name.startswith("part-") and file.suffix in (".bin", ".idx", ".ds", ".index", ".metadata"):
                    shutil.copy(file, folder / f"doc{k}-{file.name}")
    return folders


def _ways(folder: Path) -> dict[str, list[str]]:
    files = sorted(folder.iterdir())
    named = sorted({str(f).removesuffix(".idx") for f in files if not f.name.endswith((".index", ".metadata"))})
    named = [n for n in named if not (n.endswith(".bin") and Path(n.removesuffix(".bin") + ".idx").exists())]
    return {"named": named, "glob": [str(folder / "*")], "folder": [str(folder)]}


@pytest.mark.parametrize("fmt", list(TOKEN_INPUTS))
def test_a_token_format_is_detected_alike_named_globbed_or_in_a_folder(fmt, token_folders, tmp_path):
    """The property over the registry's formats x the three ways: the same inputs, format and rows."""
    results = {}
    for way, inputs in _ways(token_folders[fmt]).items():
        summary = run_transform(inputs, SPM, tmp_path / way, seq_len=64)
        formats = {entry["format"] for entry in summary.manifest["inputs"]}
        results[way] = (formats, summary.totals["documents_written"], summary.totals["tokens"])
    assert results["named"] == results["glob"] == results["folder"]
    assert results["named"][0] == {fmt} and results["named"][1] == len(TEXTS)


def test_text_beside_token_files_in_a_glob_is_one_line(token_folders, tmp_path):
    folder = tmp_path / "mixed"
    shutil.copytree(token_folders["megatron"], folder)
    (folder / "notes.jsonl").write_text('{"text": "hello"}\n')
    for spec in (str(folder / "*"), str(folder)):
        with pytest.raises(ObjcliError, match="holds text .*notes.jsonl.* and token files"):
            run_transform([spec], SPM, tmp_path / "out", seq_len=64)


def test_a_bin_of_text_is_text_and_ids_stay_ids(tmp_path):
    notes = tmp_path / "notes.bin"
    rng = np.random.default_rng(0)
    notes.write_text("".join(rng.choice(list("abcdefgh ijk\n"), 100_000)))
    ids = tmp_path / "ids.bin"
    rng.integers(0, 32_000, 50_000).astype("<u2").tofile(ids)
    assert token_format_detected(str(notes), "auto") is None
    assert token_format_detected(str(ids), "auto") == "nanogpt"
    result = run_cli("transform", notes, "-t", SPM, "--seq-len", "64", "-o", tmp_path / "out")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert result.returncode == 0 and manifest["inputs"][0]["format"] != "nanogpt"
