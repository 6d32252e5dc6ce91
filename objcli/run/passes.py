"""A partition's documents for each pass over it: read, long ones cut, shuffled in windows
(``--shuffle-documents``), and with ``--source`` the copies a mixture's rate asks for, pass ``j``
holding the documents with more than ``j`` copies (``order/mixture.copies``), each pass's draws its own."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from ..inputs import ReadOptions, RecordLog
from ..inputs.origins import copy_of
from ..inputs.token_store import StoredDocuments
from ..kernels.rng import derive_rng
from ..order.document_windows import char_lengths, shuffled_windows, take
from ..order.mixture import NOT_SAMPLED, MixtureDraws, copies
from ..tokenizers import Tokenizer
from .document_batches import partition_documents


def documents_of_pass(task, options: ReadOptions, log: RecordLog, tokenizer: Tokenizer, j: int):
    """Batches of the partition's documents for pass ``j``: read, long ones cut, shuffled in windows
    (``--shuffle-documents``), and, with ``--source``, only those with more than ``j`` copies (the
    rest counted as skipped: read = written + skipped holds over every pass)."""
    config, index = task.config, task.partition.index
    documents = partition_documents(task.partition, config, options, log, tokenizer)
    if j:  # a record is read again for each copy: a bad one is counted (and said) once, in pass 0
        documents = _counted_once(documents, log)
    if config.source:  # drawn in reading order, before any shuffle: each document keyed to its place
        documents = _sampled(documents, task, log, j)
    if config.shuffle_window_bytes:
        stream = "shuffle-documents" if j == 0 else f"shuffle-documents:{j}"
        documents = shuffled_windows(
            documents,
            config.shuffle_window_bytes,
            config.batch_bytes,
            lambda window: derive_rng(config.seed, index, window, stream),
        )
    yield from documents


def _sampled(documents, task, log: RecordLog, j: int):
    """The documents with more than ``j`` copies (``order/mixture.copies``), the rest counted as skipped."""
    config = task.config
    draws = MixtureDraws(config.seed, task.partition.source, task.partition.index)
    for texts in documents:
        made = copies(draws.next(len(texts)), char_lengths(texts), task.mixture_rate, task.mixture_cut)
        keep = np.flatnonzero(made > j)
        log.skipped[NOT_SAMPLED] += len(texts) - len(keep)
        if len(keep):
            yield _copies(take(texts, keep), j) if j and config.provenance else take(texts, keep)


def _copies(texts, j: int):
    """The documents of pass ``j`` named as its copies (``--provenance``)."""
    if isinstance(texts, StoredDocuments):
        return replace(texts, origins=texts.origins.copied(j))
    return [copy_of(text, j) for text in texts]


def _counted_once(documents, log: RecordLog):
    """A later pass's documents, the records it finds bad (or cuts) again taken off its counts."""
    skipped, cut = Counter(log.skipped), log.cut
    yield from documents
    for reason, count in list(log.skipped.items()):
        again = count - skipped.get(reason, 0)
        if reason != NOT_SAMPLED and again > 0:
            log.skipped[reason] -= again
            log.read -= again
    log.cut = cut
