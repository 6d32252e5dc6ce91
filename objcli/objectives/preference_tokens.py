"""A batch of preference records as TRL 1.16 tokenizes them (``DPOTrainer._prepare_dataset``): each
pair's prompt rendered alone with the generation prompt, and prompt + chosen and prompt + rejected
rendered whole, with the record's ``tools`` and ``chat_template_kwargs``; plain text is ``BOS? prompt``,
``BOS? prompt + chosen + EOS`` and ``BOS? prompt + rejected + EOS``. The three are encoded together,
and the completion starts where the prompt's ids and each whole rendering's part (the common prefix:
a template that writes the prompt otherwise alone leaves its trailing tokens to the completion)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels.chat import common_prefix_lengths
from .conversations import BadRecord, decode_record, render
from .preference_records import PreferencePair, preference_pair


@dataclass
class EncodedPairs:
    """Each pair's three renderings as ids: prompt (P), prompt + chosen (PC), prompt + rejected (PR)."""

    tokens: np.ndarray  # every rendering's ids, P PC PR for each pair in turn
    starts: np.ndarray  # (pairs, 3): where P, PC and PR start in ``tokens``
    lengths: np.ndarray  # (pairs, 3)
    prompt: np.ndarray  # the prompt's length, where both completions part from P
    record: np.ndarray  # each pair's record in the batch
    margins: np.ndarray  # float64: each pair's margin, NaN for none
    failed: dict  # record -> why it gives no pair

    def side(self, which: int, start: np.ndarray | int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(starts, lengths) of rendering ``which`` (0 P, 1 PC, 2 PR) from ``start`` on."""
        return self.starts[:, which] + start, self.lengths[:, which] - start


def _texts(pair: PreferencePair, template, bos: str) -> tuple[str, str, str]:
    if not pair.conversational:
        return bos + pair.prompt, bos + pair.prompt + pair.chosen, bos + pair.prompt + pair.rejected
    if template is None:
        raise BadRecord("template_error", "conversational pairs need a chat template; pass --chat-template")
    extra = pair.template_kwargs
    prompt = render(template, pair.prompt, extra, add_generation_prompt=True)[0]
    return (
        prompt,
        render(template, pair.prompt + pair.chosen, extra)[0],
        render(template, pair.prompt + pair.rejected, extra)[0],
    )


def encode_pairs(batch_records: list, objective, encode) -> EncodedPairs:
    """The batch's records as ``EncodedPairs`` (``objective``: the template, the tokenizer, the BOS and
    EOS texts); a record that is no pair, or that the template refuses, is in ``failed``."""
    texts, records, margins, failed = [], [], [], {}
    for k, record in enumerate(batch_records):
        try:
            pair = preference_pair(decode_record(record)).with_eos(objective.eos_text)
            texts += _texts(pair, objective.template, objective.plain_bos)
        except BadRecord as bad:
            failed[k] = bad.reason
            continue
        records.append(k)
        margins.append(np.nan if pair.margin is None else pair.margin)
    if not texts:
        none = np.zeros((0, 3), np.int64)
        empty = np.zeros(0, np.int64)
        return EncodedPairs(np.zeros(0, np.int32), none, none, empty, empty, empty.astype(np.float64), failed)
    tokens, offsets = objective.tokenizer.encode_chat(texts, encode)[:2]
    starts, lengths = offsets[:-1].reshape(-1, 3), np.diff(offsets).reshape(-1, 3)
    prompt = np.minimum(
        *(common_prefix_lengths(tokens, starts[:, 0], lengths[:, 0], starts[:, w], lengths[:, w]) for w in (1, 2))
    )
    record = np.array(records, np.int64)
    return EncodedPairs(tokens, starts, lengths, prompt, record, np.array(margins, np.float64), failed)
