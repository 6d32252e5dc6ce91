"""Chat to ``--format megatron`` (issue 84, item 2): each conversation one document of ``.bin``/``.idx``, as
the template renders it (what Megatron-LM's pre-tokenized ``SFTDataset`` reads, NVIDIA/Megatron-LM PR #5017),
and its loss mask a second prefix beside it, read by megatron-core's own ``IndexedDataset``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from chat_data import build_tokenizer, conversations, write_jsonl
from runs import SAMPLE, manifest_json, run_cli, run_transform

from objcli.commands.verify import verify_output
from objcli.errors import ObjcliError
from objcli.kernels import IGNORE


@pytest.fixture(scope="module")
def chat(tmp_path_factory):
    folder = tmp_path_factory.mktemp("megatron-chat")
    tokenizer = build_tokenizer("chatml-generation", folder / "model")
    records = [{"messages": r["messages"]} for r in conversations(240, "chatml-generation", seed=11)]
    write_jsonl(records, folder / "c.jsonl")
    return folder, tokenizer


def _read(prefix):
    """Every document of a prefix, by megatron-core's IndexedDataset (its own reader)."""
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    dataset = indexed.IndexedDataset(str(prefix))
    assert list(dataset.document_indices) == list(range(len(dataset) + 1))  # a conversation a document
    return [dataset[k].tolist() for k in range(len(dataset))]


def test_each_conversation_is_a_document_with_its_loss_mask_beside_it(chat, tmp_path):
    folder, tokenizer = chat
    common = {"objective": "chat", "seq_len": 512, "split": "validation=10%", "partition_size": "16KiB"}
    run = run_transform([folder / "c.jsonl"], tokenizer, tmp_path / "meg", output_format="megatron", **common)
    run_transform([folder / "c.jsonl"], tokenizer, tmp_path / "rows", packing="none", **common)
    assert len(run.manifest["partitions"]) > 2  # the partitions' shards joined, masks with their tokens
    manifest = manifest_json(tmp_path / "rows")
    expected = {}
    for shard in manifest["shards"]:
        rows = pa.ipc.open_stream(pa.memory_map(str(tmp_path / "rows" / shard["files"][0]))).read_all().to_pydict()
        for ids, labels in zip(rows["input_ids"], rows["labels"]):
            expected.setdefault(shard["split"], []).append((ids, [int(x != IGNORE) for x in labels]))
    for split in ("train", "validation"):
        tokens = _read(tmp_path / "meg" / f"{split}-00000-of-00001_input_ids_document")
        masks = _read(tmp_path / "meg" / f"{split}-00000-of-00001_loss_mask_document")
        assert sorted(zip(tokens, masks)) == sorted(expected[split])
    assert sum(len(v) for v in expected.values()) == 240
    assert verify_output(tmp_path / "meg").ok
    stats = run_cli("stats", tmp_path / "meg")
    supervised = sum(sum(m) for v in expected.values() for _, m in v)
    assert stats.returncode == 0 and f"{supervised:,}" in stats.stdout


def test_merge_and_reshard_keep_the_masks_with_their_tokens(chat, tmp_path):
    folder, tokenizer = chat
    for name in ("a", "b"):
        run_transform([folder / "c.jsonl"], tokenizer, tmp_path / name, objective="chat", seq_len=512,
                      output_format="megatron")  # fmt: skip
    merged = run_cli("merge", tmp_path / "a", tmp_path / "b", "-o", tmp_path / "ab")
    assert merged.returncode == 0, merged.stderr
    tokens = _read(tmp_path / "ab" / "part-00000-of-00001_input_ids_document")
    masks = _read(tmp_path / "ab" / "part-00000-of-00001_loss_mask_document")
    single = _read(tmp_path / "a" / "part-00000-of-00001_loss_mask_document")
    assert len(tokens) == len(masks) == 480 and masks == single + single
    assert [len(t) for t in tokens] == [len(m) for m in masks]
    assert verify_output(tmp_path / "ab").ok
    resharded = run_cli("reshard", tmp_path / "ab", "-o", tmp_path / "cut", "--shard-size", "100")
    assert resharded.returncode == 0, resharded.stderr
    pieces = sorted((tmp_path / "cut").glob("*_loss_mask_document.bin"))
    assert len(pieces) == 5 and sum((_read(p.with_suffix("")) for p in pieces), []) == masks
    assert verify_output(tmp_path / "cut").ok


def test_verify_finds_a_mask_that_is_not_its_tokens(chat, tmp_path):
    folder, tokenizer = chat
    run_transform([folder / "c.jsonl"], tokenizer, tmp_path / "meg", objective="chat", seq_len=512,
                  output_format="megatron")  # fmt: skip
    from objcli.formats.megatron import MEGATRON
    from objcli.storage.manifest import read_manifest

    manifest = read_manifest(tmp_path / "meg")
    columns = MEGATRON.read_columns(tmp_path / "meg", manifest, manifest.shards[0])
    assert np.array_equal(columns["loss_mask"].offsets, columns["input_ids"].offsets)
    short = tmp_path / "meg" / "part-00000-of-00001_loss_mask_document.idx"
    other = tmp_path / "other"
    run_transform([SAMPLE / "prose.jsonl"], SAMPLE / "tokenizer.model", other, output_format="megatron")
    short.write_bytes((other / "part-00000-of-00001_input_ids_document.idx").read_bytes())
    with pytest.raises(ValueError, match="one uint8 mask value for each token"):
        MEGATRON.read_columns(tmp_path / "meg", manifest, manifest.shards[0])
    assert not verify_output(tmp_path / "meg").ok


def test_labels_that_are_not_the_tokens_are_still_refused(tmp_path):
    with pytest.raises(ObjcliError, match="mlm also writes labels"):
        run_transform([SAMPLE / "prose.jsonl"], SAMPLE / "tokenizer.model", tmp_path / "o", objective="mlm",
                      output_format="megatron")  # fmt: skip
