"""Which parts of an assistant turn carry loss (``--assistant-parts``): its reasoning, its tool calls, its answer.

A part is found by rendering, never by guessing delimiters: the conversation is rendered again with the
message's part taken away (``reasoning_content`` and a ``<think>…</think>`` block at the head of its content
for the reasoning; ``tool_calls`` for the tool calls), and the part's span is the characters the whole
rendering holds that the other does not (it agrees with the whole one before and after them), grown over any
special token it cuts, so the span is what the template writes because of the part: Qwen3's reasoning inside
the ``<think>`` frame it writes for every final turn, Hermes' and Qwen2.5's ``<tool_call>`` blocks whole, Llama
3.1's JSON call. A template that writes nothing for a part in a turn (Qwen3 and DeepSeek-R1 drop reasoning
before the last user message) gives it no span; where taking a part away changes later turns too, the
conversation up to the turn is compared; a span is only ever what lies inside its own turn.

A token is a part's if it overlaps the part's characters, and keeps its loss if a learned part holds it. The
answer is the rest of the turn before its end of turn: its content and the template's frame around the parts.
The end of turn (the turn's last special token) is learned with the turn's learned parts: a turn none of whose
written parts is learned carries no loss at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ObjcliError
from ..kernels.chat import mark_ranges, overlapping_tokens
from .chat_spans import common_length
from .conversations import Conversation, render

PARTS = ("reasoning", "tool-calls", "answer")
KINDS = ("reasoning", "tool-calls")  # the parts found by rendering (their codes: the index), the answer is the rest
REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")  # Qwen3/DeepSeek's, vLLM's, gpt-oss's


def parse_parts(value: str) -> frozenset[str]:
    chosen = [p.strip() for p in value.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in PARTS]
    if unknown or not chosen:
        shown = value if value.strip() else repr(value)
        raise ObjcliError(
            f"--assistant-parts {shown}: parts are {', '.join(PARTS)} (a comma-separated list of those that carry loss)"
        )
    return frozenset(chosen)


def without_reasoning(message: dict) -> dict | None:
    """The message with its reasoning taken away, or None when it has none."""
    content = message.get("content")
    stripped = {k: v for k, v in message.items() if k not in REASONING_KEYS}
    if isinstance(content, str) and "</think>" in content:
        stripped["content"] = content.rpartition("</think>")[2].lstrip("\n")
    return stripped if stripped != message else None


def without_tool_calls(message: dict) -> dict | None:
    return {k: v for k, v in message.items() if k != "tool_calls"} if message.get("tool_calls") else None


@dataclass(frozen=True)
class Turn:
    """What a turn is made of, in the whole rendering: its parts' spans, whether it writes an answer, and
    where its end of turn starts."""

    parts: dict[str, tuple[int, int]]
    answer: bool
    end_of_turn: int


class PartSpans:
    """Each assistant turn's parts as spans of the whole rendering (see the module)."""

    def __init__(self, template, markers):
        self.template, self.markers = template, markers

    def _part(self, conversation: Conversation, text: str, index: int, changed: dict, turn) -> tuple[int, int]:
        """Where the part lies: what the whole rendering holds that it does not without the part; where taking
        it away changes later turns too (DeepSeek-V3 counts tool calls across turns), what the conversation up
        to the turn holds that it does not without it, if the turn is written there as in the whole."""
        messages = conversation.messages
        other, _ = render(self.template, [*messages[:index], changed, *messages[index + 1 :]], conversation.extra)
        a, b = _difference(text, other)
        if a >= b or (turn[0] <= a and b <= turn[1]):
            return a, b
        upto, _ = render(self.template, messages[: index + 1], conversation.extra)
        if upto[turn[0] : turn[1]] != text[turn[0] : turn[1]]:
            return a, b
        other, _ = render(self.template, [*messages[:index], changed], conversation.extra)
        return _difference(upto, other)

    def turn(self, conversation: Conversation, text: str, index: int, turn: tuple[int, int]) -> Turn:
        start, end = turn
        message = conversation.messages[index]
        parts = {}
        for kind, changed in (("reasoning", without_reasoning(message)), ("tool-calls", without_tool_calls(message))):
            if changed is None:
                continue
            a, b = self._part(conversation, text, index, changed, turn)
            a, b = self._whole_markers(text, max(a, start), min(b, end))  # what it writes inside the turn
            if a < b:
                parts[kind] = (a, b)
        end_of_turn = self._end_of_turn(text, start, end)
        answer = _gaps(start, end_of_turn, sorted(parts.values()))
        return Turn(parts, any(text[a:b].strip() for a, b in answer), end_of_turn)

    def _whole_markers(self, text: str, a: int, b: int) -> tuple[int, int]:
        """The span grown over the special tokens it cuts (``<｜tool▁calls▁begin｜>`` and the answer's
        ``<｜end▁of▁sentence｜>`` share their first characters: the difference starts inside the token)."""
        for found in self.markers.finditer(text, max(a - 64, 0), b + 64) if self.markers and a < b else ():
            if found.start() < a < found.end():
                a = found.start()
            if found.start() < b < found.end():
                b = found.end()
        return a, b

    def _end_of_turn(self, text: str, start: int, end: int) -> int:
        """Where the turn's end-of-turn token starts (its last special token, ending the turn), else its end;
        before ``start`` where the turn begins inside it (DeepSeek-V3's empty answer: its turn parts from the
        generation prompt inside its end of sentence)."""
        last = None
        for found in self.markers.finditer(text, max(start - 64, 0), end) if self.markers else ():
            last = found
        return last.start() if last is not None and last.end() == end else end


def _gaps(start: int, end: int, taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans of ``[start, end)`` outside ``taken`` (sorted, disjoint)."""
    gaps, position = [], start
    for a, b in taken:
        if a > position:
            gaps.append((position, min(a, end)))
        position = max(position, b)
    if position < end:
        gaps.append((position, end))
    return [(a, b) for a, b in gaps if a < b]


def _difference(text: str, other: str) -> tuple[int, int]:
    """The span of ``text`` that ``other`` does not hold: they agree before it and after it."""
    prefix = common_length(text, other, 0)
    return prefix, len(text) - _common_suffix(text, other, prefix)


def _common_suffix(a: str, b: str, prefix: int) -> int:
    """How many characters ``a`` and ``b`` agree on at their ends, leaving their first ``prefix`` alone."""
    low, high = 0, min(len(a), len(b)) - prefix
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle :] == b[len(b) - middle :]:
            low = middle
        else:
            high = middle - 1
    return low


@dataclass
class TurnParts:
    """The supervised spans' parts as tokens (what a chat store keeps, so parts are chosen at derive time): per
    span, whether its turn writes an answer and its end of turn's first token; per part, its span, kind (an
    index into ``KINDS``) and token range."""

    answer: np.ndarray  # bool, per span
    end: np.ndarray  # per span: the end of turn's first token (the span's last + 1 where it has none)
    span: np.ndarray  # per part: its span's index
    kind: np.ndarray
    first: np.ndarray
    last: np.ndarray

    @classmethod
    def plain(cls, last: np.ndarray) -> TurnParts:
        """Spans of turns found otherwise (generation markers, content): answers, with no parts."""
        none = np.zeros(0, np.int64)
        return cls(np.ones(len(last), bool), np.asarray(last, np.int64) + 1, none, none.astype(np.int8), none, none)

    def spans_kept(self, kept: np.ndarray) -> TurnParts:
        """Of the spans ``kept`` (a mask), their own, their parts renumbered."""
        index = np.cumsum(kept) - 1
        mine = kept[self.span]
        return TurnParts(self.answer[kept], self.end[kept], index[self.span[mine]], self.kind[mine],
                         self.first[mine], self.last[mine])  # fmt: skip

    def chosen(self, first: np.ndarray, tokens: int, learned: frozenset[str]) -> tuple[np.ndarray, np.ndarray]:
        """(the spans whose turn writes a learned part, the tokens inside the spans that carry no loss)."""
        learned_kinds = np.array([kind in learned for kind in KINDS])
        on = learned_kinds[self.kind] if len(self.kind) else np.zeros(0, bool)
        keeps = self.answer & ("answer" in learned)
        keeps |= np.bincount(self.span[on], minlength=len(first)) > 0
        unlearned = mark_ranges(tokens, self.first[~on], self.last[~on])
        if "answer" not in learned:
            has = self.end > first
            unlearned |= mark_ranges(tokens, first[has], self.end[has] - 1)
        unlearned &= ~mark_ranges(tokens, self.first[on], self.last[on])
        return keeps, unlearned


class CharParts:
    """The supervised spans' parts as the rendering gives them (characters of the joined texts), gathered as
    spans are found, then mapped to tokens."""

    def __init__(self):
        self.answer, self.end_owner, self.end_start, self.end_stop = [], [], [], []
        self.parts: list[tuple[int, int, int, int, int]] = []  # (span, owner, kind, start, end)

    def add(self, span: int, owner: int, joined: int, turn, end: int) -> None:
        self.answer.append(turn.answer if turn else True)
        self.end_owner.append(owner)
        self.end_start.append(joined + (turn.end_of_turn if turn else end))
        self.end_stop.append(joined + end)
        for kind, (a, b) in turn.parts.items() if turn else ():
            self.parts.append((span, owner, KINDS.index(kind), joined + a, joined + b))

    def tokens(self, encoding: tuple, last: np.ndarray) -> TurnParts:
        """As tokens (``encoding``: each token's characters and each text's tokens): a part holds the tokens
        that overlap it; an end of turn starts at the first token that overlaps it (past the span without one)."""
        span, owner, kind, start, end = np.array(self.parts, np.int64).reshape(-1, 5).T
        first_part, last_part, found = overlapping_tokens(*encoding, owner, start, end)
        ends = np.array([self.end_owner, self.end_start, self.end_stop], np.int64).reshape(3, -1)
        end_first, _, has_end = overlapping_tokens(*encoding, *ends)
        end_token = np.where(has_end, end_first, last + 1)
        answer = np.array(self.answer, bool)
        return TurnParts(
            answer, end_token, span[found], kind[found].astype(np.int8), first_part[found], last_part[found]
        )


def check_parts(options, has_generation: bool) -> None:
    """--assistant-parts chooses inside the turns the template writes (found by rendering, here)."""
    if options.learned_parts == set(PARTS):
        return
    if options.loss_on == "all":
        raise ObjcliError(f"--assistant-parts {options.assistant_parts}: --loss-on all learns every token; drop one")
    if has_generation or options.assistant_span == "content":
        how = "its {% generation %} markers" if has_generation else "--assistant-span content"
        raise ObjcliError(
            f"--assistant-parts {options.assistant_parts}: the template's turns are chosen by {how}; parts are found "
            "in whole turns: give a template without markers (--chat-template) or drop --assistant-span content"
        )
