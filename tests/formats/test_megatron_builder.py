"""Megatron output that megatron-core's own builder takes at its defaults (issue 72, item 1): a run of
many partitions writes as few prefixes as ``--shard-size`` says (one per partition made the builder's
default ``--split 969,30,1`` loop forever on a prefix whose 0.1 % held no document), joined byte for
byte from the partitions' shards, verified and read back as the same documents."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from readback import megatron_read
from runs import SAMPLE, run_transform

from objcli.commands.verify import verify_output

SPM = SAMPLE / "tokenizer.model"

# megatron-core's BlendedMegatronDatasetBuilder over the prefixes of megatron.txt, at Megatron-LM's
# default --split; in a process of its own, so a builder that loops is a failed test, not a hung one.
BUILD = r"""
import json, sys
from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
from megatron.core.datasets.utils import get_blend_from_list

class Tokenizer:
    eod, pad, vocab_size = 2, 0, int(sys.argv[2])
    unique_identifiers = {"class": "objcli-test"}

config = GPTDatasetConfig(random_seed=1234, sequence_length=64, split="969,30,1", tokenizer=Tokenizer(),
    blend=get_blend_from_list(open(sys.argv[1]).read().split()), reset_position_ids=False,
    reset_attention_mask=False, eod_mask_loss=False, path_to_cache=None)
built = BlendedMegatronDatasetBuilder(GPTDataset, [2000, 200, 20], lambda: True, config).build()
print(json.dumps([len(d) if d is not None else None for d in built]))
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("megatron-corpus")
    lines = (SAMPLE / "prose.jsonl").read_text().splitlines()
    for k in range(3):  # 2,646 documents: Megatron's 0.1 % test split holds a few
        (folder / f"prose{k}.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_partitions_become_prefixes_as_large_as_the_shard_size(corpus, tmp_path):
    many = run_transform([corpus], SPM, tmp_path / "parts", output_format="megatron", partition_size="64KiB",
                         shard_size="64KiB")  # fmt: skip
    joined = run_transform([corpus], SPM, tmp_path / "out", output_format="megatron", partition_size="64KiB")
    assert len(joined.manifest["partitions"]) > 10 and len(joined.manifest["shards"]) == 1
    assert len(many.manifest["shards"]) > 10  # a smaller --shard-size keeps more, smaller prefixes
    assert verify_output(tmp_path / "out").ok and verify_output(tmp_path / "parts").ok
    (shard,) = joined.manifest["shards"]
    documents = megatron_read(tmp_path / "out" / shard["files"][0].removesuffix(".bin"))[2]
    parts = [d for s in many.manifest["shards"] for d in megatron_read(tmp_path / "parts" / s["files"][0][:-4])[2]]
    assert len(documents) == len(parts) == joined.totals["documents_written"]
    assert documents == parts
    assert (tmp_path / "out" / "megatron.txt").read_text().split()[1] == shard["files"][0].removesuffix(".bin")


@pytest.mark.slow  # megatron-core and torch imported in a process of their own: make test-extras runs it
def test_megatron_cores_builder_takes_the_output_at_its_default_split(corpus, tmp_path):
    pytest.importorskip("megatron.core.datasets.helpers_cpp")
    summary = run_transform([corpus], SPM, tmp_path / "out", output_format="megatron", partition_size="64KiB")
    built = subprocess.run(
        [sys.executable, "-c", BUILD, "megatron.txt", str(summary.manifest["tokenizer"]["total_vocab_size"])],
        cwd=tmp_path / "out",  # the blend's prefixes are relative to the output folder
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    train, valid, test = json.loads(built.stdout.splitlines()[-1])
    assert train >= 2000 and valid >= 200 and test >= 20
