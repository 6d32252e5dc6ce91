"""``objcli reshard``: the same rows, byte for byte and in order, in shards of another size, for
every format; totals kept; ``verify`` passes; a killed reshard leaves no manifest and the same
command writes the same bytes."""

import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import folder_bytes, manifest_json, run_cli, run_transform

from objcli.commands.reshard import reshard
from objcli.commands.verify import verify_output
from objcli.config import OUTPUT_FORMATS, WHOLE_DOCUMENT_FORMATS
from objcli.storage.shards import iter_rows


def _rows(folder):
    return [{k: np.asarray(v).tolist() for k, v in row.items()} for _, row in iter_rows(folder)]


@pytest.mark.parametrize("fmt", OUTPUT_FORMATS)
@pytest.mark.parametrize("size", ["37", "64KB"])
def test_resharded_rows_are_the_rows_in_order(fmt, size, small_corpus, sample_tokenizer, tmp_path):
    packing = "none" if fmt in WHOLE_DOCUMENT_FORMATS else "best-fit"
    run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path / "src", output_format=fmt, seq_len=128,
                  packing=packing, shard_size="50")
    manifest = reshard(str(tmp_path / "src"), str(tmp_path / "new"), size)
    assert verify_output(tmp_path / "new").ok
    assert _rows(tmp_path / "new") == _rows(tmp_path / "src")
    source = manifest_json(tmp_path / "src")
    for key in ("rows", "tokens", "padding_tokens", "documents_read", "documents_written"):
        assert manifest["totals"][key] == source["totals"][key]
    for key in ("rows", "tokens", "padding_tokens", "documents", "segments"):
        assert sum(s[key] for s in manifest["shards"]) == sum(s[key] for s in source["shards"])
    if size == "37":
        assert [s["rows"] for s in manifest["shards"]][:-1] == [37] * (len(manifest["shards"]) - 1)
    assert manifest["resharded_from"]["shards"] == len(source["shards"])


def test_a_killed_reshard_leaves_no_manifest_and_the_same_command_writes_the_same_bytes(small_corpus,
                                                                                        sample_tokenizer, tmp_path):
    run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path / "src", seq_len=128, shard_size="40")
    reshard(str(tmp_path / "src"), str(tmp_path / "whole"), "25")
    env = {**os.environ, "OBJCLI_CRASH_AT": "shard-write:3"}
    killed = subprocess.run([sys.executable, "-m", "objcli", "reshard", str(tmp_path / "src"), "--shard-size", "25",
                             "-o", str(tmp_path / "new")], env=env, capture_output=True, text=True)
    assert killed.returncode == -9 and not (tmp_path / "new" / "manifest.json").exists()
    again = run_cli("reshard", tmp_path / "src", "--shard-size", "25", "-o", tmp_path / "new", "-q")
    assert again.returncode == 0, again.stderr

    def files(folder):
        return {k: v for k, v in folder_bytes(folder).items() if k not in (".objcli-lock", "manifest.json")}

    assert files(tmp_path / "new") == files(tmp_path / "whole")


def test_reshard_errors_are_one_line(small_corpus, sample_tokenizer, tmp_path):
    run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path / "src", seq_len=128)
    for args, message in (((tmp_path / "src", "--shard-size", "0", "-o", tmp_path / "n"), "--shard-size 0"),
                          ((tmp_path / "src", "--shard-size", "10", "-o", tmp_path / "src"), "new folder"),
                          ((tmp_path / "nothing", "--shard-size", "10", "-o", tmp_path / "n2"), "no manifest.json")):
        result = run_cli("reshard", *args)
        assert result.returncode == 1 and message in result.stderr and result.stderr.count("\n") == 1, result.stderr
