"""Packing: the stage that turns an objective's *examples* into the *rows* a trainer reads.

read -> tokenize -> objective (examples) -> **pack** (rows) -> [objective's row step] -> write

An objective emits examples as a :class:`~objcli.rows.RowBatch` whose every row is one example
(documents with their boundary tokens, or finished input/label pairs); the packer the run chose
lays them out in rows:

- ``none``           one example per row (documents longer than a row are cut into pieces);
- ``concat``         join a stream of documents and cut it into full rows (HF ``group_texts``);
- ``best-fit``       best-fit-decreasing (Ding et al. 2024): only over-long examples are split;
- ``trim-and-pack``  SeqIO's, for examples with inputs and labels of their own lengths.

Packed rows carry, per column family (``input_ids``, and ``labels`` where it has its own length):

    input_ids    [a3, a4, b0, b1, b2, <pad>]
    segment_ids  [ 1,  1,  2,  2,  2,  0]     1-based per row; 0 marks padding
    positions    [ 0,  1,  0,  1,  2,  0]     restart at 0 for every segment of the row

and every per-example value (a 1-D column of the examples: the FIM mode, the denoiser, a prefix
length) becomes a per-segment column: one value per segment of each row.

Each objective declares which packers make sense for it (``Objective.packers``); the run refuses
the rest in one line.
"""

from __future__ import annotations

from ..options import discover
from .base import PACKERS, Packer, PackSettings

discover(__name__, __path__)  # each packer's module registers it

__all__ = ["PACKERS", "Packer", "PackSettings", "make_packer"]


def make_packer(name: str, settings: PackSettings) -> Packer:
    return PACKERS[name](settings)
