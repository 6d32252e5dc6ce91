"""Preference records as people download them, read as TRL 1.16 reads them (``DPOTrainer``,
``RewardTrainer``): a prompt and two completions, ``chosen`` and ``rejected``.

- conversational: ``prompt``, ``chosen`` and ``rejected`` lists of messages, or ``chosen`` and
  ``rejected`` alone, whose longest common run of messages is the prompt (TRL's ``extract_prompt``,
  quirk included: two sides equal through the shorter one's length keep its last message as the
  completion);
- plain text: the same fields as strings (``extract_prompt`` on characters, a space before the split
  left with the completion); TRL appends the tokenizer's EOS text to a completion that does not end
  with it, and so does ``PreferencePair.plain``.

Only ``tools`` (a list, or a JSON string of one) and ``chat_template_kwargs`` reach the template, as
TRL passes them; ``margin`` is kept for a reward model. A record that is no pair is a counted skip
(``BadRecord``: its reason), never fatal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .conversations import BadRecord, checked_messages, checked_tools


@dataclass
class PreferencePair:
    """One record's prompt and completions: lists of messages (``conversational``) or strings."""

    prompt: list | str
    chosen: list | str
    rejected: list | str
    conversational: bool
    template_kwargs: dict = field(default_factory=dict)  # tools and chat_template_kwargs
    margin: float | None = None

    def with_eos(self, eos_text: str) -> PreferencePair:
        """Plain text as TRL tokenizes it: each completion ending with the EOS text."""
        if self.conversational or not eos_text:
            return self
        chosen, rejected = (c if c.endswith(eos_text) else c + eos_text for c in (self.chosen, self.rejected))
        if chosen == rejected:  # one side ended with the EOS text the other is given
            raise BadRecord("identical_pair", "chosen and rejected are the same once each ends with EOS")
        return PreferencePair(self.prompt, chosen, rejected, False, self.template_kwargs, self.margin)


def extract_prompt(chosen, rejected) -> tuple:
    """TRL's ``extract_prompt``: (prompt, chosen, rejected) split at the first place the sides differ."""
    idx = 0
    for idx in range(min(len(chosen), len(rejected))):
        if chosen[idx] != rejected[idx]:
            if chosen[idx - 1] == " ":  # remove space before the prompt
                idx -= 1
            break
    return chosen[:idx], chosen[idx:], rejected[idx:]


def _is_messages(value) -> bool:
    return isinstance(value, list) and bool(value) and isinstance(value[0], dict) and "role" in value[0]


def _sides(record: dict) -> tuple:
    """(prompt or None, chosen, rejected) as the record gives them."""
    missing = [side for side in ("chosen", "rejected") if side not in record or record[side] is None]
    if missing:
        have = ", ".join(sorted(map(str, record))) or "none"
        raise BadRecord("missing_side", f"the record has no {' or '.join(missing)} (its fields: {have})")
    return record.get("prompt"), record["chosen"], record["rejected"]


def _template_kwargs(record: dict) -> dict:
    kwargs = record.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise BadRecord("bad_message", f"field 'chat_template_kwargs' is {type(kwargs).__name__}, not an object")
    return {"tools": checked_tools(record.get("tools")), **kwargs}


def _margin(record: dict) -> float | None:
    """The record's margin as a number; None where it has none, or none that is a number (only reward
    --margin reads it: such a record is its counted skip, ``missing_margin``)."""
    margin = record.get("margin")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or margin != margin:
        return None
    return float(margin)


def preference_pair(record) -> PreferencePair:
    """The pair a record holds (see the module); ``BadRecord`` when it holds none."""
    if not isinstance(record, dict):
        raise BadRecord("not_an_object", "the record is not a JSON object")
    prompt, chosen, rejected = _sides(record)
    conversational = _is_messages(chosen) or _is_messages(rejected) or _is_messages(prompt)
    if conversational:
        if not all(isinstance(v, list) for v in (chosen, rejected, *([prompt] if prompt is not None else []))):
            raise BadRecord("mixed_layout", "prompt, chosen and rejected must all be strings or all lists of messages")
        sides = [
            checked_messages(side, f"field {name!r}") for name, side in (("chosen", chosen), ("rejected", rejected))
        ]
        if prompt is None:
            prompt, *sides = extract_prompt(*sides)
        else:
            prompt = checked_messages(prompt, "field 'prompt'")
    else:
        if not all(isinstance(v, str) for v in (chosen, rejected, *([prompt] if prompt is not None else []))):
            raise BadRecord("mixed_layout", "prompt, chosen and rejected must all be strings or all lists of messages")
        sides = [chosen, rejected]
        if prompt is None:
            prompt, *sides = extract_prompt(*sides)
    if not sides[0] or not sides[1]:
        raise BadRecord("empty_completion", f"the {'chosen' if not sides[0] else 'rejected'} completion is empty")
    if sides[0] == sides[1]:
        raise BadRecord("identical_pair", "chosen and rejected are the same: no preference to learn")
    return PreferencePair(prompt, *sides, conversational, _template_kwargs(record), _margin(record))
