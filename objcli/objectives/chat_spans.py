"""Where each assistant turn lands in a conversation rendered with its template.

Without ``{% generation %}`` markers, an assistant turn is what the template writes for that
message (``TurnSpans``): the conversation up to the message rendered with the generation prompt
is where the turn starts; the conversation up to and including it, rendered as if it ended there,
agrees with the whole rendering through the turn, and the turn ends with its last special token
(``<|im_end|>``, ``<|eot_id|>``, ``</s>``, the final EOS some templates add): content, reasoning,
tool calls and the end of turn, as a model generates them. A template that rewrites earlier turns
(Qwen3 drops their reasoning) renders them otherwise in the whole conversation: such a record is a
counted skip (``history_rewritten``); ``--turns each`` makes one example per assistant turn.
``--assistant-span content`` keeps the older definition (``ContentSpans``): the message's content
as written (or trimmed) plus the end-of-turn token right after it. ``absent_markers``: the template's
special-token texts that the tokenizer has no special token for (the run warns of them).
"""

from __future__ import annotations

import re

import msgspec

from ..tokenizers.chat_template import ChatTemplate, template_markers
from .conversations import PLACEHOLDER, BadRecord, Conversation, render


class TurnSpans:
    """Each supervised assistant turn's (start, end) in the whole rendering (see the module)."""

    def __init__(self, template: ChatTemplate, markers: re.Pattern | None):
        self.template = template
        self.markers = markers

    def spans(self, conversation: Conversation, text: str) -> list[tuple[int, int]]:
        messages, extra = conversation.messages, conversation.extra
        spans = []
        for index in conversation.supervised:
            before, _ = render(self.template, messages[:index], extra, add_generation_prompt=True)
            last = index == len(messages) - 1  # the conversation up to it is the whole one
            upto = text if last else render(self.template, messages[: index + 1], extra)[0]
            # Where the turn starts: after the generation prompt, or where the whole rendering parts from
            # it inside the prompt (DeepSeek-V3's opens a <think> block that a written turn does not have).
            # Parting before the prompt is an earlier turn written otherwise (Qwen3 drops its reasoning).
            start = len(before) if text.startswith(before) else common_length(text, before, 0)
            history = (
                start
                if start == len(before)
                else common_length(before, render(self.template, messages[:index], extra)[0], 0)
            )
            if start < history or not upto.startswith(before[:start]):
                raise BadRecord(
                    "history_rewritten",
                    f"the conversation up to message {index} is rendered otherwise once later turns follow it",
                )
            agreed = start + common_length(text, upto, start)
            end = self._turn_end(text, start, agreed, whole=agreed == len(upto))
            answers = _answer_texts(messages[index].get("content"))
            if end <= start:  # written otherwise once later turns follow (Qwen3 drops its reasoning then)
                end = self._rewritten_turn_end(text, start, answers, index)
            for answer in answers:
                if answer not in text[start:end]:
                    raise BadRecord(
                        "content_not_found",
                        f"the template does not write the content of message {index} (an assistant message) as given",
                    )
            spans.append((start, end))
        return spans

    def _rewritten_turn_end(self, text: str, start: int, answers: list[str], index: int) -> int:
        """The end of a turn that the whole rendering writes otherwise than the conversation up to it:
        the first end-of-turn token after its answer's text, which the whole rendering must hold."""
        position = start
        for answer in answers:
            found = text.find(answer, position)
            if found < 0:
                break
            position = found + len(answer)
        else:
            marker = self.markers.search(text, position) if self.markers else None
            if marker is not None:
                return marker.end()
        raise BadRecord(
            "history_rewritten",
            f"the template writes message {index} (an assistant message) "
            "otherwise once later turns follow it, and its end cannot be found",
        )

    def _turn_end(self, text: str, start: int, agreed: int, whole: bool) -> int:
        """After the turn's last special token (its end of turn); without one, where the conversation
        up to the turn ends (``whole``: all of it agrees), less the whitespace before the next message;
        ``start`` where they part before any end of turn (the turn is written otherwise later)."""
        ends = [m.end() for m in self.markers.finditer(text, start, agreed)] if self.markers else []
        if ends:
            return ends[-1]
        return start + len(text[start:agreed].rstrip()) if whole else start


def _answer_texts(content) -> list[str]:
    """What of an assistant message's content its turn must hold: each text, less a leading reasoning
    block (templates move ``<think>…</think>`` into a block of their own) and the whitespace templates
    trim."""
    texts = [content] if isinstance(content, str) else [p["text"] for p in content or ()]
    return [answer for t in texts if (answer := t.rpartition("</think>")[2].strip())]


def common_length(a: str, b: str, start: int) -> int:
    """How many characters ``a`` and ``b`` agree on from ``start`` (a binary search on slices)."""
    low, high = 0, min(len(a), len(b)) - start
    while low < high:
        middle = (low + high + 1) // 2
        if a[start : start + middle] == b[start : start + middle]:
            low = middle
        else:
            high = middle - 1
    return low


class ContentSpans:
    """Finds where each message's content lands in a rendering, for templates without markers."""

    def __init__(self, template: ChatTemplate):
        self.template = template
        self.shapes: dict[tuple, list] = {}

    def _layout(self, messages: list[dict], extra: dict) -> list:
        """The template's text between contents: [text, index, text, index, …, text]."""
        stand_ins = [{**m, "content": f"\ue000{i}\ue001"} if m.get("content") else m for i, m in enumerate(messages)]
        text, _ = render(self.template, stand_ins, extra)
        parts = PLACEHOLDER.split(text)
        return [int(p) if k % 2 else p for k, p in enumerate(parts)]

    def spans(self, messages: list[dict], text: str, extra: dict | None = None) -> dict[int, tuple[int, int]]:
        """Message index -> (start, end) of its content in ``text``; raises ``BadRecord`` where the
        rendering does not take apart into the template's text and the contents."""
        if any(not isinstance(m.get("content", ""), str) for m in messages):
            raise BadRecord("content_not_found", "content given as parts has no one text to find")
        extra = extra or {}
        shape = tuple((m["role"], bool(m.get("content"))) for m in messages) + (
            (msgspec.json.encode(extra, order="sorted"),) if extra else ()
        )
        layout = self.shapes.get(shape)
        if layout is not None:
            found = _take_apart(layout, messages, text)
            if found is not None:
                return found
        layout = self._layout(messages, extra)
        found = _take_apart(layout, messages, text)
        if found is None:
            raise BadRecord("content_not_found", "the template renders a message's content other than as written")
        self.shapes[shape] = layout
        return found


def _take_apart(layout: list, messages: list[dict], text: str) -> dict[int, tuple[int, int]] | None:
    """The contents' spans if ``text`` is the layout with each content put back as written or with the
    whitespace templates remove (``strip``, ``trim``, leading or trailing newlines), trying each way
    until the rest of the text fits too (Llama 2 strips a trailing space that its ``' [/INST]'``
    then writes again)."""
    spans: dict[int, tuple[int, int]] = {}
    failed: set[tuple[int, int]] = set()  # (part, position) known not to fit: each tried once

    def fits(k: int, position: int) -> bool:
        if k == len(layout):
            return position == len(text)
        if (k, position) in failed:
            return False
        part = layout[k]
        if k % 2 == 0:
            return text.startswith(part, position) and fits(k + 1, position + len(part))
        content = messages[part]["content"]
        for written in dict.fromkeys(
            (content, content.strip(), content.rstrip(), content.lstrip(), content.strip("\n"), content.strip(" "))
        ):
            if text.startswith(written, position) and fits(k + 1, position + len(written)):
                spans[part] = (position, position + len(written))  # earlier parts set last: the first place wins
                return True
        failed.add((k, position))
        return False

    return spans if fits(0, 0) else None


def turn_end(text: str, end: int, markers: re.Pattern | None) -> int:
    """An assistant span runs on over the end-of-turn token right after it (``<|eot_id|>``,
    ``<|im_end|>``, ``</s>``, ``<end_of_turn>``): the model must learn to stop. ``markers``: the
    model's special-token texts as one pattern (``chat_encode.special_pattern``)."""
    found = markers.match(text, end) if markers else None
    return found.end() if found else end


def absent_markers(source: str, tokenizer) -> list[str]:
    """The template's special-token markers that are not one special token of the tokenizer."""
    specials = set(tokenizer.special_texts())
    control = tokenizer.control_mask()

    def special(marker: str) -> bool:
        token_id = tokenizer.model_id(marker)
        return marker in specials or (token_id is not None and token_id < len(control) and bool(control[token_id]))

    return [marker for marker in template_markers(source) if not special(marker)]


def absent_warning(absent: list[str], template_file, tokenizer_path) -> list[str]:
    """The run's warning of the template's markers that the tokenizer has no special token for."""
    if not absent:
        return []
    shown = ", ".join(absent[:4]) + (f" and {len(absent) - 4} more" if len(absent) > 4 else "")
    return [
        f"the chat template {template_file.name} writes {shown}, which the tokenizer {tokenizer_path} "
        "has no special token for: each is encoded as several ordinary pieces; give the model's own tokenizer "
        "(or its template, --chat-template)"
    ]
