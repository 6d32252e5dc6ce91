"""Records to conversations, and where each message's text lands in the rendered template.

A record is a JSON object with a list of messages (``{"role": …, "content": …}``, the layout of
Hugging Face and OpenAI) under ``--messages-key``, or a ``prompt`` and a ``completion``: two
strings (plain instruction data: loss on the completion) or two lists of messages (a
conversational prompt and its answer: loss on the answer's assistant messages).

Without ``{% generation %}`` markers, an assistant message's span is found by rendering the
conversation a second time with each non-empty content replaced by a placeholder: what lies
between placeholders is the template's own text, so the real rendering must be that text with
the contents put back (verbatim, or stripped, as templates that ``trim`` do). A rendering that
cannot be taken apart that way is an error naming the record, never a guessed mask. The
template's text around the placeholders depends only on the roles (and which contents are
empty) for every template we know, so it is computed once per shape and checked every time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import ObjcliError
from ..tokenizers.chat_template import ChatTemplate, TemplateFailure

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "ipython", "function"})
PLACEHOLDER = re.compile("\ue000([0-9]+)\ue001")


class BadRecord(Exception):
    """A record that is counted and skipped: ``reason`` is its counter name."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(detail or reason)
        self.reason = reason


@dataclass
class Conversation:
    """What one record asks for: messages to render (or a plain prompt and completion) and which
    messages the loss is on."""

    messages: list[dict] = field(default_factory=list)
    supervised: list[int] = field(default_factory=list)  # message indices that carry loss
    prompt: str | None = None  # plain prompt/completion records
    completion: str | None = None


def _messages(value, what: str) -> list[dict]:
    if not isinstance(value, list) or not value:
        raise BadRecord("no_messages", f"{what} is not a non-empty list of messages")
    messages = []
    for message in value:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRecord("bad_message", f"{what} holds a message without a string 'role'")
        if message["role"] not in ROLES:
            raise BadRecord("unknown_role", f"role {message['role']!r}")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise BadRecord("non_string_content", f"a {message['role']} message's content is {type(content).__name__}")
        # As transformers does: keys whose value is None are dropped (OpenAI's content=None).
        messages.append({k: v for k, v in message.items() if v is not None} if None in message.values() else message)
    return messages


def conversation_of(record, messages_key: str) -> Conversation:
    if not isinstance(record, dict):
        raise BadRecord("not_an_object", "the record is not a JSON object")
    if messages_key in record:
        messages = _messages(record[messages_key], f"field '{messages_key}'")
        supervised = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    elif "prompt" in record and "completion" in record:
        prompt, completion = record["prompt"], record["completion"]
        if isinstance(prompt, str) and isinstance(completion, str):
            if not completion:
                raise BadRecord("empty_completion", "the completion is empty")
            return Conversation(prompt=prompt, completion=completion)
        messages = _messages(prompt, "field 'prompt'") + _messages(completion, "field 'completion'")
        first = len(prompt)
        supervised = [i for i, m in enumerate(messages) if i >= first and m["role"] == "assistant"]
    else:
        raise BadRecord("no_messages", f"the record has no field '{messages_key}' and no prompt/completion pair "
                                       f"(its fields: {', '.join(sorted(map(str, record))) or 'none'})")
    if not supervised:
        raise BadRecord("no_assistant_message", "no assistant message to learn from")
    return Conversation(messages=messages, supervised=supervised)


def render(template: ChatTemplate, messages: list[dict]) -> tuple[str, list[tuple[int, int]]]:
    try:
        return template.render(messages)
    except TemplateFailure as failure:
        raise BadRecord("template_error", str(failure)) from None


class ContentSpans:
    """Finds where each message's content lands in a rendering, for templates without markers."""

    def __init__(self, template: ChatTemplate):
        self.template = template
        self.shapes: dict[tuple, list] = {}

    def _layout(self, messages: list[dict]) -> list:
        """The template's text between contents: [text, index, text, index, …, text]."""
        stand_ins = [{**m, "content": f"\ue000{i}\ue001"} if m.get("content") else m for i, m in enumerate(messages)]
        text, _ = render(self.template, stand_ins)
        parts = PLACEHOLDER.split(text)
        return [int(p) if k % 2 else p for k, p in enumerate(parts)]

    def spans(self, messages: list[dict], text: str) -> dict[int, tuple[int, int]]:
        """Message index -> (start, end) of its content in ``text``; raises ``ValueError`` where the
        rendering does not take apart into the template's text and the contents."""
        shape = tuple((m["role"], bool(m.get("content"))) for m in messages)
        layout = self.shapes.get(shape)
        if layout is not None:
            found = _take_apart(layout, messages, text)
            if found is not None:
                return found
        layout = self._layout(messages)
        found = _take_apart(layout, messages, text)
        if found is None:
            raise ValueError("the template renders a message's content other than as written")
        self.shapes[shape] = layout
        return found


def _take_apart(layout: list, messages: list[dict], text: str) -> dict[int, tuple[int, int]] | None:
    spans: dict[int, tuple[int, int]] = {}
    position = 0
    for k, part in enumerate(layout):
        if k % 2 == 0:
            if not text.startswith(part, position):
                return None
            position += len(part)
            continue
        content = messages[part]["content"]
        for written in (content, content.strip()):  # as written, or trimmed (even to nothing)
            if text.startswith(written, position):
                break
        else:
            return None
        spans.setdefault(part, (position, position + len(written)))
        position += len(written)
    return spans if position == len(text) else None


def turn_end(text: str, end: int, markers: re.Pattern | None) -> int:
    """An assistant span runs on over the end-of-turn token right after it (``<|eot_id|>``,
    ``<|im_end|>``, ``</s>``, ``<end_of_turn>``): the model must learn to stop. ``markers``: the
    model's special-token texts as one pattern (``chat_encode.special_pattern``)."""
    found = markers.match(text, end) if markers else None
    return found.end() if found else end


def record_error(partition: int, document: int, message: str) -> ObjcliError:
    return ObjcliError(f"partition {partition}, record {document}: {message}; the assistant's text cannot be found "
                       "in the rendered conversation, so its loss mask would be wrong. Use a template with "
                       "{% generation %} markers (--chat-template FILE) or --loss-on all")
