"""``objcli.reading.Rows`` for PyTorch and Hugging Face trainers (the ``train`` extra brings torch).

- ``TorchRows(rows)``: a map-style ``torch.utils.data.Dataset`` (``Trainer``, a ``DataLoader`` with a
  sampler), each row a dict of int64 tensors, as ``datasets``' torch format gives integer columns.
- ``IterableTorchRows(rows, rank, world)``: an ``IterableDataset`` whose rank reads its contiguous share,
  split again between the ``DataLoader``'s workers, with ``state_dict``/``load_state_dict`` (what
  torchdata's ``StatefulDataLoader`` saves) to resume at the next row.
"""

from __future__ import annotations

import numpy as np
import torch

from .rows import Rows


def tensors(row: dict) -> dict:
    """A row's integer columns as int64 tensors (an embedding takes int64), others as they are."""
    made = {}
    for name, value in row.items():
        array = np.asarray(value)
        made[name] = torch.from_numpy(array.astype(np.int64)) if array.dtype.kind in "iub" else value
    return made


class TorchRows(torch.utils.data.Dataset):
    def __init__(self, rows: Rows):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict:
        return tensors(self.rows[index])


class IterableTorchRows(torch.utils.data.IterableDataset):
    """Rank ``rank`` of ``world``'s rows (``Rows.shard``), each ``DataLoader`` worker a contiguous part of
    them; ``state_dict()`` is the next row of each worker, ``load_state_dict`` resumes there."""

    def __init__(self, rows: Rows, rank: int = 0, world: int = 1, drop_remainder: bool = False):
        self.rows = rows.shard(rank, world, drop_remainder)
        self.next_rows: dict[int, int] = {}  # worker -> its next row (within its part)

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        part = self.rows.shard(worker, workers)
        start = self.next_rows.get(worker, 0)
        for k, row in enumerate(part.iterate(start), start=start):
            self.next_rows[worker] = k + 1
            yield tensors(row)

    def state_dict(self) -> dict:
        return {"next_rows": dict(self.next_rows), "rows": self.rows.state(0)}

    def load_state_dict(self, state: dict) -> None:
        self.rows.resume(state["rows"])  # refused when saved over other rows
        self.next_rows = {int(k): int(v) for k, v in state["next_rows"].items()}
