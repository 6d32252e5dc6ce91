"""What every executor shares: turning a failed partition into one clear error."""

from __future__ import annotations

from ..errors import ObjcliError, missing_module


def partition_failed(task, error: BaseException) -> ObjcliError:
    """Errors the user can act on pass through (they already say where); anything else is named
    after the partition and input that raised it."""
    if isinstance(error, ObjcliError):
        return error
    where = f"partition {task.partition.index} ({task.partition.label})"
    missing = missing_module(error, where)
    if missing is not None:  # rerunning would fail the same way
        return missing
    return ObjcliError(
        f"partition {task.partition.index} ({task.partition.label}) failed: {type(error).__name__}: {error}; "
        "rerun the same command to resume (finished partitions are kept)"
    )
