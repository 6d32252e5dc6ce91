"""A port of Megatron-Bridge's reader of packed SFT rows, read from its source (megatron-bridge 0.3.1,
``src/megatron/bridge/data/datasets/sft.py``: ``GPTSFTPackedDataset.__getitem__``, ``_build_loss_mask``
with ``answer_only_loss`` and ``collate_fn`` with ``pad_to_max_length=False``, ``pad_seq_to_mult=1``),
and of ``packed_parquet.py``'s row reading. The package itself does not install on a CPU machine (it
requires transformer-engine's CUDA build), so the tests run this port: the same slicing, line for line."""

from __future__ import annotations

import numpy as np


def read_rows(path) -> list[dict]:
    """The rows as ``GPTSFTPackedParquetDataset`` reads them: the three columns, Python lists."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["input_ids", "seq_start_id", "loss_mask"])
    return table.to_pylist()


def get_item(row: dict) -> dict:
    input_ids = row["input_ids"]
    seq_boundaries = row["seq_start_id"] + [len(input_ids)]
    return {"input_ids": input_ids, "seq_boundaries": seq_boundaries, "loss_mask": row["loss_mask"]}


def build_loss_mask(item: dict) -> np.ndarray:
    seq_boundaries = item["seq_boundaries"]
    return np.concatenate(
        [item["loss_mask"][seq_boundaries[i] : seq_boundaries[i + 1] - 1] for i in range(len(seq_boundaries) - 1)]
    )


def collate(batch: list[dict], eos_id: int) -> dict:
    """tokens, labels, loss_mask, position_ids and cu_seqlens as the collate makes them (NumPy, not torch)."""
    input_ids = [
        np.concatenate(
            [
                item["input_ids"][item["seq_boundaries"][i] : item["seq_boundaries"][i + 1] - 1]
                for i in range(len(item["seq_boundaries"]) - 1)
            ]
        )
        for item in batch
    ]
    labels = [
        np.concatenate(
            [
                item["input_ids"][item["seq_boundaries"][i] + 1 : item["seq_boundaries"][i + 1]]
                for i in range(len(item["seq_boundaries"]) - 1)
            ]
        )
        for item in batch
    ]
    loss_mask = [build_loss_mask(item) for item in batch]
    max_length = max(len(x) for x in input_ids)
    position_ids, cu_seqlens = [], []
    for item in batch:
        position_ids.append([])
        cu_seqlens.append([0])
        seqlens = np.array(item["seq_boundaries"][1:]) - np.array(item["seq_boundaries"][:-1])
        for length in seqlens:
            position_ids[-1].extend(list(range(length - 1)))
            cu_seqlens[-1].append(cu_seqlens[-1][-1] + length - 1)
        if cu_seqlens[-1][-1] != max_length:
            cu_seqlens[-1].append(max_length)

    def pad(items, value):
        return np.array([list(x) + [value] * (max_length - len(x)) for x in items])

    return {
        "tokens": pad(input_ids, eos_id),
        "labels": pad(labels, eos_id),
        "loss_mask": pad(loss_mask, 0),
        "position_ids": pad(position_ids, 0),
        "cu_seqlens": cu_seqlens,
        "token_count": [len(x) for x in input_ids],
    }
