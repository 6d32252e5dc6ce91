"""``objcli tokenize``'s chain: each batch's documents encoded once and kept as token-store rows
(``formats/store.py``), with what every derived run needs to make the text run's choices."""

from __future__ import annotations

import zlib
from functools import cached_property
from itertools import repeat

import numpy as np

from ..config import TransformConfig
from ..formats import ShardSink
from ..formats.store import STORE_FORMAT, document_rows, store_columns
from ..kernels.places import fixes_of
from ..rows import Ragged
from ..stores import StoreKind
from ..tokenizers import Tokenizer
from .provenance import token_places


class StoreChain:
    def __init__(self, sink: ShardSink, bos_piece: str | None, kind: StoreKind, origins=None, renderer=None):
        self.sink, self.bos_piece, self.kind = sink, bos_piece, kind
        self.origins = origins  # --provenance: (the run's input names -> index, the tokenizer)
        self.renderer = renderer  # a kind that renders records: its objective's partition, which renders and encodes
        self.failures: dict[str, int] = {}  # a record store's records that render nothing, by reason

    @classmethod
    def build(cls, config: TransformConfig, tokenizer: Tokenizer, task, work) -> StoreChain:
        sink = ShardSink(
            work.staging(),
            task.partition.index,
            STORE_FORMAT.writer,
            store_columns(tokenizer.total_vocab_size, config.store_kind, config.provenance),
            config.shard_limit.rows,
            config.shard_limit.bytes,
            publish=work.publish if work.remote else None,
        )
        origins = ({name: i for i, name in enumerate(task.inputs)}, tokenizer) if config.provenance else None
        renderer = None
        if config.store_kind.renders:  # records rendered and encoded as the objective that reads them does
            from ..recipe import build_objective

            renderer = build_objective(config, tokenizer).partition_examples(task.partition.index)
        return cls(sink, bos_piece(tokenizer, task.special), config.store_kind, origins, renderer)

    def feed(self, texts: list[str], batch_index: int, encode) -> int:
        tokens, offsets, extra, failed = self.kind.encode(texts, batch_index, encode, self.renderer)
        for reason in failed:
            self.failures[reason] = self.failures.get(reason, 0) + 1
        encoded = list(map(str.encode, texts, repeat("utf-8"), repeat("surrogatepass")))
        count = len(texts)
        metadata = {
            "batch": np.full(count, batch_index, dtype=np.int32),
            "chars": np.fromiter(map(len, texts), dtype=np.int64, count=count),
            "utf8": np.fromiter(map(len, encoded), dtype=np.int64, count=count),
            "crc": np.fromiter(map(zlib.crc32, encoded), dtype=np.uint32, count=count),
            "bos_text": np.fromiter(map(str.startswith, texts, repeat(self.bos_piece or "\0")), dtype=bool, count=count)
            if self.bos_piece
            else np.zeros(count, dtype=bool),
        }
        if self.origins is not None:
            extra |= self._origins(texts, tokens, offsets)
        self.sink.write(document_rows(tokens, offsets, {**metadata, **extra}))
        return len(tokens)

    def _origins(self, texts: list, tokens: np.ndarray, offsets: np.ndarray) -> dict:
        """--provenance: each document's file, record and start (SourcedTexts), and, for a store of
        whole documents, its tokens' places as a text run's --provenance measures them."""
        files, tokenizer = self.origins
        columns = {
            "p_file": np.array([files[t.file] for t in texts], np.int32),
            "p_record": np.array([t.record for t in texts], np.int64),
            "p_start": np.array([t.start for t in texts], np.int64),
        }
        if self.kind.places_tokens:  # a record's or a sentence's span is the whole document: no token placed
            ends, back = token_places(tokenizer, texts, tokens, offsets)
            at, lengths, backs, fix_offsets = fixes_of(tokens, offsets, ends, back, self.piece_chars)
            columns |= {
                "p_fix_at": Ragged(at, fix_offsets),
                "p_fix_len": Ragged(lengths, fix_offsets),
                "p_fix_back": Ragged(backs, fix_offsets),
            }
        return columns

    @cached_property
    def piece_chars(self) -> np.ndarray:
        return self.origins[1].piece_char_table()

    def counters(self) -> list[dict]:
        """A record store's records that render nothing (a derived run skips and counts them)."""
        return [{f"not_rendered:{reason}": n for reason, n in sorted(self.failures.items())}]

    def first_skipped(self) -> dict[str, str]:
        """A store skips no record of its own (a record store keeps those it cannot render, coded)."""
        return {}

    def close(self) -> list:
        return self.sink.close()


def bos_piece(tokenizer: Tokenizer, special) -> str | None:
    """The BOS piece a derived run with --bos would use (and whose text the store looks for at each
    document's start): the run's, else the model's own BOS, else the default name (never allocated)."""
    from ..tokenizers.base import DEFAULT_PIECES

    if special.pieces.get("bos"):
        return special.pieces["bos"]
    token_id = tokenizer.model_role_id("bos")
    return tokenizer.piece(token_id) if token_id is not None else DEFAULT_PIECES.get("bos")
