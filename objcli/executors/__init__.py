"""Executors run partition tasks and stream their results back as each finishes.

The interface is small on purpose: ``run(tasks, report) -> iterator of PartitionResult``. The
output never depends on the executor, because a partition's output depends only on its task.
"""

from .local import LocalExecutor

__all__ = ["LocalExecutor"]
