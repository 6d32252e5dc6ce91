"""Records to conversations (``chat_spans.py`` finds where each assistant turn lands in the rendering).

A record is a JSON object in one of the layouts datasets ship: a list of messages (``{"role": …,
"content": …}``, Hugging Face's and OpenAI's) under ``--messages-key``; ShareGPT's
``conversations`` (``{"from": "human"|"gpt"|…, "value": …}``); Alpaca's ``instruction``, ``input``
and ``output``; or a ``prompt`` and a ``completion``: two strings (plain instruction data: loss on
the completion) or two lists of messages (a conversational prompt and its answer: loss on the
answer's assistant messages). The record's other fields (``tools``, ``documents``, …) are passed
to the template as ``apply_chat_template`` passes its keyword arguments.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import msgspec

from ..tokenizers.chat_template import ChatTemplate, TemplateFailure, find_template

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
    "history_rewritten", "preference_pair", "missing_side", "identical_pair", "prompt_too_long", "pair_too_long",
    "mixed_layout", "missing_margin", "no_prompt", "no_data_source", "too_deep",
    "bad_value", "bad_image", "image_missing", "image_unreadable", "image_count_mismatch",
)  # fmt: skip


class BadRecord(Exception):
    """A record that is counted and skipped: ``reason`` is its counter name."""

    def __init__(self, reason: str, detail: str = ""):
        assert reason in RENDER_FAILURES, reason  # a new reason is listed there (a chat store codes it)
        super().__init__(detail or reason)
        self.reason = reason


def decode_record(text) -> object:
    """A record's JSON (the reader has checked it is an object of JSON). msgspec refuses numbers past
    a double's range (``1e400``), which JSON allows: such a record is decoded as Python's ``json``
    does (``inf``), so a number in a field no objective reads never costs the record."""
    try:
        return msgspec.json.decode(str(text))
    except msgspec.DecodeError:
        try:
            return json.loads(str(text))
        except (ValueError, RecursionError) as error:
            raise BadRecord("not_an_object", f"the record is not JSON ({error})") from None
    except RecursionError:
        raise BadRecord("too_deep", "the record is nested too deep to decode") from None


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


def _checked_content(content, role: str, images: bool):
    """A message's content as ``transformers`` passes it: a string, or a list of parts of which text
    parts can be tokenized, and image parts with a processor (``--processor``; else a counted skip)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        if all(
            p.get("type") == "text" and isinstance(p.get("text"), str) or images and p.get("type") == "image"
            for p in content
        ):
            return content
        kinds = sorted({str(p.get("type")) for p in content if p.get("type") != "text"})
        raise BadRecord("non_text_content", f"a {role} message has {', '.join(kinds) or 'untyped'} parts")
    raise BadRecord("non_string_content", f"a {role} message's content is {type(content).__name__}")


def checked_messages(value, what: str, images: bool = False) -> list[dict]:
    if not isinstance(value, list) or not value:
        raise BadRecord("no_messages", f"{what} is not a non-empty list of messages")
    messages = []
    for message in value:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRecord("bad_message", f"{what} holds a message without a string 'role'")
        if message["role"] not in ROLES:
            raise BadRecord("unknown_role", f"role {message['role']!r}")
        content = _checked_content(message.get("content"), message["role"], images)
        if content is not message.get("content"):
            message = {**message, "content": content}
        # As transformers does: keys whose value is None are dropped (OpenAI's content=None).
        messages.append({k: v for k, v in message.items() if v is not None} if None in message.values() else message)
    return messages


def _sharegpt(value, images: bool) -> list[dict]:
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
    return checked_messages(messages, "field 'conversations'", images)


def _alpaca(record: dict) -> list[dict]:
    """Alpaca's instruction, input and output: the user asks the instruction, then a blank line and
    the input when there is one; the assistant answers the output; an optional system prompt first."""
    fields = {k: record.get(k) for k in ("instruction", "input", "output", "system")}
    if not all(isinstance(v, str) or (v is None and k in ("input", "system")) for k, v in fields.items()):
        raise BadRecord("non_string_content", "Alpaca's instruction, input and output must be strings")
    user = fields["instruction"] + (f"\n\n{fields['input']}" if fields["input"] else "")
    system = [{"role": "system", "content": fields["system"]}] if fields["system"] else []
    return [*system, {"role": "user", "content": user}, {"role": "assistant", "content": fields["output"]}]


def checked_tools(value) -> list[dict] | None:
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


def conversation_of(record, messages_key: str, images: bool = False) -> Conversation:
    """The conversation a record holds, in any layout we know (see the module); with ``images``, image
    parts are kept (their references, and a top-level ``images`` list, are ``chat_images.py``'s)."""
    if not isinstance(record, dict):
        raise BadRecord("not_an_object", "the record is not a JSON object")
    layout = LAYOUT_FIELDS | {"images"} if images else LAYOUT_FIELDS
    extra = {k: v for k, v in record.items() if k not in layout and k != messages_key}
    if "tools" in extra:
        extra["tools"] = checked_tools(extra["tools"])
    first = 0
    if messages_key in record:
        messages = checked_messages(record[messages_key], f"field '{messages_key}'", images)
    elif "conversations" in record:
        messages = _sharegpt(record["conversations"], images)
    elif "instruction" in record and "output" in record:
        messages = _alpaca(record)
    elif "prompt" in record and "completion" in record:
        prompt, completion = record["prompt"], record["completion"]
        if isinstance(prompt, str) and isinstance(completion, str):
            if not completion:
                raise BadRecord("empty_completion", "the completion is empty")
            return Conversation(prompt=prompt, completion=completion)
        messages = checked_messages(prompt, "field 'prompt'", images) + checked_messages(
            completion, "field 'completion'", images
        )
        first = len(prompt)
    elif "chosen" in record and "rejected" in record:
        raise BadRecord(
            "preference_pair",
            "a preference pair (prompt/chosen/rejected, for DPO or a reward model), not one conversation to learn "
            "from; prepare it for its trainer, or keep its chosen side as the record's messages",
        )
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


def template_for(
    tokenizer, chat_template: str | None, date: str, objective: str = "chat"
) -> tuple[ChatTemplate, dict[str, str]]:
    """The run's template (``--chat-template``, else the tokenizer's own) and the variables it sees
    (``bos_token``, ``eos_token``: a .model or rank file names its own, having no tokenizer_config.json)."""
    source, variables, where = find_template(tokenizer.path, chat_template, tokenizer.kind, objective)
    for role in ("bos", "eos"):
        token_id = tokenizer.model_role_id(role)
        if f"{role}_token" not in variables and token_id is not None:
            variables[f"{role}_token"] = tokenizer.piece(token_id)
    return ChatTemplate(source, variables, date, where), variables


def render(
    template: ChatTemplate, messages: list[dict], extra: dict | None = None, add_generation_prompt: bool = False
) -> tuple[str, list[tuple[int, int]]]:
    try:
        return template.render(messages, extra, add_generation_prompt)
    except TemplateFailure as failure:
        raise BadRecord("template_error", str(failure)) from None
