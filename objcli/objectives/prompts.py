"""RL prompt sets in verl's layout (``--objective prompts``): a row a prompt, the columns verl's
``RLHFDataset`` reads from Parquet or a ``datasets`` folder, so a run reads them as they are:

- ``data_source`` (which reward function scores it): the record's, else ``--data-source``;
- ``prompt``: the messages (``role``, ``content``) a rollout starts from: a record's ``prompt`` as a
  list of messages (TRL's prompt-only layout), or as a string (one user message);
- ``ability``: the record's, else empty;
- ``reward_model``: ``ground_truth`` (the record's ``reward_model``, else its ``--answer-key`` field,
  numbers written as text) and ``style`` (the record's, else ``rule``);
- ``extra_info``: the record's ``index`` in its input file and the prompt's ``prompt_tokens``.

A prompt whose rendering with the generation prompt (and the record's ``tools``), tokenized, is over
``--max-prompt-length`` tokens is a counted skip (``prompt_too_long``): verl's own measure
(``filter_overlong_prompts``), so a run can turn that filter off. Records that are no prompt are
counted skips with their reasons.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

from ..options import Options, option
from ..rows import DOCUMENT, ColumnSpec, RowBatch
from .base import DocumentBatch, Objective, PartitionExamples, register
from .common import chat_template_option, template_date_option
from .conversations import BadRecord, checked_messages, checked_tools, render, template_for
from .supply import Provides, Reads

TEXT = "string"
MESSAGES = ("list", ("struct", (("role", TEXT), ("content", TEXT))))
REWARD_MODEL = ("struct", (("ground_truth", TEXT), ("style", TEXT)))
EXTRA_INFO = ("struct", (("index", "int64"), ("prompt_tokens", "int64")))


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
    ability: str
    reward_model: dict


def _text(value) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else str(value)


def prompt_of(record, options: PromptsOptions) -> Prompt:
    """The prompt a record holds (see the module); ``BadRecord`` when it holds none."""
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
    source = record.get("data_source", options.data_source)
    if not isinstance(source, str) or not source:
        raise BadRecord("no_data_source", "the record names no data_source; pass --data-source")
    given = record.get("reward_model")
    given = given if isinstance(given, dict) else {}
    truth = given.get("ground_truth", record.get(options.answer_key))
    reward = {"ground_truth": _text(truth), "style": _text(given.get("style")) or "rule"}
    ability = _text(record.get("ability")) or ""
    return Prompt(messages, checked_tools(record.get("tools")), source, ability, reward)


@register("prompts")
class Prompts(Objective):
    options_type = PromptsOptions
    tokenizes_itself = True
    reads_records = True
    supervision = "example-labels"  # no token carries loss: a rollout makes the completions
    boundaries = "prompts as the chat template writes them, with the generation prompt"
    provenance = "documents"  # a row is one record: its span, the record

    def __init__(self, context, tokenizer):
        super().__init__(context, tokenizer)
        self.tokenizer = tokenizer
        self.template, _ = template_for(tokenizer, self.options.chat_template, self.options.template_date)
        self.template_file = Path(self.template.where)

    @classmethod
    def reads(cls, options) -> Reads:
        return Reads(Provides.PROMPTS)

    def identity_files(self) -> dict[str, Path]:
        return {"chat template": self.template_file} if self.template_file.is_file() else {}

    def example_columns(self) -> list[ColumnSpec]:
        def value(name: str, value_type, doc: str) -> ColumnSpec:
            return ColumnSpec(name, "value", 0, 0, doc, role="data", value_type=value_type)

        return [
            value("data_source", TEXT, "which reward function scores the rollouts"),
            value("prompt", MESSAGES, "the messages a rollout starts from"),
            value("ability", TEXT, "the record's ability, or empty"),
            value("reward_model", REWARD_MODEL, "the answer and the reward's style"),
            value("extra_info", EXTRA_INFO, "the record's index in its file, the prompt's tokens"),
        ]

    def partition_examples(self, partition_index: int) -> PartitionExamples:
        return _PromptsPartition(self, partition_index)


class _PromptsPartition(PartitionExamples):
    def _prompts(self, batch: DocumentBatch) -> tuple[list[int], list[Prompt], list[str]]:
        kept, prompts, texts = [], [], []
        for k, record in enumerate(batch.texts):
            try:
                prompt = prompt_of(msgspec.json.decode(str(record)), self.o.options)
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

        def column(values) -> np.ndarray:
            array = np.empty(len(values), dtype=object)
            array[:] = values
            return array

        rows = [prompts[i] for i in chosen]
        records = [getattr(batch.texts[kept[i]], "record", batch.first_document + kept[i]) for i in chosen]
        columns = {
            DOCUMENT: np.array([kept[i] for i in chosen], np.int64),
            "data_source": column([p.data_source for p in rows]),
            "prompt": column([p.messages for p in rows]),
            "ability": column([p.ability for p in rows]),
            "reward_model": column([p.reward_model for p in rows]),
            "extra_info": column(
                [{"index": int(r), "prompt_tokens": int(lengths[i])} for r, i in zip(records, chosen)]
            ),
        }
        count = len(chosen)
        return RowBatch(columns, lengths[chosen].astype(np.int64), np.zeros(count, np.int64), np.ones(count, np.int64))
