"""``objcli.reading.Rows`` for PyTorch and Hugging Face trainers (the ``train`` extra brings torch and
torchdata).

- ``TorchRows(rows)``: a map-style ``torch.utils.data.Dataset`` (``Trainer``, a ``DataLoader`` with a
  sampler), each row a dict of int64 tensors, as ``datasets``' torch format gives integer columns.
- ``IterableTorchRows(rows, rank, world)``: an ``IterableDataset`` whose rank reads its contiguous share,
  split again between the ``DataLoader``'s workers. Every epoch (every ``iter``) reads every row of the
  share once; ``state_dict``/``load_state_dict`` are what torchdata's ``StatefulDataLoader`` saves and
  restores in each worker, so a stopped run resumes at its next row.

What cannot resume is refused in one line, never started again at row 0: a state saved under another
worker count, rank or world; a state asked of the main process while ``DataLoader`` workers read the
rows (only they know where they are: ``StatefulDataLoader`` asks them); a state loaded in the main process
for workers to share (each worker's state is its own: ``StatefulDataLoader`` hands it to that worker).
"""

from __future__ import annotations

import multiprocessing
import os
from multiprocessing.context import get_spawning_popen

import numpy as np
import torch

from ..errors import ObjcliError
from .reader import Rows

TORCH_STATE_VERSION = 1


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


def _worker() -> tuple[int, int, bool]:
    """(this DataLoader worker, the workers, whether in a worker), or (0, 1, False) in the process that
    iterates itself."""
    info = torch.utils.data.get_worker_info()
    return (info.id, info.num_workers, True) if info is not None else (0, 1, False)


class IterableTorchRows(torch.utils.data.IterableDataset):
    """Rank ``rank`` of ``world``'s rows (``Rows.shard``), each ``DataLoader`` worker a contiguous part of
    them. ``state_dict()`` is this worker's next row; ``load_state_dict`` makes the next ``iter`` start
    there (and the ones after it at row 0, as every epoch does)."""

    def __init__(self, rows: Rows, rank: int = 0, world: int = 1, drop_remainder: bool = False):
        self.rows = rows.shard(rank, world, drop_remainder)
        self.rank, self.world = rank, world
        self.worker, self.workers = 0, 1  # who reads, as the last iter found it
        self.next_row = 0  # within this worker's part
        self._loaded: tuple[dict, int] | None = None  # a state to start the next iter at, and the process it came to
        # Set by any worker that reads (shared with the processes DataLoader starts): the main process's own
        # position then says nothing of where the workers are.
        self._workers_read = multiprocessing.RawValue("b", 0)

    def __iter__(self):
        worker, workers, in_worker = _worker()
        self._workers_read.value = in_worker  # the main process reading again: its position is the one
        start = 0
        if self._loaded is not None:
            state, loaded_in = self._loaded
            self._loaded = None
            if in_worker and loaded_in != os.getpid():
                raise ObjcliError(
                    "IterableTorchRows: a state loaded before the DataLoader's workers started is one worker's "
                    "position, not theirs; resume with torchdata's StatefulDataLoader.load_state_dict"
                )
            start = self._checked_start(state, worker, workers)
        self.worker, self.workers, self.next_row = worker, workers, start
        return self._rows(self.rows.shard(worker, workers), start)

    def _rows(self, part: Rows, start: int):
        for k, row in enumerate(part.iterate(start), start=start):
            self.next_row = k + 1
            yield tensors(row)

    def _checked_start(self, state: dict, worker: int, workers: int) -> int:
        saved = (state.get("rank"), state.get("world"), state.get("worker"), state.get("workers"))
        if saved != (self.rank, self.world, worker, workers):
            raise ObjcliError(
                f"IterableTorchRows: the state was saved by worker {saved[2]} of {saved[3]} on rank {saved[0]} of "
                f"{saved[1]}, and is loaded by worker {worker} of {workers} on rank {self.rank} of {self.world}; "
                "resume with the ranks and num_workers it was saved with"
            )
        return self.rows.shard(worker, workers).resumed_row(state["rows"])

    def state_dict(self) -> dict:
        if torch.utils.data.get_worker_info() is None and self._workers_read.value:
            raise ObjcliError(
                "IterableTorchRows.state_dict(): DataLoader workers read these rows, and only they know their "
                "position; save torchdata's StatefulDataLoader.state_dict() instead (objcli[train] installs it)"
            )
        if self._loaded is not None:  # loaded, not yet started: that state again
            return self._loaded[0]
        part = self.rows.shard(self.worker, self.workers)
        return {
            "version": TORCH_STATE_VERSION,
            "rank": self.rank,
            "world": self.world,
            "worker": self.worker,
            "workers": self.workers,
            "rows": part.state(self.next_row),
        }

    def load_state_dict(self, state: dict) -> None:
        if not isinstance(state, dict) or state.get("version") != TORCH_STATE_VERSION or "rows" not in state:
            raise ObjcliError(
                "IterableTorchRows.load_state_dict: not a state IterableTorchRows.state_dict() saves "
                f"(version {TORCH_STATE_VERSION}); resume from a state this objcli saved"
            )
        self._loaded = (state, os.getpid())

    def __getstate__(self) -> dict:
        # The shared flag goes to the processes DataLoader starts; pickled anywhere else (torch.save, a
        # copy), it cannot go (multiprocessing refuses), and the copy has its own.
        state = dict(self.__dict__)
        if get_spawning_popen() is None:
            state["_workers_read"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self._workers_read is None:
            self._workers_read = multiprocessing.RawValue("b", 0)
