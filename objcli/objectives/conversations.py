"""Records to conversations, and where each assistant turn lands in the rendered template.

A record is a JSON object in one of the layouts datasets ship: a list of messages (``{"role": …,
"content": …}``, Hugging Face's and OpenAI's) under ``--messages-key``; ShareGPT's
``conversations`` (``{"from": "human"|"gpt"|…, "value": …}``); Alpaca's ``instruction``, ``input``
and ``output``; or a ``prompt`` and a ``completion``: two strings (plain instruction data: loss on
the completion) or two lists of messages (a conversational prompt and its answer: loss on the
answer's assistant messages). The record's other fields (``tools``, ``documents``, …) are passed
to the template as ``apply_chat_template`` passes its keyword arguments.

Without ``{% generation %}`` markers, an assistant turn is what the template writes for that
message (``TurnSpans``): the conversation up to the message rendered with the generation prompt
is where the turn starts; the conversation up to and including it, rendered as if it ended there,
agrees with the whole rendering through the turn, and the turn ends with its last special token
(``<|im_end|>``, ``<|eot_id|>``, ``</s>``, the final EOS some templates add): content, reasoning,
tool calls and the end of turn, as a model generates them. A template that rewrites earlier turns
(Qwen3 drops their reasoning) renders them otherwise in the whole conversation: such a record is a
counted skip (``history_rewritten``); ``--turns each`` makes one example per assistant turn.
``--assistant-span content`` keeps the older definition (``ContentSpans``): the message's content
as written (or trimmed) plus the end-of-turn token right after it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import msgspec

from ..tokenizers.chat_template import ChatTemplate, TemplateFailure

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "ipython", "function"})
PLACEHOLDER = re.compile("\ue000([0-9]+)\ue001")
# ShareGPT's speakers (``{"from": …, "value": …}``), as the datasets and LLaMA-Factory name them.
SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "bard": "assistant",
    "system": "system",
    "tool": "tool",
    "observation": "tool",
    "function_call": "assistant",
    "function": "tool",
}
# Fields of a record that are not template arguments: its messages in each layout, and ours.
LAYOUT_FIELDS = frozenset(
    {
        "messages",
        "conversations",
        "prompt",
        "completion",
        "instruction",
        "input",
        "output",
        "system",
        "add_generation_prompt",
    }
)


# Why a record renders no conversation: its counter's name ("skipped:<reason>"). A chat store keeps
# each record's as a code, 1 + its index here, and lists these names in its manifest.
RENDER_FAILURES = (
    "not_an_object", "no_messages", "bad_message", "unknown_role", "non_string_content", "non_text_content",
    "bad_tools", "empty_completion", "no_assistant_message", "content_not_found", "template_error", "prompt_only",
    "history_rewritten",
)  # fmt: skip


class BadRecord(Exception):
    """A record that is counted and skipped: ``reason`` is its counter name."""

    def __init__(self, reason: str, detail: str = ""):
        assert reason in RENDER_FAILURES, reason  # a new reason is listed there (a chat store codes it)
        super().__init__(detail or reason)
        self.reason = reason


@dataclass
class Conversation:
    """What one record asks for: messages to render (or a plain prompt and completion), which
    messages the loss is on, and the record's other fields the template may read (``tools``)."""

    messages: list[dict] = field(default_factory=list)
    supervised: list[int] = field(default_factory=list)  # message indices that carry loss
    prompt: str | None = None  # plain prompt/completion records
    completion: str | None = None
    extra: dict = field(default_factory=dict)  # template arguments: tools, documents, …
    first_supervised_block: int = 0  # generation blocks before it belong to a conversational prompt


def _checked_content(content, role: str):
    """A message's content as ``transformers`` passes it: a string, or a list of parts of which only
    text parts can be tokenized here (an image part is a counted skip)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        if all(p.get("type") == "text" and isinstance(p.get("text"), str) for p in content):
            return content
        kinds = sorted({str(p.get("type")) for p in content if p.get("type") != "text"})
        raise BadRecord("non_text_content", f"a {role} message has {', '.join(kinds) or 'untyped'} parts")
    raise BadRecord("non_string_content", f"a {role} message's content is {type(content).__name__}")


def _messages(value, what: str) -> list[dict]:
    if not isinstance(value, list) or not value:
        raise BadRecord("no_messages", f"{what} is not a non-empty list of messages")
    messages = []
    for message in value:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRecord("bad_message", f"{what} holds a message without a string 'role'")
        if message["role"] not in ROLES:
            raise BadRecord("unknown_role", f"role {message['role']!r}")
        content = _checked_content(message.get("content"), message["role"])
        if content is not message.get("content"):
            message = {**message, "content": content}
        # As transformers does: keys whose value is None are dropped (OpenAI's content=None).
        messages.append({k: v for k, v in message.items() if v is not None} if None in message.values() else message)
    return messages


def _sharegpt(value) -> list[dict]:
    """ShareGPT's ``conversations`` (``from``/``value``; some copies use ``role``/``content``) as messages."""
    if not isinstance(value, list) or not value:
        raise BadRecord("no_messages", "field 'conversations' is not a non-empty list of turns")
    messages = []
    for turn in value:
        if not isinstance(turn, dict):
            raise BadRecord("bad_message", "field 'conversations' holds a turn that is not an object")
        if "from" not in turn:
            messages.append(turn)
            continue
        role = SHAREGPT_ROLES.get(turn["from"]) if isinstance(turn["from"], str) else None
        if role is None:
            raise BadRecord("unknown_role", f"ShareGPT speaker {turn['from']!r}")
        messages.append({"role": role, "content": turn.get("value")})
    return _messages(messages, "field 'conversations'")


def _alpaca(record: dict) -> list[dict]:
    """Alpaca's instruction, input and output: the user asks the instruction, then a blank line and
    the input when there is one; the assistant answers the output; an optional system prompt first."""
    fields = {k: record.get(k) for k in ("instruction", "input", "output", "system")}
    if not all(isinstance(v, str) or (v is None and k in ("input", "system")) for k, v in fields.items()):
        raise BadRecord("non_string_content", "Alpaca's instruction, input and output must be strings")
    user = fields["instruction"] + (f"\n\n{fields['input']}" if fields["input"] else "")
    system = [{"role": "system", "content": fields["system"]}] if fields["system"] else []
    return [*system, {"role": "user", "content": user}, {"role": "assistant", "content": fields["output"]}]


def _tools(value) -> list[dict] | None:
    """A record's ``tools`` as ``apply_chat_template`` takes them: a list of JSON schemas (objects).
    Many datasets on the Hub store the list as a JSON string: it is parsed (an empty string is no
    tools). Any other shape (an object, a list of strings) ``transformers`` refuses, and a template
    would iterate it a character or a key at a time: a counted skip naming why."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            value = json.loads(value)
        except ValueError:
            raise BadRecord("bad_tools", "field 'tools' is a string that is not JSON") from None
    if isinstance(value, list) and all(isinstance(tool, dict) for tool in value):
        return value
    what = type(value).__name__ if not isinstance(value, list) else "a list holding non-objects"
    raise BadRecord("bad_tools", f"field 'tools' is {what}, not a list of JSON schemas (objects)")


def conversation_of(record, messages_key: str) -> Conversation:
    """The conversation a record holds, in any layout we know (see the module)."""
    if not isinstance(record, dict):
        raise BadRecord("not_an_object", "the record is not a JSON object")
    extra = {k: v for k, v in record.items() if k not in LAYOUT_FIELDS and k != messages_key}
    if "tools" in extra:
        extra["tools"] = _tools(extra["tools"])
    first = 0
    if messages_key in record:
        messages = _messages(record[messages_key], f"field '{messages_key}'")
    elif "conversations" in record:
        messages = _sharegpt(record["conversations"])
    elif "instruction" in record and "output" in record:
        messages = _alpaca(record)
    elif "prompt" in record and "completion" in record:
        prompt, completion = record["prompt"], record["completion"]
        if isinstance(prompt, str) and isinstance(completion, str):
            if not completion:
                raise BadRecord("empty_completion", "the completion is empty")
            return Conversation(prompt=prompt, completion=completion)
        messages = _messages(prompt, "field 'prompt'") + _messages(completion, "field 'completion'")
        first = len(prompt)
    elif "prompt" in record:
        raise BadRecord(
            "prompt_only", "a prompt without a completion (TRL's prompt-only layout, for RL) has nothing to learn from"
        )
    else:
        raise BadRecord(
            "no_messages",
            f"the record has no field '{messages_key}', 'conversations', instruction/"
            f"output or prompt/completion (its fields: "
            f"{', '.join(sorted(map(str, record))) or 'none'})",
        )
    supervised = [i for i, m in enumerate(messages) if i >= first and m["role"] == "assistant"]
    if not supervised:
        raise BadRecord("no_assistant_message", "no assistant message to learn from")
    blocks_before = sum(m["role"] == "assistant" for m in messages[:first])
    return Conversation(messages=messages, supervised=supervised, extra=extra, first_supervised_block=blocks_before)


def render(
    template: ChatTemplate, messages: list[dict], extra: dict | None = None, add_generation_prompt: bool = False
) -> tuple[str, list[tuple[int, int]]]:
    try:
        return template.render(messages, extra, add_generation_prompt)
    except TemplateFailure as failure:
        raise BadRecord("template_error", str(failure)) from None


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
            start = len(before) if text.startswith(before) else _common_length(text, before, 0)
            history = (
                start
                if start == len(before)
                else _common_length(before, render(self.template, messages[:index], extra)[0], 0)
            )
            if start < history or not upto.startswith(before[:start]):
                raise BadRecord(
                    "history_rewritten",
                    f"the conversation up to message {index} is rendered otherwise once later turns follow it",
                )
            agreed = start + _common_length(text, upto, start)
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


def _common_length(a: str, b: str, start: int) -> int:
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
