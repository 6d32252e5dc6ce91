"""objcli's causal-LM rows as Megatron-LM's ``GPTDataset`` samples (the ``train`` extra brings torch): a
dataset provider for ``pretrain_gpt.py`` over ``objcli.reading.Rows``, so a Megatron run reads a plan (or any
clm output) with no index to build at start-up.

Each sample holds GPTDataset's keys: ``tokens`` and ``labels`` (a row of ``--seq-len`` + 1 tokens, written
with ``--row-tokens seq-len+1``: its first ``seq-len`` tokens and its last; a row of ``--seq-len`` tokens: the
row, and the row shifted with the pad id last, as GPTDataset without its extra token), ``loss_mask``,
``position_ids`` and, with ``create_attention_mask``, ``attention_mask`` (True where a token may *not*
attend), each what megatron-core's ``_get_ltor_masks_and_position_ids`` gives for the same tokens under
``reset_position_ids``, ``reset_attention_mask`` and ``eod_mask_loss`` (computed here without its loop over
each EOD), then GPTDataset's own: no loss where the label is the pad id, and the pad id read as token 0.
``tests/reading/test_megatron_samples.py`` compares every key with megatron-core's function."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..errors import ObjcliError
from .reader import Rows

NO_PAD = -1  # GPTDataset's _PAD_TOKEN_ID where the tokenizer has no pad


@dataclass(frozen=True)
class MegatronMasks:
    """GPTDataset's switches (``GPTDatasetConfig``'s fields of the same names)."""

    eod: int  # the tokenizer's EOD id (objcli's EOS between documents)
    reset_position_ids: bool = False
    reset_attention_mask: bool = False
    eod_mask_loss: bool = False
    create_attention_mask: bool = True
    pad: int = NO_PAD


def megatron_sample(row: np.ndarray, seq_length: int, masks: MegatronMasks) -> dict[str, torch.Tensor]:
    """One row as GPTDataset's sample of ``seq_length`` tokens."""
    text = np.asarray(row, np.int64)
    if len(text) == seq_length + 1:
        tokens, labels = text[:-1].copy(), text[1:].copy()
    elif len(text) == seq_length:
        tokens, labels = text.copy(), np.append(text[1:], masks.pad)
    else:
        raise ObjcliError(
            f"a row of {len(text):,} tokens is not a sample of --seq-length {seq_length:,} (or one token more); "
            "write the rows with --seq-len as Megatron's --seq-length (and --row-tokens seq-len+1)"
        )
    is_eod = tokens == masks.eod
    loss_mask = np.ones(seq_length, np.float32)
    if masks.eod_mask_loss:
        loss_mask[is_eod] = 0.0
    # A token's document: the EODs before it (an EOD ends its own document).
    documents = np.concatenate([[0], np.cumsum(is_eod[:-1])])
    positions = np.arange(seq_length, dtype=np.int64)
    if masks.reset_position_ids:
        starts = np.flatnonzero(np.concatenate([[True], is_eod[:-1]]))  # each document's first token
        positions = positions - starts[documents]
    sample = {"tokens": tokens, "labels": labels, "loss_mask": loss_mask, "position_ids": positions}
    if masks.create_attention_mask:
        causal = np.tril(np.ones((seq_length, seq_length), dtype=bool))
        if masks.reset_attention_mask:
            causal &= documents[:, None] == documents[None, :]
        sample["attention_mask"] = ~causal[None]
    loss_mask[labels == masks.pad] = 0.0
    tokens[tokens == masks.pad] = 0
    labels[labels == masks.pad] = 0
    return {name: torch.from_numpy(value) for name, value in sample.items()}


class MegatronSamples(torch.utils.data.Dataset):
    """A map-style dataset of GPTDataset samples over an objcli output's rows (``Rows``: a plan or written
    shards, one split's with ``split``)."""

    def __init__(self, folder, seq_length: int, masks: MegatronMasks, split: str | None = None, column="input_ids"):
        self.rows = folder if isinstance(folder, Rows) else Rows(folder, split)
        if column not in self.rows.columns:
            raise ObjcliError(
                f"{folder}: its rows have no {column} column; give clm rows (objcli transform --objective clm)"
            )
        self.seq_length, self.masks, self.column = seq_length, masks, column

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return megatron_sample(self.rows[index][self.column], self.seq_length, self.masks)


def datasets_provider(folder, seq_length: int, masks: MegatronMasks):
    """What ``pretrain_gpt.py``'s ``train_valid_test_datasets_provider`` returns: (train, valid, test), from the
    output's ``train``, ``validation`` and ``test`` splits (None where it has no such split; an output without
    ``--split`` is all train)."""
    rows = Rows(folder)
    splits = {s.split for s in rows.manifest.shards}
    if splits <= {""}:
        return MegatronSamples(rows, seq_length, masks), None, None
    return tuple(
        MegatronSamples(folder, seq_length, masks, split) if split in splits else None
        for split in ("train", "validation", "test")
    )
