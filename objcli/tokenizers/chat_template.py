"""Chat templates, rendered exactly as ``transformers``' ``apply_chat_template`` renders them.

A template is Jinja2 source: the ``chat_template`` of the ``tokenizer_config.json`` beside a
``tokenizer.json`` (a string, or a list of named templates of which ``default`` is used), or a
file given with ``--chat-template`` (a ``.jinja`` file, or a JSON file holding ``chat_template``).
It runs in Jinja's immutable sandbox, set up as ``transformers`` sets it up (``trim_blocks``,
``lstrip_blocks``, loop controls, its ``tojson``, ``raise_exception``, ``dict`` and ``namespace``),
with the tokenizer's named special tokens (``bos_token``, ``eos_token``, …) as variables and
``add_generation_prompt`` off. ``{% generation %}…{% endgeneration %}`` blocks record the
character spans of what the assistant generates, as ``transformers``' ``AssistantTracker`` does.

One difference, for determinism: ``strftime_now`` formats a fixed date (``--template-date``),
never the clock, so the same command gives the same bytes on any day.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from functools import lru_cache
from pathlib import Path

from ..errors import ObjcliError

NAMED_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
GENERATION_TAG = re.compile(r"\{%-?\s*generation\s*-?%\}")


class TemplateFailure(Exception):
    """The template raised (``raise_exception``, an undefined operation): the record is skipped."""


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ObjcliError(f"{path}: not readable JSON ({error}); fix the file or pass --chat-template FILE") from None
    if not isinstance(value, dict):
        raise ObjcliError(f"{path}: not a JSON object; pass a tokenizer_config.json or a .jinja template")
    return value


def _template_of(config: dict, where: Path) -> str | None:
    template = config.get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
        if template is None:
            raise ObjcliError(
                f"{where}: chat_template lists no template named 'default' "
                f"(it has {', '.join(map(str, named))}); pass one with --chat-template FILE"
            )
    if template is not None and not isinstance(template, str):
        raise ObjcliError(f"{where}: chat_template is not a string; pass a template with --chat-template FILE")
    return template


def named_tokens(config: dict) -> dict[str, str]:
    """``bos_token`` and friends from a tokenizer_config.json: strings or ``{"content": …}``."""
    tokens = {}
    for name in NAMED_TOKENS:
        value = config.get(name)
        value = value.get("content") if isinstance(value, dict) else value
        if isinstance(value, str):
            tokens[name] = value
    return tokens


def find_template(
    tokenizer_path: Path, template_file: str | None, kind: str, objective: str = "chat"
) -> tuple[str, dict[str, str], str]:
    """(template source, named special tokens, where the template came from); ``objective`` names the
    run's objective in the refusal."""
    config_path = tokenizer_path.with_name("tokenizer_config.json")
    config = _read_json(config_path) if kind == "huggingface" and config_path.is_file() else {}
    tokens = named_tokens(config)
    if template_file:
        path = Path(template_file)
        if not path.is_file():
            raise ObjcliError(
                f"--chat-template {template_file}: no such file; pass a .jinja template or a "
                "tokenizer_config.json that holds chat_template"
            )
        if path.suffix == ".json":
            source_config = _read_json(path)
            template = _template_of(source_config, path)
            if template is None:
                raise ObjcliError(f"--chat-template {template_file}: the file has no chat_template")
            return template, {**tokens, **named_tokens(source_config)}, str(path)
        try:
            return path.read_text(encoding="utf-8"), tokens, str(path)
        except (OSError, UnicodeDecodeError) as error:
            raise ObjcliError(f"--chat-template {template_file}: not readable UTF-8 text ({error})") from None
    # Newer checkpoints keep the template beside the config; where both hold one, transformers
    # renders with the file (its from_pretrained puts the file's over the config's), and so does objcli.
    separate = tokenizer_path.with_name("chat_template.jinja")
    if kind == "huggingface" and separate.is_file():
        try:
            return separate.read_text(encoding="utf-8"), tokens, str(separate)
        except (OSError, UnicodeDecodeError) as error:
            raise ObjcliError(f"{separate}: not readable UTF-8 text ({error}); fix or remove the file") from None
    template = _template_of(config, config_path) if config else None
    if template is None:
        what = {
            "sentencepiece": "a SentencePiece model ships no chat template",
            "tiktoken": "a tiktoken rank file ships no chat template",
        }.get(
            kind,
            f"{config_path} has no chat_template"
            if config
            else f"there is no {config_path.name} beside {tokenizer_path.name}",
        )
        raise ObjcliError(f"--objective {objective}: {what}; pass the model's template with --chat-template FILE")
    return template, tokens, str(config_path)


class ChatTemplate:
    """One compiled template. ``render(messages)`` gives the text and the generation spans."""

    def __init__(self, source: str, variables: dict[str, str], date: str, where: str):
        self.source = source
        self.where = where
        self.variables = dict(variables)
        self.has_generation = bool(GENERATION_TAG.search(source))
        self.template = _compile(source, date, where)

    def render(
        self, messages: list[dict], extra: dict | None = None, add_generation_prompt: bool = False
    ) -> tuple[str, list[tuple[int, int]]]:
        """The text and its generation blocks; ``extra``: the record's other top-level fields (``tools``,
        ``documents``, …), passed to the template as ``apply_chat_template`` passes its keyword arguments."""
        import jinja2

        from .jinja_sandbox import MAX_RENDERED_CHARS

        blocks: list[str] = []
        spans: list[tuple[int, int]] = []
        limit = MAX_RENDERED_CHARS + 4 * sum(len(str(m.get("content") or "")) for m in messages)
        written = 0
        try:
            with self.template.environment.activate_tracker(blocks, spans):
                arguments = {"tools": None, "documents": None, **self.variables, **(extra or {})}
                for block in self.template.generate(
                    messages=messages, add_generation_prompt=add_generation_prompt, **arguments
                ):
                    blocks.append(block)
                    written += len(block)
                    if written > limit:  # checked as it writes: the rendering never holds much more
                        raise TemplateFailure(
                            f"the template wrote over {limit:,} characters for one conversation "
                            "(its messages hold a quarter of that); check the template"
                        )
        except (
            jinja2.TemplateError,
            TypeError,
            ValueError,
            KeyError,
            IndexError,
            AttributeError,
            ZeroDivisionError,
            OverflowError,
            RecursionError,
        ) as error:  # the sandbox's limits too
            raise TemplateFailure(f"{type(error).__name__}: {error}") from None
        return "".join(blocks), spans


@lru_cache(maxsize=8)
def _compile(source: str, date: str, where: str):
    try:
        import jinja2

        from .jinja_sandbox import chat_environment
    except ImportError:
        raise ObjcliError(
            "--objective chat renders templates with Jinja2; install it with: pip install jinja2"
        ) from None
    try:
        fixed_now = datetime.strptime(date, "%Y-%m-%d")
    except ValueError:
        raise ObjcliError(f"--template-date {date}: not a date YYYY-MM-DD") from None
    try:
        template = chat_environment(fixed_now).from_string(source)
    except jinja2.TemplateSyntaxError as error:
        raise ObjcliError(
            f"chat template from {where}: line {error.lineno}: {error.message}; fix the template"
        ) from None
    # The same names and values as a dict: every render copies them into its context, and copying
    # Jinja's ChainMap of template and environment globals key by key was a third of a render.
    template.globals = dict(template.globals)
    return template


# Special-token markers as templates write them: <|eot_id|>, <|im_start|>, <｜User｜> (DeepSeek's
# full-width bars), <start_of_turn>. Bracketed ones ([INST]) are text in the models that use them.
MARKER = re.compile(r"<\|[^<>|\s]{1,64}\|>|<｜[^<>\s]{1,64}｜>|<[a-z][a-z_]{1,31}>")


def template_markers(source: str) -> list[str]:
    """The special-token markers a template's source writes, each once, in order."""
    return list(dict.fromkeys(MARKER.findall(source)))
