"""Images in conversations (``--processor DIR``): each image's placeholder expanded as the model's
processor expands it, and where its tokens land.

A record shows images as ``transformers``' templates take them, content parts ``{"type": "image",
"image"|"url"|"path": REF}``, or as LLaMA-Factory writes them, ``<image>`` tags in the messages' text
or image parts naming no image (TRL's vision datasets), with the references in a top-level ``images``
list (``listed_images``). The template renders its placeholder for each
image part; ``Expansion`` replaces the placeholders in order by what the processor would write
(``images/processors.py``, from each image's size as its header gives it), and moves the text's
positions (the supervised spans) with them. A record whose image cannot be read, or whose rendering
holds another number of placeholders than it has images, is a counted skip naming why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from ..images.headers import BadImage, ImageSizes, resolve
from ..images.processors import ImageRules
from ..kernels.chat import overlapping_tokens
from ..rows import ColumnSpec
from ..storage.remote import is_url
from .chat_parts import PARTS
from .conversations import BadRecord

IMAGE_KEYS = ("image", "url", "path")  # where a part names its image (transformers' load_image reads each)
TAG = "<image>"  # LLaMA-Factory's placeholder in a message's text


def image_reference(part: dict) -> str:
    for key in IMAGE_KEYS:
        if isinstance(part.get(key), str) and part[key]:
            return part[key]
    raise BadRecord("bad_image", "an image part names no image by 'image', 'url' or 'path' (a string)")


def listed_images(messages: list[dict], images) -> list[dict]:
    """A record's top-level ``images`` given to its messages in order: each ``<image>`` tag in a text
    (LLaMA-Factory) becomes an image part, each image part that names no image (TRL's vision datasets)
    names the next; every message's text becomes a list of parts (as TRL's ``prepare_multimodal_messages``
    makes them: templates such as LLaVA's render only parts)."""
    if not isinstance(images, list) or not all(isinstance(i, str) and i for i in images):
        raise BadRecord("bad_image", "field 'images' is not a list of image paths or URLs (strings)")
    pending = list(images)

    def take() -> dict:
        if not pending:
            raise BadRecord("image_count_mismatch", f"the messages show more images than the {len(images)} listed")
        return {"type": "image", "image": pending.pop(0)}

    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            parts = [take() if p.get("type") == "image" and not _names_image(p) else p for p in content]
        elif isinstance(content, str):
            pieces = content.split(TAG)
            parts = [p for k, piece in enumerate(pieces) for p in ([take()] if k else []) + _text(piece)]
        else:
            parts = content
        out.append(message if parts is content else {**message, "content": parts})
    if pending:
        raise BadRecord("image_count_mismatch", f"{len(images)} images listed, {len(images) - len(pending)} shown")
    return out


def _names_image(part: dict) -> bool:
    return any(isinstance(part.get(key), str) and part[key] for key in IMAGE_KEYS)


def _text(piece: str) -> list[dict]:
    return [{"type": "text", "text": piece}] if piece else []


@dataclass
class Expanded:
    """A rendering with its image placeholders expanded: the new text, each image's (start, end) in it,
    reference and size, and how positions of the old text move (``at``)."""

    text: str
    starts: np.ndarray
    ends: np.ndarray
    references: list[str]
    counts: list[int]  # image tokens each image becomes
    old_ends: np.ndarray  # where each placeholder ended in the old text
    shift: np.ndarray  # characters added by the placeholders up to each (cumulative), 0 first

    def at(self, position: int) -> int:
        return position + int(self.shift[np.searchsorted(self.old_ends, position, side="right")])


class Expansion:
    def __init__(self, rules: ImageRules, media_dir: str | None):
        self.rules, self.media_dir = rules, media_dir
        self.sizes = ImageSizes()
        self.pattern = re.compile(re.escape(rules.placeholder))

    def references(self, messages: list[dict]) -> list[str]:
        """The images of the messages in order, as the processor gathers them (content parts)."""
        return [
            resolve(image_reference(part), self.media_dir)
            for message in messages
            if isinstance(message.get("content"), list)
            for part in message["content"]
            if part.get("type") == "image"
        ]

    def apply(self, text: str, spans: list, messages: list[dict]) -> tuple[str, list, list[tuple]]:
        """The rendering expanded, its spans moved with it, and each image's (start, end, reference, count)."""
        expanded = self.expand(text, messages)
        moved = [(expanded.at(start), expanded.at(end)) for start, end in spans]
        images = list(zip(expanded.starts.tolist(), expanded.ends.tolist(), expanded.references, expanded.counts))
        return expanded.text, moved, images

    def expand(self, text: str, messages: list[dict]) -> Expanded:
        references = self.references(messages)
        found = list(self.pattern.finditer(text))
        if len(found) != len(references):
            raise BadRecord(
                "image_count_mismatch",
                f"the template writes {len(found)} {self.rules.placeholder} for {len(references)} images",
            )
        pieces, starts, ends, counts, shift, last = [], [], [], [], [0], 0
        for match, reference in zip(found, references):
            try:
                height, width = self.sizes.size(reference)
                expansion = self.rules.expand(height, width)
            except BadImage as bad:
                raise BadRecord(bad.reason, str(bad)) from None
            except ValueError as error:  # Qwen2-VL refuses aspect ratios past 200, as its processor does
                raise BadRecord("image_unreadable", f"image {reference}: {error}") from None
            pieces += [text[last : match.start()], expansion]
            starts.append(match.start() + shift[-1])
            ends.append(starts[-1] + len(expansion))
            counts.append(expansion.count(self.rules.image_token))
            shift.append(shift[-1] + len(expansion) - (match.end() - match.start()))
            last = match.end()
        pieces.append(text[last:])
        old_ends = np.array([m.end() for m in found], np.int64)
        return Expanded(
            "".join(pieces), np.array(starts, np.int64), np.array(ends, np.int64), references, counts, old_ends,
            np.array(shift, np.int64),
        )  # fmt: skip


IMAGE_COLUMNS = [
    ColumnSpec(
        "images", "value", 0, 0, "each image's path or URL, in the row's order", role="images",
        value_type=("list", "string"),
    ),
    ColumnSpec(
        "image_spans", "value", 0, 0, "each image's tokens in the row: [first, last + 1) of its image tokens",
        role="image_spans", value_type=("list", ("list", "int64")),
    ),
]  # fmt: skip


@dataclass(frozen=True)
class ImageSetup:
    """A run's images: the processor's rules, the image token's id, and the BOS the processor's
    tokenizer adds to a rendering that does not start with it (``add_special_tokens``, as
    ``ProcessorMixin.apply_chat_template`` decides)."""

    rules: ImageRules
    media_dir: str | None
    image_id: int
    bos_id: int | None
    bos_text: str | None

    @classmethod
    def of(cls, options, rules: ImageRules, tokenizer, variables: dict) -> ImageSetup:
        try:
            import PIL  # noqa: F401 - the image headers are read with Pillow
        except ImportError:
            raise ObjcliError(
                "--processor: images are read with Pillow, not installed; pip install 'objcli[vision]'"
            ) from None
        if options.media_dir and not is_url(options.media_dir) and not Path(options.media_dir).is_dir():
            raise ObjcliError(f"--media-dir {options.media_dir}: no such folder; give the folder images are below")
        if options.assistant_parts != ",".join(PARTS):
            raise ObjcliError(f"--assistant-parts {options.assistant_parts}: not with --processor; leave one out")
        if tokenizer.model_id(rules.image_token) is None:  # a special or user-defined piece: never split
            raise ObjcliError(
                f"--processor {options.processor}: the tokenizer {tokenizer.path} has no special token "
                f"{rules.image_token}; give the model's own tokenizer (the processor folder's tokenizer.json)"
            )
        bos = tokenizer.template_bos()
        return cls(rules, options.media_dir, tokenizer.model_id(rules.image_token),
                   tokenizer.model_id(bos) if bos else None, variables.get("bos_token"))  # fmt: skip

    def identity_files(self) -> dict[str, Path]:
        names = ("preprocessor_config.json", "processor_config.json")
        return {f"processor {n}": self.rules.folder / n for n in names if (self.rules.folder / n).is_file()}

    def adds_bos(self, text: str) -> bool:
        return self.bos_id is not None and not (self.bos_text and text.startswith(self.bos_text))


@dataclass
class ImageTokens:
    """A batch's images: each one's example, its first image token and one past its last (in the batch's
    tokens), and its reference."""

    owner: np.ndarray
    start: np.ndarray
    end: np.ndarray
    references: list[str]

    def of_rows(self, chosen: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ``images`` and ``image_spans`` of the chosen examples (ascending; starting at ``starts``, cut to
        ``lengths``): an image cut off with the example's end is not in its row."""
        images, spans = np.empty(len(chosen), dtype=object), np.empty(len(chosen), dtype=object)
        for row in range(len(chosen)):
            images[row], spans[row] = [], []
        row_of = np.minimum(np.searchsorted(chosen, self.owner), max(len(chosen) - 1, 0))
        kept = np.flatnonzero(
            (chosen[row_of] == self.owner) & (self.end - starts[row_of] <= lengths[row_of])
        ) if len(chosen) else np.zeros(0, np.int64)  # fmt: skip
        for i, row in zip(kept.tolist(), row_of[kept].tolist()):  # a loop an image, not a conversation
            images[row].append(self.references[i])
            spans[row].append([int(self.start[i] - starts[row]), int(self.end[i] - starts[row])])
        return images, spans


def with_bos(encoded: tuple, texts: list[str], setup: ImageSetup | None, text_starts: list[int]) -> tuple:
    """(tokens, offsets, char starts, char ends) with a processor's BOS first in each text that does not
    start with it, where its tokenizer adds one (as ``add_special_tokens`` adds it)."""
    if setup is None or setup.bos_id is None:
        return encoded
    adds = np.array([setup.adds_bos(text) for text in texts], dtype=bool)
    if not adds.any():
        return encoded
    tokens, offsets, char_starts, char_ends = encoded
    at, starts = offsets[:-1][adds], np.asarray(text_starts, np.int64)[adds]
    added = np.concatenate([[0], np.cumsum(adds)])
    return (
        np.insert(tokens, at, setup.bos_id).astype(tokens.dtype), offsets + added,
        np.insert(char_starts, at, starts), np.insert(char_ends, at, starts),
    )  # fmt: skip


def image_tokens(encoded: tuple, found: list[tuple], image_id: int, token: str) -> ImageTokens:
    """Each image's image tokens, from its expansion's characters (``found``: example, start, end in the
    joined texts, reference, count); every count is checked against the tokens."""
    tokens, offsets, char_starts, char_ends = encoded
    owner, start, end, references, counts = (list(x) for x in zip(*found)) if found else ([],) * 5
    first, last, _ = overlapping_tokens(char_starts, char_ends, offsets, owner, start, end)
    positions = np.flatnonzero(tokens == image_id)
    lo = np.searchsorted(positions, first, side="left")
    hi = np.searchsorted(positions, last, side="right")
    if not np.array_equal(hi - lo, np.asarray(counts, np.int64)):
        raise ObjcliError(f"the tokenizer does not read {token} as one token in every image; give the model's own")
    spans_end = positions[np.maximum(hi - 1, 0)] + 1 if len(positions) else np.zeros(len(lo), np.int64)
    return ImageTokens(np.asarray(owner, np.int64), positions[lo] if len(positions) else lo, spans_end, references)
