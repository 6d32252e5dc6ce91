"""A partition's documents in batches, as every pass over it sees them: read from the text (long
ones cut), or, from a token store, the text run's batches with their tokens (``inputs/token_store.py``)."""

from __future__ import annotations

from itertools import repeat

from ..config import TransformConfig
from ..errors import ObjcliError
from ..inputs import Partition, ReadOptions, RecordLog, read_documents
from ..inputs.cutting import cut_long_documents
from ..inputs.pieces import InputKind
from ..inputs.token_inputs.partitions import token_batches
from ..inputs.token_store import StoredDocuments, stored_batches
from ..objectives import REGISTRY
from ..tokenizers import Tokenizer


def partition_documents(partition: Partition, config: TransformConfig, options: ReadOptions, log: RecordLog, tokenizer):
    """Batches of the partition's documents, read as its kind of input reads them (one signature for the
    three: text, ids other tools wrote, a token store); ``log`` counts what was read and skipped (a
    store's partition brings the counts its tokenize run made)."""
    return _READERS[partition.input.kind](partition, config, options, log, tokenizer)


def _stored(partition: Partition, config: TransformConfig, options: ReadOptions, log: RecordLog, tokenizer):
    # A plan places tokens by position: its run reads the documents' lengths, not their ids (its reader
    # reads and checks the ids a row needs); --provenance's places are made from the ids.
    plans = config.format.packs_positions
    objective = REGISTRY.named(config.objective)
    # Its examples read some ids (BART's words), or its rows are made to be counted (FIM's).
    values = plans and (objective.plan_reads_ids or objective.plan_counts_rows)
    batches = stored_batches(partition, log, ids=not plans or config.provenance or values)
    return store_positions(batches, tokenizer.total_vocab_size, values) if plans else batches


def _token_ids(partition: Partition, config: TransformConfig, options: ReadOptions, log: RecordLog, tokenizer):
    """Ids another tool wrote: no text, no tokenizer run."""
    eos = tokenizer.special.ids.get("eos", tokenizer.model_role_id("eos"))
    key = config.mixture.ids_key(partition.source)
    return token_batches(partition, key, config.batch_bytes, log, eos, tokenizer.total_vocab_size)


def _text(partition: Partition, config: TransformConfig, options: ReadOptions, log: RecordLog, tokenizer):
    limit = 0 if options.records else config.max_document_chars  # a record is never cut
    return cut_long_documents(read_documents(partition, options, log), limit, tokenizer, log)


_READERS = {InputKind.STORE: _stored, InputKind.TOKENS: _token_ids, InputKind.TEXT: _text}


def store_positions(batches, vocabulary: int, keep_ids: bool = False):
    """A plan's documents (``formats/row_plan.py``): each document's first token's position in the partition,
    past the vocabulary, for its id (every pass over the partition counts from its first token), its tokens a
    stand-in (``StoredDocuments.placed`` makes each token's position where examples need them: no array a
    token otherwise); ``keep_ids``: the ids kept beside them (``StoredDocuments.ids_of``)."""
    from dataclasses import replace

    from ..formats.store import stand_in

    start = vocabulary
    for documents in batches:
        stop = start + len(documents.tokens)
        if stop >= 2**31:
            raise ObjcliError(
                f"--format plan: a partition of the store holds over {2**31 - 1 - vocabulary:,} tokens, more than "
                "a plan places; tokenize with a smaller --partition-size"
            )
        ids = documents.tokens if keep_ids else None
        firsts = start + documents.offsets[:-1]
        yield replace(documents, tokens=stand_in(len(documents.tokens)), ids=ids, firsts=firsts)
        start = stop


def starting_with(texts, prefix: str) -> int:
    """How many documents begin with ``prefix`` (the BOS text)."""
    if isinstance(texts, StoredDocuments):
        return int(texts.bos_text.sum())
    return sum(map(str.startswith, texts, repeat(prefix)))


def token_count(texts, tokenizer: Tokenizer) -> int:
    """Tokens of the documents (a store knows; text is encoded on one thread)."""
    if isinstance(texts, StoredDocuments):
        return texts.token_count()
    return len(tokenizer.encode(texts, 1)[0])
