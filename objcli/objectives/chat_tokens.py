"""A batch's conversations as tokens (``chat.py``): what rendering and encoding give, and what a chat
store keeps."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .chat_images import ImageTokens
from .chat_parts import TurnParts


@dataclass
class ConversationTokens:
    """A batch's conversations as tokens: what rendering and encoding give, and what a chat store keeps
    (its records' ids, so a derived run renders nothing)."""

    tokens: np.ndarray  # every example's ids, one after another
    offsets: np.ndarray  # each example's, len + 1
    record: np.ndarray  # each example's record in the batch
    owner: np.ndarray  # each supervised span's example (spans that map to no token are gone)
    first: np.ndarray  # its first token, in ``tokens``
    last: np.ndarray  # its last token (inclusive)
    failed: dict[int, str]  # record -> why it renders nothing (RENDER_FAILURES)
    parts: TurnParts | None = None  # the spans' parts (a chat store's, or found for --assistant-parts)
    images: ImageTokens | None = None  # --processor: each image's tokens and reference
    unlearned: np.ndarray | None = None  # --assistant-parts: tokens inside supervised spans that carry no loss

    @classmethod
    def empty(cls, failed: dict[int, str]) -> ConversationTokens:
        none = np.zeros(0, np.int64)
        return cls(np.zeros(0, np.int32), np.zeros(1, np.int64), none, none, none, none, failed)
