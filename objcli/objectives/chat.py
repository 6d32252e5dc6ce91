"""Conversations and instructions with loss on the assistant's tokens only (``--objective chat``).

Each record (``conversations.py``) is rendered with the tokenizer's own chat template, exactly as
``transformers``' ``apply_chat_template(..., tokenize=True)`` renders and tokenizes it
(``tokenizers/chat_template.py``, ``tokenizers/chat_encode.py``); a prompt/completion pair of
strings is ``BOS? prompt completion EOS``. ``labels`` are the token where it carries loss, -100
elsewhere (the trainer shifts):

- ``--loss-on assistant`` (default): every assistant turn; ``last-assistant``: the last one;
  ``all``: every token.
- A template with ``{% generation %}`` markers decides what an assistant turn is, token for token
  as ``return_assistant_tokens_mask=True`` (every block it marks); otherwise an assistant turn is
  all the template writes for the message after the generation prompt, through its end of turn
  (``chat_spans.TurnSpans``), or with ``--assistant-span content`` its content plus the
  end-of-turn token right after it. ``--turns each``: one example per assistant turn.

Conversations are whole examples: ``--packing best-fit`` (default) packs them into rows with
``segment_ids`` and ``positions`` so none attends across another, ``none`` gives one per row. A
conversation longer than ``--seq-len`` is cut after the last assistant turn that fits
(``--overlong truncate``) or dropped (``drop``); either way it is counted, and one whose
assistant turns are all cut is a counted skip, as is a record whose turns cannot be found.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from ..images.processors import load_rules
from ..kernels import IGNORE
from ..kernels.chat import last_per_owner, mark_ranges, overlapping_tokens, span_tokens
from ..kernels.example_runs import ExampleRuns
from ..rows import ColumnSpec, RowBatch
from ..tokenizers.chat_encode import special_pattern
from .base import DocumentBatch, Objective, PartitionExamples, register
from .chat_images import (
    IMAGE_COLUMNS,
    Expansion,
    ImageSetup,
    image_tokens,
    listed_images,
    with_bos,
)
from .chat_options import ChatOptions
from .chat_parts import PARTS, CharParts, PartSpans, check_parts
from .chat_spans import ContentSpans, TurnSpans, absent_markers, absent_warning, turn_end
from .chat_tokens import ConversationTokens
from .conversations import BadRecord, conversation_of, decode_record, render, template_for
from .supply import Provides, Reads


@register("chat", "sft")
class Chat(Objective):
    options_type = ChatOptions
    records_hint = "check the chat template (--chat-template) and the records' layout (--messages-key)"
    labels_are_inputs = True
    boundaries = "conversations as the chat template writes them"
    provenance = "documents"  # an example is one record (several with --turns each): its span, the record
    examples_are_documents = True  # whole conversations, packed with segment ids
    default_eos = True  # a prompt/completion pair ends with EOS (--no-eos: not); templates write their own
    pads_sequences = True  # --pad-to-multiple: its padding's labels are -100, as every unlearned token's
    plans_rows = True  # a chat store's conversations cut and packed, labels their own tokens where learned

    @property
    def plans_lengths(self) -> bool:
        """Conversations and labels as runs (``_ChatPartition.example_runs``), but where images are expanded
        or some parts of a turn carry no loss: those plan through the packer."""
        return self.images is None and self.options.learned_parts == set(PARTS)

    @classmethod
    def reads(cls, options) -> Reads:
        return Reads(Provides.CONVERSATIONS)

    def __init__(self, context, tokenizer):
        super().__init__(context, tokenizer)
        o = self.options
        self.tokenizer = tokenizer
        rules = load_rules(o.processor) if o.processor else None  # its template over the tokenizer's
        template_file = o.chat_template or (str(rules.template) if rules and rules.template else None)
        self.template, variables = template_for(tokenizer, template_file, o.template_date)
        self.template_file = Path(self.template.where)  # a .jinja file, a JSON config holding it, or the tokenizer's
        self.markers = special_pattern([*tokenizer.special_texts(), *variables.values()])
        self.absent = absent_markers(self.template.source, tokenizer)
        bos = tokenizer.model_role_id("bos") if context.bos else None
        self.plain_bos = tokenizer.piece(bos) if bos is not None else ""
        eos = tokenizer.model_role_id("eos")
        self.eos_id = eos  # the model's end of sequence (templates write their own): what NVIDIA's readers pad with
        self.plain_eos = (
            (tokenizer.piece(eos) if eos is not None else variables.get("eos_token", "")) if context.eos else ""
        )
        self.pad_id = tokenizer.resolve("pad") if context.pads_rows else None
        self.vocab_size = tokenizer.total_vocab_size
        check_parts(o, self.template.has_generation)
        self.images = ImageSetup.of(o, rules, tokenizer, variables) if rules else None

    def store_refusal(self, columns: set[str]) -> str | None:
        if self.options.learned_parts == set(PARTS) or "c_answer" in columns:
            return None
        return (
            f"--assistant-parts {self.options.assistant_parts}: the chat store was tokenized before stores kept each "
            "turn's parts; tokenize the records again (objcli tokenize --chat), or leave --assistant-parts out"
        )

    def identity_files(self) -> dict[str, Path]:
        found = {"chat template": self.template_file} if self.template_file.is_file() else {}
        return {**found, **(self.images.identity_files() if self.images else {})}

    def setup_warnings(self) -> list[str]:
        return absent_warning(self.absent, self.template_file, self.tokenizer.path)

    @classmethod
    def packers(cls, options) -> tuple[str, ...]:
        return ("best-fit", "none")  # concat would join conversations in one causal context

    def example_columns(self) -> list[ColumnSpec]:
        top = self.vocab_size - 1
        return [
            ColumnSpec("input_ids", "ragged", 0, top, "rendered conversations"),
            ColumnSpec(
                "labels", "ragged", IGNORE, top, "the token on supervised (assistant) tokens, else -100", role="labels"
            ),
            *(IMAGE_COLUMNS if self.images else []),
        ]

    def partition_examples(self, partition_index: int):
        return _ChatPartition(self, partition_index)


class _ChatPartition(PartitionExamples):
    joins_batches = True  # a conversation's runs are its own (its counts and skips too, summed)

    def __init__(self, objective: Chat, partition: int):
        super().__init__(objective, partition)
        markers, by_content = objective.template.has_generation, objective.options.assistant_span == "content"
        self.content_spans = ContentSpans(objective.template) if by_content and not markers else None
        self.turn_spans = TurnSpans(objective.template, objective.markers) if not by_content and not markers else None
        self.learned = objective.options.learned_parts
        self.part_spans = PartSpans(objective.template, objective.markers) if self.turn_spans else None
        self.find_parts = self.learned != set(PARTS)  # a store finds them too: parts are chosen when it derives
        setup = objective.images
        self.expansion = Expansion(setup.rules, setup.media_dir) if setup else None

    def _turns(self, conversation, text: str, spans: list, parts: bool) -> list:
        """Each supervised span's ``Turn`` (``chat_parts.py``), where parts are found; else None each."""
        if not parts or self.part_spans is None:
            return [None] * len(spans)
        return [self.part_spans.turn(conversation, text, i, turn) for i, turn in zip(conversation.supervised, spans)]

    def _supervised_spans(self, conversation, text: str, generation: list) -> list[tuple[int, int]]:
        if self.turn_spans is not None:
            return self.turn_spans.spans(conversation, text)
        if self.content_spans is None:
            # Every block the template marks, as transformers' assistant mask has them (Phi-3.5's final
            # EOS too); a conversational prompt/completion supervises only the completion's.
            return generation[conversation.first_supervised_block :]
        found = self.content_spans.spans(conversation.messages, text, conversation.extra)
        spans = []
        for index in conversation.supervised:
            if index in found:
                start, end = found[index]
                spans.append((start, turn_end(text, end, self.o.markers)))
            elif conversation.messages[index].get("content"):
                raise BadRecord("content_not_found", f"the template does not write the content of message {index}")
        return spans

    def _conversations(self, record: str) -> list:
        """The record's conversation, or with ``--turns each`` one per assistant turn (up to it)."""
        decoded = decode_record(record)
        conversation = conversation_of(decoded, self.o.options.messages_key, images=self.expansion is not None)
        if self.expansion is not None and "images" in decoded:
            conversation.messages = listed_images(conversation.messages, decoded["images"])
        if self.o.options.turns == "together" or conversation.prompt is not None:
            return [conversation]
        return [
            dataclasses.replace(
                conversation,
                messages=conversation.messages[: i + 1],
                supervised=[i],
                first_supervised_block=sum(m["role"] == "assistant" for m in conversation.messages[:i]),
            )
            for i in conversation.supervised
        ]

    def _rendered(self, record: str, parts: bool) -> list[tuple[str, list, list, list]]:
        """(text, supervised spans, each one's ``Turn`` or None, its images) of each example a record gives;
        ``BadRecord`` when it cannot."""
        examples = []
        for conversation in self._conversations(record):
            if conversation.prompt is not None:
                text = self.o.plain_bos + conversation.prompt + conversation.completion + self.o.plain_eos
                examples.append((text, [(len(self.o.plain_bos) + len(conversation.prompt), len(text))], [None], []))
                continue
            text, generation = render(self.o.template, conversation.messages, conversation.extra)
            spans = self._supervised_spans(conversation, text, generation)
            turns = self._turns(conversation, text, spans, parts)
            images = []
            if self.expansion is not None:
                text, spans, images = self.expansion.apply(text, spans, conversation.messages)
            examples.append((text, spans, turns, images))
        return examples

    def _render(self, batch: DocumentBatch, parts: bool):
        """Rendered texts, the record each came from and their supervised spans, as positions in the
        texts joined end to end (``chat_encode``'s coordinate); with ``parts``, each span's turn's parts
        (``CharParts``); the records that cannot be rendered."""
        texts, records, spans, found = [], [], [], CharParts()  # spans: (owner, start, end) in the joined text
        self.images_found, self.text_starts = [], []  # (owner, start, end, reference, count); each text's start
        failed = {}  # record -> why it renders nothing
        joined = 0  # characters of the texts before this one
        for k, record in enumerate(batch.texts):
            try:
                examples = self._rendered(record, parts)
            except BadRecord as bad:
                failed[k] = bad.reason
                self.note_skip(bad.reason, batch, k, str(bad) if "image" in bad.reason else "")
                continue
            for text, supervised, turns, images in examples:
                for (start, end), turn in zip(supervised, turns):
                    found.add(len(spans), len(texts), joined, turn, end)
                    spans.append((len(texts), joined + start, joined + end))
                self.images_found += [(len(texts), joined + a, joined + b, ref, n) for a, b, ref, n in images]
                self.text_starts.append(joined)
                texts.append(text)
                records.append(k)
                joined += len(text)
        return texts, np.array(records, np.int64), np.array(spans, np.int64).reshape(-1, 3).T, found, failed

    def encoded(self, batch: DocumentBatch, parts: bool = False) -> ConversationTokens:
        """The batch's conversations as tokens, each supervised span as a range of them: rendered and
        encoded, or as a chat store kept them (``objcli tokenize --chat``); with ``parts`` (or where the run
        chooses parts), each span's parts too."""
        if batch.records is not None:  # a chat store's; its images where the run expands them (--processor)
            stored = ConversationTokens(batch.tokens, *batch.records)
            return stored if self.expansion is not None else dataclasses.replace(stored, images=None)
        parts = parts or self.find_parts
        texts, record, (owner, span_start, span_end), found, failed = self._render(batch, parts)
        if not texts:
            return ConversationTokens.empty(failed)
        encoded = self.o.tokenizer.encode_chat(texts, batch.encode)
        tokens, offsets, char_starts, char_ends = with_bos(encoded, texts, self.o.images, self.text_starts)
        to_tokens = overlapping_tokens if self.content_spans else span_tokens
        first, last, kept = to_tokens(char_starts, char_ends, offsets, owner, span_start, span_end)
        encoded = ConversationTokens(tokens, offsets, record, owner[kept], first[kept], last[kept], failed)
        if self.expansion is not None:
            setup = self.o.images
            chars = (tokens, offsets, char_starts, char_ends)
            encoded.images = image_tokens(chars, self.images_found, setup.image_id, setup.rules.image_token)
        if parts:
            encoded.parts = found.tokens((char_starts, char_ends, offsets), last).spans_kept(kept)
        return encoded

    def _chosen(self, encoded: ConversationTokens) -> ConversationTokens:
        """--assistant-parts: only the spans whose turn writes a learned part, and the tokens inside them
        that carry no loss."""
        if encoded.parts is None:  # refused before the run (Chat.store_refusal): a store's shard edited since
            raise ObjcliError(self.o.store_refusal(set()) or "a chat store's shard has no parts")
        keep, unlearned = encoded.parts.chosen(encoded.first, len(encoded.tokens), self.learned)
        return dataclasses.replace(
            encoded, owner=encoded.owner[keep], first=encoded.first[keep], last=encoded.last[keep], unlearned=unlearned
        )

    def examples(self, batch: DocumentBatch) -> RowBatch | None:
        written = self._written(batch)
        if written is None:
            return None
        encoded, kept, chosen, keep_to = written
        return encoded.rows(self._labels(encoded, kept), chosen, keep_to)

    def example_runs(self, batch: DocumentBatch) -> ExampleRuns | None:
        """The conversations written (as ``examples`` chooses and cuts them), their labels as runs: the
        learned spans' tokens, -100 between (``Chat.plans_lengths``: no images, every part learned)."""
        written = self._written(batch)
        if written is None:
            return None
        encoded, kept, chosen, keep_to = written
        learned = None if self.o.options.loss_on == "all" else self._learned(encoded, kept)
        record = encoded.record[chosen]  # a record's positions count up over its conversations
        firsts = batch.texts.firsts[record] + encoded.offsets[:-1][chosen] - batch.offsets[record]
        return encoded.runs(learned, chosen, keep_to, firsts)

    def _written(self, batch: DocumentBatch) -> tuple | None:
        """(the batch's conversations as tokens, the supervised spans kept, the conversations written, the
        length each is cut to), counted; None where none is written."""
        encoded = self.encoded(batch)
        if self.find_parts and len(encoded.offsets) > 1:
            encoded = self._chosen(encoded)
        for k, reason in encoded.failed.items():
            self.counters[f"skipped:{reason}"] += 1
            self.note_skip(reason, batch, k)
        if len(encoded.offsets) == 1:
            return None
        lengths = np.diff(encoded.offsets)
        keep_to, kept = encoded.fit(self.o.context.seq_len, self.o.options.overlong == "truncate")
        has_turn = np.bincount(encoded.owner[kept], minlength=len(lengths)) > 0
        self._count(lengths, keep_to, has_turn, encoded.record, batch)
        chosen = np.flatnonzero((keep_to > 0) & has_turn)
        if not len(chosen):
            return None
        return encoded, kept, chosen, keep_to[chosen]

    def _learned(self, encoded: ConversationTokens, kept: np.ndarray) -> np.ndarray:
        """The supervised spans that carry loss: those kept, or with --loss-on last-assistant the last."""
        return last_per_owner(encoded.owner, kept) if self.o.options.loss_on == "last-assistant" else kept

    def _labels(self, encoded: ConversationTokens, kept: np.ndarray) -> np.ndarray:
        kept = self._learned(encoded, kept)
        if self.o.options.loss_on == "all":
            supervised = np.ones(len(encoded.tokens), dtype=bool)
        else:
            supervised = mark_ranges(len(encoded.tokens), encoded.first[kept], encoded.last[kept])
            if encoded.unlearned is not None:
                supervised &= ~encoded.unlearned
        if encoded.images is not None:  # image tokens are the vision encoder's, never predicted
            supervised &= ~mark_ranges(len(encoded.tokens), encoded.images.start, encoded.images.end - 1)
        return np.where(supervised, encoded.tokens, IGNORE).astype(np.int32)

    def _count(self, lengths, keep_to, has_turn, record, batch) -> None:
        """Overlong conversations: truncated, or skipped (dropped, or no assistant turn left). A record
        none of whose examples is written is one skip, under the reason of its first example."""
        overlong = lengths > self.o.context.seq_len
        written = (keep_to > 0) & has_turn
        self.counters["conversations_truncated"] += int((overlong & written).sum())
        records, first = np.unique(record, return_index=True)
        lost = np.bincount(record[written], minlength=records.max() + 1 if len(records) else 0)[records] == 0
        first = first[lost]
        too_long = "overlong" if self.o.options.overlong == "drop" else "assistant_tokens_cut"
        for reason, which in ((too_long, overlong[first]), ("no_assistant_tokens", ~overlong[first])):
            self.counters[f"skipped:{reason}"] += int(which.sum())
            if which.any():
                self.note_skip(reason, batch, int(records[lost][which][0]))
