"""A run's plan, decided before any partition runs: its inputs and partitions, the tokenizer and its
engine, the objective and its columns, the pool, and the fingerprint that names the configuration."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..config import TransformConfig
from ..errors import ObjcliError
from ..executors import POOLS
from ..executors.local import compiled_kernels, start_fork_server
from ..executors.pools import choose_pool, will_fork
from ..order.mixture import parse_sources
from ..readers import plan_partitions, resolve_inputs
from ..storage.identity import run_identity, side_digests
from .pipeline import first_texts, plan_objective
from .run_inputs import check_output_outside_inputs, check_sources_disjoint


@dataclass
class RunPlan:
    """What ``plan_run`` decides before any partition runs."""

    config: TransformConfig
    files: list
    partitions: list
    tokenizer: object
    objective: object
    columns: list
    fingerprint: str
    pool: str
    split_bounds: tuple = ()  # --split: each held-out split's interval of the keyed hash (splits.py)
    mixture: dict = dataclasses.field(default_factory=dict)  # --source: each source's estimate and rate
    task_tokenizer: str = ""  # where partitions load the tokenizer from, if not --tokenizer's path
    identity: dict = dataclasses.field(default_factory=dict)  # every file read besides the inputs (storage/identity.py)


def check_execution(workers: int, overwrite: bool, resume: bool, to_stdout: bool, executor: str, pool: str) -> None:
    if workers < 1:
        raise ObjcliError(f"--workers {workers}: must be at least 1")
    if overwrite and resume:
        raise ObjcliError("--resume keeps an earlier run and --overwrite replaces it; pass one of them")
    if to_stdout and resume:
        raise ObjcliError("--resume needs an output folder; a stream on stdout cannot be resumed")
    if pool not in POOLS:
        raise ObjcliError(f"--pool {pool}: choose one of {', '.join(POOLS)}")
    if pool != "auto" and executor != "local":
        raise ObjcliError(f"--pool applies to --executor local, not to {executor}")


def _input_groups(paths: list[str], breaks) -> list[list[str]]:
    edges = [0, *sorted(b for b in set(breaks) if 0 < b < len(paths)), len(paths)]
    return [paths[a:b] for a, b in zip(edges[:-1], edges[1:])]


def plan_run(config: TransformConfig, pool: str, warn=None, workers: int = 1, executor: str = "") -> RunPlan:
    """Inputs, partitions, tokenizer, objective and columns, all checked before any work."""
    check_output_outside_inputs(config)
    files, partitions, by_source = [], [], {}
    for source, paths in (parse_sources(config.source) if config.source else {"": list(config.inputs)}).items():
        source_files = by_source[source] = []
        # Partitions never mix sources (each row then has one), nor inputs an --append added.
        for group in _input_groups(paths, config.input_breaks if not config.source else ()):
            group_files = resolve_inputs(group, config.input_format, warn)
            partitions += [dataclasses.replace(p, index=len(partitions) + i, source=source) for i, p in
                           enumerate(plan_partitions(group_files, config.partition_bytes, config.text_unit))]
            source_files += group_files
        files += source_files
    check_sources_disjoint(by_source)
    if config.text_unit != "line" and files and all(f.format in ("jsonl", "parquet") for f in files):
        raise ObjcliError(f"--text-unit {config.text_unit}: applies to plain-text inputs, and these are all "
                          f"{' and '.join(sorted({f.format for f in files}))} (one document per record); drop it")
    if executor == "local" and will_fork(config.objective, pool, workers, sum(not p.input.is_stream for p in partitions)):
        start_fork_server(config.tokenizer, compiled_kernels(config))
    config, tokenizer, objective, columns = plan_objective(config, warn, first_texts(partitions, config))
    pool = choose_pool(pool, objective, tokenizer, workers)
    # Megatron's and the flat formats hold token sequences only; the trainer rebuilds positions and boundaries.
    lost = [c.name for c in columns if c.name != "input_ids" and c.role not in ("segment_ids", "positions", "per_segment")]
    if config.format.whole_documents and lost:
        raise ObjcliError(
            f"--format {config.output_format} stores input_ids only, and {objective.name} also writes {', '.join(lost)}; "
            "choose --format arrow, parquet or npy"
        )
    identity = run_identity(tokenizer, objective)
    return RunPlan(config, files, partitions, tokenizer, objective, columns,
                   config.fingerprint(tokenizer.sha256, side_digests(identity)), pool, identity=identity)
