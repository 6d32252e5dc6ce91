"""NVIDIA's packed SFT layout (issue 72): chat and clm rows as Parquet ``input_ids``, ``loss_mask`` and
``seq_start_id``, read through a port of Megatron-Bridge's own collate (``tests/support/bridge_packed.py``):
every sequence's inputs, labels and loss mask are those of the same conversation (or document) unpacked."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from bridge_packed import collate, get_item, read_rows
from chat_data import build_tokenizer, conversations, write_jsonl
from runs import SAMPLE, read_output, run_cli, run_transform

from objcli.commands.verify import verify_output
from objcli.errors import ObjcliError
from objcli.kernels import IGNORE

SPM = SAMPLE / "tokenizer.model"


@pytest.fixture(scope="module")
def chat(tmp_path_factory):
    folder = tmp_path_factory.mktemp("nemo-chat")
    tokenizer = build_tokenizer("chatml-generation", folder / "model")
    write_jsonl(
        [{"messages": r["messages"]} for r in conversations(80, "chatml-generation", seed=3)], folder / "c.jsonl"
    )
    return folder, tokenizer


def _sequences(folder, eos: int) -> list[tuple]:
    """Every sequence Megatron-Bridge's collate makes of the output: (inputs, labels, mask), by its cu_seqlens."""
    found = []
    for path in sorted(folder.glob("*.idx.parquet")):
        batch = collate([get_item(row) for row in read_rows(path)], eos)
        for k, bounds in enumerate(batch["cu_seqlens"]):
            for a, b in zip(bounds[:-1], bounds[1:]):
                if a < batch["token_count"][k]:  # past it: the collate's padding to the batch's longest row
                    found.append(tuple(tuple(batch[n][k][a:b].tolist()) for n in ("tokens", "labels", "loss_mask")))
                    assert batch["position_ids"][k][a:b].tolist() == list(range(b - a))
    return found


def test_chat_rows_read_by_the_bridges_collate_are_each_conversations(chat, tmp_path):
    folder, tokenizer = chat
    common = {"objective": "chat", "seq_len": 512}
    packed = run_transform([folder / "c.jsonl"], tokenizer, tmp_path / "nemo", packing="best-fit",
                           output_format="nemo-packed", **common)  # fmt: skip
    run_transform([folder / "c.jsonl"], tokenizer, tmp_path / "rows", packing="none", **common)
    _, rows = read_output(tmp_path / "rows")
    expected = []
    for ids, labels in zip(rows["input_ids"], rows["labels"]):
        mask = tuple(int(x != IGNORE) for x in labels[1:])
        expected.append((tuple(ids[:-1]), tuple(ids[1:]), mask))
    eos = packed.manifest["special_tokens"]["ids"].get("eos", 0)  # what the collate pads with
    assert sorted(_sequences(tmp_path / "nemo", eos)) == sorted(expected) and len(expected) == 80
    assert verify_output(tmp_path / "nemo").ok
    schema = pq.read_schema(next((tmp_path / "nemo").glob("*.idx.parquet")))
    assert [str(f.type) for f in schema] == ["list<element: int32>", "list<element: int8>", "list<element: int32>"]
    stats = run_cli("stats", tmp_path / "nemo")
    supervised = sum(sum(m) for _, _, m in expected)
    assert stats.returncode == 0 and f"supervised tokens    {supervised:,}" in stats.stdout


def test_clm_rows_learn_every_next_token_inside_each_sequence(tmp_path):
    packed = run_transform([SAMPLE / "prose.jsonl"], SPM, tmp_path / "nemo", seq_len=256, output_format="nemo-packed")
    run_transform([SAMPLE / "prose.jsonl"], SPM, tmp_path / "rows", seq_len=256)
    _, rows = read_output(tmp_path / "rows")
    expected = []
    for ids, segments in zip(rows["input_ids"], rows["segment_ids"]):
        ids, segments = np.asarray(ids), np.asarray(segments)
        for s in range(1, segments.max() + 1):
            seq = ids[segments == s].tolist()
            if len(seq) > 1:
                expected.append((tuple(seq[:-1]), tuple(seq[1:]), (1,) * (len(seq) - 1)))
    eos = packed.manifest["special_tokens"]["ids"].get("eos", 0)  # what the collate pads with
    assert sorted(s for s in _sequences(tmp_path / "nemo", eos) if s[0]) == sorted(expected)
    assert verify_output(tmp_path / "nemo").ok


def test_rows_the_layout_cannot_mean_are_refused_and_verify_finds_broken_ones(chat, tmp_path):
    with pytest.raises(ObjcliError, match="--format nemo-packed holds next-token rows"):
        run_transform([SAMPLE / "prose.jsonl"], SPM, tmp_path / "mlm", objective="mlm", output_format="nemo-packed")
    run_transform([SAMPLE / "prose.jsonl"], SPM, tmp_path / "ok", seq_len=256, output_format="nemo-packed")
    path = next((tmp_path / "ok").glob("*.idx.parquet"))
    table = pq.read_table(path)
    from objcli.commands.verify_packed import check_packed_sequences
    from objcli.formats import Column

    def column(name, dtype):
        values = np.concatenate([np.asarray(v, dtype) for v in table.column(name).to_pylist()])
        lengths = [len(v) for v in table.column(name).to_pylist()]
        return Column(values, np.concatenate([[0], np.cumsum(lengths)]))

    ids, mask, starts = column("input_ids", np.int32), column("loss_mask", np.int8), column("seq_start_id", np.int32)
    assert check_packed_sequences(ids, mask, starts) == []
    wrong = mask.values.copy()
    wrong[starts.values[1] - 1] = 1  # learns past its sequence's end
    assert "last token" in check_packed_sequences(ids, Column(wrong, mask.offsets), starts)[0]
    shifted = starts.values.copy()
    shifted[0] = 1
    assert "begin at 0" in check_packed_sequences(ids, mask, Column(shifted, starts.offsets))[0]


@pytest.mark.parametrize("release", ["megatron-bridge 0.3.1", "nemo 2.4.0"])
def test_the_released_readers_load_the_npy_and_its_metadata(release, chat, tmp_path):
    """Issue 83, item 1: --format nemo-packed-npy is the released readers' layout, one .npy a split with its
    packing metadata beside it. Their own GPTSFTPackedDataset code (from the release's wheel) loads it, and
    its collate gives every conversation's inputs, labels and loss mask, with cu_seqlens padded by the
    metadata's max_samples_per_bin as its pad_cu_seqlens does."""
    pytest.importorskip("torch")
    from released_readers import released_dataset

    folder, tokenizer = chat
    common = {"objective": "chat", "seq_len": 512}
    packed = run_transform([folder / "c.jsonl"], tokenizer, tmp_path / "npy", packing="best-fit",
                           output_format="nemo-packed-npy", split="validation=10%", partition_size="16KiB",
                           **common)  # fmt: skip
    run_transform([folder / "c.jsonl"], tokenizer, tmp_path / "rows", packing="none", **common)
    _, rows = read_output(tmp_path / "rows")
    expected = sorted(
        (tuple(ids[:-1]), tuple(ids[1:]), tuple(int(x != IGNORE) for x in labels[1:]))
        for ids, labels in zip(rows["input_ids"], rows["labels"])
    )
    eos = packed.manifest["special_tokens"]["ids"].get("eos", 0)
    files = sorted((tmp_path / "npy").glob("*.npy"))
    assert [f.name for f in files] == ["train-00000-of-00001.npy", "validation-00000-of-00001.npy"]
    assert len(packed.manifest["partitions"]) > 2  # the partitions' shards joined: one file a split
    found = []
    for path in files:
        metadata = path.with_name(path.stem + "_metadata.jsonl")
        dataset = released_dataset(release, path, eos, 512, metadata, pad_to_max_length=True)
        items = [dataset[i] for i in range(len(dataset.indexed_dataset))]
        batch = dataset.collate_fn(items)
        most = max(len(item["seq_boundaries"]) - 1 for item in items)
        assert most == dataset.pack_metadata[0]["max_samples_per_bin"]
        for k, bounds in enumerate(batch["cu_seqlens"].tolist()):
            bounds = [x for x in bounds if x >= 0]  # the collate's own -1 past the end
            assert len(bounds) == most + 2  # padded to a constant shape by the metadata
            longest = max(b - a for a, b in zip(bounds[:-1], bounds[1:]))
            assert int(batch["max_seqlen"][k]) >= longest  # the metadata's dataset_max_seqlen bounds them
            for a, b in zip(bounds[:-1], bounds[1:]):
                if a < b and a < batch["token_count"][k]:
                    found.append(tuple(tuple(batch[n][k][a:b].tolist()) for n in ("tokens", "labels", "loss_mask")))
    if release.startswith("megatron-bridge"):  # its collate also takes the loss off EOS inputs (tokens == eos)
        expected = [(i, lab, tuple(0 if t == eos else m for t, m in zip(i, mk))) for i, lab, mk in expected]
    assert sorted(found) == sorted(expected) and len(found) == 80
    assert verify_output(tmp_path / "npy").ok


def test_the_npy_join_keeps_provenance_and_the_shard_size(tmp_path):
    """The partitions' .npy joined into one file a split keep their spans (--provenance: verify passes, the
    spans are the Parquet layout's); --shard-size given keeps files of that size."""
    from objcli.formats.nemo_npy import read_npy

    options = {"seq_len": 256, "partition_size": "100KiB", "provenance": True}
    run_transform([SAMPLE / "prose.jsonl"], SPM, tmp_path / "npy", output_format="nemo-packed-npy", **options)
    run_transform([SAMPLE / "prose.jsonl"], SPM, tmp_path / "pq", output_format="nemo-packed", **options)
    assert verify_output(tmp_path / "npy").ok
    spans = [pq.read_table(p).to_pydict() for p in sorted((tmp_path / "npy").glob("*.provenance"))]
    theirs = [pq.read_table(p) for p in sorted((tmp_path / "pq").glob("*.provenance"))]
    assert len(spans) == 1 and spans[0]["record"] == [r for t in theirs for r in t.column("record").to_pylist()]
    run_transform([SAMPLE / "prose.jsonl"], SPM, tmp_path / "cut", output_format="nemo-packed-npy",
                  shard_size="200", **options)  # fmt: skip
    rows = [len(read_npy(p)) for p in sorted((tmp_path / "cut").glob("*.npy"))]
    assert len(rows) > 1 and sum(rows) == len(read_npy(next((tmp_path / "npy").glob("*.npy"))))
    assert verify_output(tmp_path / "cut").ok
