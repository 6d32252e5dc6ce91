"""What every objective implements, and the registry that names them.

An objective is built once per run in the main process, where it resolves the special tokens it
needs (so allocation order is fixed), and then once per partition in a worker, where it turns
tokenized documents into rows.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np

from ..errors import ObjcliError
from ..rows import ColumnSpec, RowBatch

if TYPE_CHECKING:
    from ..config import TransformConfig
    from ..tokenizers import Tokenizer


@dataclass(frozen=True)
class DocumentBatch:
    """Tokenized documents of one partition, in order."""

    texts: list[str]
    tokens: np.ndarray  # int32, flat
    offsets: np.ndarray  # int64, len(texts) + 1
    first_document: int  # index within the partition of the first document here
    batch_index: int  # position of this batch within the partition
    encode: Callable[[list[str]], tuple[np.ndarray, np.ndarray]] | None = None  # the run's tokenizer


class PartitionTransform(Protocol):
    counters: Counter  # objective-specific counts for the manifest; "skipped:<reason>" entries
    # are documents the objective dropped (they count as skipped in the accounting)

    def process(self, batch: DocumentBatch) -> RowBatch | None: ...

    def finish(self) -> RowBatch | None: ...


class Objective(Protocol):
    name: ClassVar[str]
    options_type: ClassVar[type]

    def __init__(self, config: TransformConfig, tokenizer: Tokenizer) -> None: ...

    def columns(self) -> list[ColumnSpec]: ...

    def partition_transform(self, partition_index: int) -> PartitionTransform: ...


@dataclass
class Registry:
    objectives: dict[str, type] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)

    def register(self, name: str, *aliases: str):
        def decorate(cls: type) -> type:
            for key in (name, *aliases):
                if key in self.objectives or key in self.aliases:
                    raise ValueError(f"objective name {key!r} is registered twice")
            cls.name = name
            self.objectives[name] = cls
            self.aliases.update({alias: name for alias in aliases})
            return cls

        return decorate

    def get(self, name: str) -> type:
        canonical = self.aliases.get(name, name)
        if canonical in self.objectives:
            return self.objectives[canonical]
        known = sorted(self.objectives) + sorted(self.aliases)
        close = difflib.get_close_matches(name, known, n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise ObjcliError(f"unknown objective '{name}'; {hint}known objectives: {', '.join(sorted(self.objectives))}")

    def names(self) -> list[str]:
        return sorted(self.objectives)


REGISTRY = Registry()
register = REGISTRY.register

