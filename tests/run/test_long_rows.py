"""Rows of 131,072 and 1,048,576 tokens (issue 84, item 4): clm, chat packed best-fit and NVIDIA's packed SFT
written in bounded memory (the packer's window, positions and segment ids at their width), every row its
length, read back by the reader; the run's peak memory measured in a process of its own."""

import json
import subprocess
import sys

import pytest
from chat_data import build_tokenizer, conversations, write_jsonl
from runs import SAMPLE

from objcli.reading import Rows

MEMORY_BOUND = 4 << 30  # the bound for a million-token row (what a run takes is far under it)
WRAPPER = (
    "import resource, subprocess, sys; "
    "done = subprocess.run([sys.executable, '-m', 'objcli', *sys.argv[1:]]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024); sys.exit(done.returncode)"
)


def _peak(*args) -> int:
    """Peak resident bytes of ``objcli ARGS`` (and what it starts), in a process that starts nothing else."""
    done = subprocess.run([sys.executable, "-c", WRAPPER, *map(str, args)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("long")
    lines = (SAMPLE / "prose.jsonl").read_text().splitlines()
    with open(folder / "text.jsonl", "w") as out:
        for copy in range(12):  # about 3 M tokens: several million-token rows
            out.writelines(json.dumps({"text": json.loads(line)["text"] + f" {copy}"}) + "\n" for line in lines)
    tokenizer = build_tokenizer("mistral", folder / "tok")
    write_jsonl(conversations(400, "mistral", seed=4), folder / "chat.jsonl")
    return folder, tokenizer


@pytest.mark.heavy
@pytest.mark.parametrize("seq_len", [131_072, 1_048_576])
@pytest.mark.parametrize("run", ["clm", "chat", "nemo-packed"])
def test_rows_of_a_million_tokens_in_bounded_memory(run, seq_len, corpus, tmp_path):
    folder, tokenizer = corpus
    out = tmp_path / "out"
    if run == "clm":
        args = [folder / "text.jsonl", "-t", SAMPLE / "tokenizer.model"]
    else:
        template = SAMPLE.parent / "tests" / "support" / "chat_templates" / "mistral.jinja"
        args = [folder / "chat.jsonl", "-t", tokenizer, "--objective", "chat", "--chat-template", template,
                "--packing", "best-fit", *(["--format", "nemo-packed"] if run == "nemo-packed" else [])]  # fmt: skip
    peak = _peak("transform", *args, "--seq-len", seq_len, "-o", out, "-q")
    assert peak < MEMORY_BOUND, f"{peak / 2**20:.0f} MiB"
    rows = Rows(out)
    assert len(rows) >= 1
    manifest = json.loads((out / "manifest.json").read_text())
    if run == "nemo-packed":  # sequences back to back, no padding: at most the row's length
        assert all(len(rows[i]["input_ids"]) <= seq_len for i in range(len(rows)))
        return
    assert all(len(rows[i]["input_ids"]) == seq_len for i in range(len(rows)))
    widths = {c["name"]: c["disk_dtype"] for c in manifest["columns"]}
    assert widths.get("position_ids", "uint32") == ("uint32" if seq_len > 65_536 else "uint16")
