"""The Jinja environment chat templates run in, set up as ``transformers`` sets it up (imported
only when a run renders conversations: Jinja costs start-up time every other run can skip)."""

from __future__ import annotations

import json
from contextlib import contextmanager
from datetime import datetime

import jinja2
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError


class GenerationTracker(Extension):
    """Records where each ``{% generation %}`` block lands in the output, as transformers'
    ``AssistantTracker`` does: the length of what was rendered before the block ends."""

    tags = {"generation"}

    def __init__(self, environment):
        super().__init__(environment)
        environment.extend(activate_tracker=self.activate_tracker)
        self._blocks = self._spans = None

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation"), [], [], body).set_lineno(lineno)

    def _generation(self, caller):
        text = caller()
        if self._blocks is not None:
            start = len("".join(self._blocks))
            self._spans.append((start, start + len(text)))
        return text

    @contextmanager
    def activate_tracker(self, blocks, spans):
        self._blocks, self._spans = blocks, spans
        try:
            yield
        finally:
            self._blocks = self._spans = None


class Namespace(jinja2.utils.Namespace):
    """``namespace()`` without underscore attributes (no way to CPython internals)."""

    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        if any(isinstance(name, str) and name.startswith("_") for name in attrs):
            raise jinja2.exceptions.SecurityError("namespace attributes cannot start with '_'")
        jinja2.utils.Namespace.__init__(self, attrs)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    """transformers' ``tojson``: Jinja's own escapes HTML characters."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


# The most one conversation's rendering may hold past four times its messages' text: a template that
# writes without bound (a loop, a repetition) is a counted skip, not the machine's memory.
MAX_RENDERED_CHARS = 8 << 20


class ChatSandbox(ImmutableSandboxedEnvironment):
    """transformers' sandbox, with its verdict on an attribute remembered: whether ``obj.attr`` may be
    read depends on the type of ``obj`` and the name only (a name starting with ``_``, a function's,
    method's, frame's or generator's internals by type, a known mutable type's mutating methods by
    ``isinstance``), so each (type, name) is asked once, not at every ``message.content`` or
    ``loop.first`` of every conversation (a third of rendering's time)."""

    # ``'x' * 10**8`` would build its string in one step, before any bound on the rendering applies.
    intercepted_binops = frozenset(["*"])

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._verdicts: dict[tuple[type, str], bool] = {}

    def call_binop(self, context, operator, left, right):
        if operator == "*" and isinstance(left, (str, list, tuple)) != isinstance(right, (str, list, tuple)):
            sequence, count = (left, right) if isinstance(left, (str, list, tuple)) else (right, left)
            if isinstance(count, int) and len(sequence) * count > MAX_RENDERED_CHARS:
                raise SecurityError(
                    f"a repetition of {len(sequence) * count:,} items is past the bound of "
                    f"{MAX_RENDERED_CHARS:,} on one rendering"
                )
        return super().call_binop(context, operator, left, right)

    def is_safe_attribute(self, obj, attr, value) -> bool:
        key = (type(obj), attr)
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._verdicts[key] = super().is_safe_attribute(obj, attr, value)
        return verdict


def chat_environment(fixed_now: datetime) -> ImmutableSandboxedEnvironment:
    environment = ChatSandbox(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTracker, jinja2.ext.loopcontrols]
    )
    environment.filters["tojson"] = tojson
    environment.globals.update(
        raise_exception=raise_exception, strftime_now=fixed_now.strftime, dict=dict, namespace=Namespace
    )
    return environment
