"""The run's stages built from its configuration, the same in the main process (the setup) and in
every worker (the pipeline): the packer and its planner, the written columns (the objective with its narrow
context is ``recipe.build_objective``: a plan's reader makes it too)."""

from __future__ import annotations

from ..config import TransformConfig
from ..errors import ObjcliError
from ..objectives.base import Objective
from ..packing import Packer, PackSettings, make_packer
from ..packing.base import SequencePadding
from ..packing.best_fit import BestFitPlanner
from ..packing.concat import ConcatPlanner
from ..rows import HIDDEN, ColumnSpec, with_family_lengths
from .provenance import EXAMPLE_SPECS, SOURCE_SPEC


def build_packer(config: TransformConfig, objective: Objective) -> Packer:
    # Formats of whole documents (Megatron, flat tokens) never cut one at --seq-len: the trainer does.
    whole = config.format.whole_documents and config.packing == "none"
    overlap = concat_overlap(config)
    # --provenance: each example's document and token places, or its ordinal among a stream's examples
    kind = objective.provenance_kind()
    marks = (EXAMPLE_SPECS if kind == "tokens" else (SOURCE_SPEC,)) if config.provenance else ()
    settings = PackSettings(
        None if whole else config.row_length,
        (*objective.example_columns(), *marks),
        objective.pad_id,
        config.pack_window,
        objective.examples_are_documents,
        overlap,
        _sequence_padding(config, objective),
    )
    return make_packer(config.packing, settings)


def _sequence_padding(config: TransformConfig, objective: Objective) -> SequencePadding | None:
    """``--pad-to-multiple``: each sequence's padding, in NVIDIA's layouts one token more and EOS, as
    Megatron-Bridge's ``pad_seq_to_mult`` (its collate takes a sequence's real end at its last non-EOS token)."""
    if config.pad_to_multiple == 1:
        return None
    shifts = config.format.shifts_each_sequence
    pad_id = objective.eos_id if shifts else objective.pad_id
    if pad_id is None:
        raise ObjcliError(
            f"--pad-to-multiple with --format {config.output_format}: its reader finds where a padded sequence "
            "ends by EOS, and this run has none; drop --no-eos or give --eos-token"
        )
    return SequencePadding(config.pad_to_multiple, int(shifts), pad_id, config.sequence_limit)


def build_planner(config: TransformConfig, objective) -> ConcatPlanner | BestFitPlanner | None:
    """Rows planned from the documents' lengths, where the run's rows are concat's (no padding) or best-fit's
    (no --pad-to-multiple) of an objective whose examples are its documents (``Objective.plans_lengths``) and
    nothing rides a token (no provenance)."""
    if not objective.plans_lengths or config.provenance:
        return None
    if objective.plans_lengths == "chunks":  # the stream's raw chunks (span corruption): concat's windows
        return ConcatPlanner(objective.raw_length, 0, notes_batches=True, chunks=objective)
    if config.packing == "concat" and objective.pad_id is None:
        return ConcatPlanner(config.row_length, concat_overlap(config), notes_batches=objective.row_step)
    if config.packing == "best-fit" and config.pad_to_multiple == 1:
        return BestFitPlanner(build_packer(config, objective).settings)
    return None


def concat_overlap(config: TransformConfig) -> int:
    """Tokens each concat row shares with the next: 1 for Megatron's windows (--row-tokens seq-len+1)."""
    return int(config.row_length > config.seq_len and config.packing == "concat")


def run_columns(config: TransformConfig, objective: Objective, packer: Packer, planned=False) -> list[ColumnSpec]:
    """The written columns: the objective's, then with ``--source`` the source of each row (the
    hidden ones, ``__`` names, ride with the rows unwritten); ``planned``: the packer's, before the
    objective's row step (what a plan keeps: the step is made on read)."""
    made = packer.columns() if planned else objective.columns(packer.columns())
    kept = objective.row_step_reads if planned else ()  # what the row step made on read needs of the rows
    columns = [c for c in with_family_lengths(made) if not c.name.startswith(HIDDEN) or c.name in kept]
    if config.source:
        names = config.mixture.names
        columns.append(
            ColumnSpec(
                "source",
                "scalar",
                0,
                len(names) - 1,
                "the mixture source of the row",
                role="category",
                categories=names,
            )
        )
    return columns
