"""RL prompt sets in verl's layout (``--objective prompts``): a row a prompt, the columns verl's
``RLHFDataset`` reads from Parquet or a ``datasets`` folder, so a run reads them as they are:

- ``data_source`` (which reward function scores it): the record's, else ``--data-source``;
- ``prompt``: the messages (``role``, ``content``) a rollout starts from: a record's ``prompt`` as a
  list of messages (TRL's prompt-only layout), or as a string (one user message);
- ``ability``: the record's, else empty;
- ``reward_model``: the record's, as it is, with ``ground_truth`` (else its ``--answer-key`` field)
  and ``style`` (else ``rule``);
- ``extra_info``: the record's, as it is, with the record's ``index`` in its input file and the
  prompt's ``prompt_tokens`` (where the record's own has them, its own are kept, counted).

Every value keeps its JSON type (a ``ground_truth`` that is a list or an object stays one, ``true``
a boolean): a first pass reads every record's values and gives each column their common type
(``value_types.py``).

A prompt whose rendering with the generation prompt (and the record's ``tools``), tokenized, is over
``--max-prompt-length`` tokens is a counted skip (``prompt_too_long``): verl's own measure
(``filter_overlong_prompts``), so a run can turn that filter off. Records that are no prompt are
counted skips with their reasons.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..options import Options, option
from ..rows import DOCUMENT, ColumnSpec, RowBatch
from .base import DocumentBatch, Objective, PartitionExamples, register
from .common import chat_template_option, template_date_option
from .conversations import BadRecord, checked_messages, checked_tools, decode_record, render, template_for
from .supply import Provides, Reads
from .value_types import Clash, TooDeep, fitted, type_of

TEXT = "string"
MESSAGES = ("list", ("struct", (("role", TEXT), ("content", TEXT))))
# Before the records are read (the first pass gives every column its records' type).
LAYOUT_TYPES = {
    "ability": TEXT,
    "reward_model": ("struct", (("ground_truth", "null"), ("style", TEXT))),
    "extra_info": ("struct", (("index", "int64"), ("prompt_tokens", "int64"))),
}


@dataclass(frozen=True)
class PromptsOptions(Options):
    chat_template: str | None = chat_template_option()
    template_date: str = template_date_option()
    max_prompt_length: int = option(
        1024, "[prompts] The most tokens a prompt may have, as verl measures it; longer ones are skipped.", minimum=1
    )
    data_source: str = option("", "[prompts] verl's data_source for records that name none (it picks the reward).")
    answer_key: str = option("ground_truth", "[prompts] Field of a record's answer: reward_model.ground_truth.")


@dataclass
class Prompt:
    """One record's prompt row, before its length is known."""

    messages: list[dict]
    tools: list | None
    data_source: str
    ability: object
    reward_model: dict
    extra_info: dict  # the record's own, without what the layout adds (its index, the prompt's tokens)


def _object_field(record: dict, name: str) -> dict:
    """A record's field that verl reads as an object (``reward_model``, ``extra_info``), as it is."""
    value = record.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRecord("bad_value", f"field {name!r} is {type(value).__name__}, not an object")
    return value


def prompt_of(record, options: PromptsOptions) -> Prompt:
    """The prompt a record holds (see the module); ``BadRecord`` when it holds none. The record's own
    values are kept as they are (a ``ground_truth`` of any JSON type, its ``extra_info``'s fields)."""
    if not isinstance(record, dict):
        raise BadRecord("not_an_object", "the record is not a JSON object")
    prompt = record.get("prompt")
    if isinstance(prompt, str) and prompt:
        messages = [{"role": "user", "content": prompt}]
    elif isinstance(prompt, list):
        messages = checked_messages(prompt, "field 'prompt'")
    else:
        raise BadRecord("no_prompt", "the record has no 'prompt' (a string, or a list of messages)")
    for message in messages:
        if set(message) - {"role", "content"} or not isinstance(message.get("content"), str):
            raise BadRecord("bad_message", "verl's prompt messages are a role and a string content each")
    source = record.get("data_source")
    source = options.data_source if source is None else source
    if not isinstance(source, str) or not source:
        raise BadRecord("no_data_source", "the record names no data_source; pass --data-source")
    reward = dict(_object_field(record, "reward_model"))
    reward.setdefault("ground_truth", record.get(options.answer_key))
    if reward.get("style") is None:
        reward["style"] = "rule"
    ability = record.get("ability")
    extra = _object_field(record, "extra_info")
    try:
        for value in (ability, reward, extra):
            type_of(value)
    except TooDeep as error:
        raise BadRecord("too_deep", str(error)) from None
    except Clash as clash:  # a list mixing types: no column holds it
        raise BadRecord("bad_value", str(clash)) from None
    tools = checked_tools(record.get("tools"))
    return Prompt(messages, tools, source, "" if ability is None else ability, reward, extra)


def _values(prompt: Prompt, index: int, tokens: int) -> dict:
    """A prompt's value columns: the layout adds ``index`` and ``prompt_tokens`` to ``extra_info``
    where the record's own has none (a clash keeps the record's, counted)."""
    return {
        "data_source": prompt.data_source,
        "prompt": prompt.messages,
        "ability": prompt.ability,
        "reward_model": prompt.reward_model,
        "extra_info": {"index": index, "prompt_tokens": tokens, **prompt.extra_info},
    }


@register("prompts")
class Prompts(Objective):
    options_type = PromptsOptions
    uses_seq_len = False  # --max-prompt-length bounds a prompt
    records_hint = (
        "check the chat template (--chat-template) and the records' layout (a prompt: a string or a list of "
        "messages, and a data_source, or --data-source)"
    )
    supervision = "example-labels"  # no token carries loss: a rollout makes the completions
    boundaries = "prompts as the chat template writes them, with the generation prompt"
    provenance = "documents"  # a row is one record: its span, the record

    def __init__(self, context, tokenizer):
        super().__init__(context, tokenizer)
        self.tokenizer = tokenizer
        self.template, _ = template_for(tokenizer, self.options.chat_template, self.options.template_date, self.name)
        self.template_file = Path(self.template.where)

    @classmethod
    def reads(cls, options) -> Reads:
        return Reads(Provides.PROMPTS)

    inferred_values = tuple(LAYOUT_TYPES)
    warnings = {
        "extra_info_kept": (
            "{count:,} records' extra_info holds its own index or prompt_tokens: kept, objcli's not written"
        ),
    }

    def record_values(self, record: str) -> dict | None:
        """A record's value columns (its prompt's length left at 0: its type is known), or None for a
        record that is no prompt (the run counts it)."""
        try:
            values = _values(prompt_of(decode_record(record), self.options), 0, 0)
        except BadRecord:
            return None
        return {name: values[name] for name in self.inferred_values}

    def _value_type(self, name: str):
        return dict(self.context.value_types).get(name, LAYOUT_TYPES[name])

    def identity_files(self) -> dict[str, Path]:
        return {"chat template": self.template_file} if self.template_file.is_file() else {}

    def example_columns(self) -> list[ColumnSpec]:
        def value(name: str, value_type, doc: str) -> ColumnSpec:
            return ColumnSpec(name, "value", 0, 0, doc, role="data", value_type=value_type)

        return [
            value("data_source", TEXT, "which reward function scores the rollouts"),
            value("prompt", MESSAGES, "the messages a rollout starts from"),
            value("ability", self._value_type("ability"), "the record's ability, or empty"),
            value("reward_model", self._value_type("reward_model"), "the answer and the reward's style"),
            value(
                "extra_info", self._value_type("extra_info"), "the record's, its index in its file, the prompt's tokens"
            ),
        ]

    def partition_examples(self, partition_index: int) -> PartitionExamples:
        return _PromptsPartition(self, partition_index)


class _PromptsPartition(PartitionExamples):
    def _prompts(self, batch: DocumentBatch) -> tuple[list[int], list[Prompt], list[str]]:
        kept, prompts, texts = [], [], []
        for k, record in enumerate(batch.texts):
            try:
                prompt = prompt_of(decode_record(record), self.o.options)
                text = render(self.o.template, prompt.messages, {"tools": prompt.tools}, add_generation_prompt=True)[0]
            except BadRecord as bad:
                self.counters[f"skipped:{bad.reason}"] += 1
                self.note_skip(bad.reason, batch, k)
                continue
            kept.append(k)
            prompts.append(prompt)
            texts.append(text)
        return kept, prompts, texts

    def examples(self, batch: DocumentBatch) -> RowBatch | None:
        kept, prompts, texts = self._prompts(batch)
        if not texts:
            return None
        lengths = np.diff(self.o.tokenizer.encode_chat(texts, batch.encode)[1])
        over = lengths > self.o.options.max_prompt_length
        self.counters["skipped:prompt_too_long"] += int(over.sum())
        if over.any():
            self.note_skip("prompt_too_long", batch, kept[int(np.flatnonzero(over)[0])])
        chosen = np.flatnonzero(~over)
        if not len(chosen):
            return None

        records = [getattr(batch.texts[kept[i]], "record", batch.first_document + kept[i]) for i in chosen]
        values = [_values(prompts[i], int(r), int(lengths[i])) for r, i in zip(records, chosen)]
        self.counters["extra_info_kept"] += sum(
            bool({"index", "prompt_tokens"} & set(prompts[i].extra_info)) for i in chosen
        )
        types = {c.name: c.value_type for c in self.o.example_columns()}
        columns = {DOCUMENT: np.array([kept[i] for i in chosen], np.int64)}
        for name, value_type in types.items():
            column = columns[name] = np.empty(len(values), dtype=object)
            for j, value in enumerate(values):  # one by one: numpy would make lists of lists a 2-D array
                column[j] = fitted(value[name], value_type)
        count = len(chosen)
        return RowBatch(columns, lengths[chosen].astype(np.int64), np.zeros(count, np.int64), np.ones(count, np.int64))
