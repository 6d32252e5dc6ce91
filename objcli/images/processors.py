"""A processor folder's image rules (``--processor DIR``): what the chat template's image placeholder
becomes for an image of a given size, exactly as the model's ``transformers`` processor expands it.

A processor replaces each occurrence of its placeholder in the rendered text (in order, one per
image) by a string of special tokens (``ProcessorMixin.get_text_with_replacements``), then
tokenizes; objcli does the same with each family's ``replace_image_token``, the counts coming from
the image's size by the family's resizing rules (``sizes.py``). The folder is what
``save_pretrained`` writes: ``preprocessor_config.json`` (the image processor),
``processor_config.json`` (the processor's own settings), ``tokenizer_config.json`` (the names of
its image tokens) and the chat template. Families are registered by their processor class name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ObjcliError
from . import sizes

# processor class -> the family's rules: (placeholder, image token, expand(height, width) -> text)
FAMILIES: dict[str, Callable[[Configs], tuple[str, str, Callable[[int, int], str]]]] = {}
TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json", "processor_config.json")


def family(*names: str):
    def register(build):
        for name in names:
            FAMILIES[name] = build
        return build

    return register


@dataclass(frozen=True)
class Configs:
    folder: Path
    image: dict  # preprocessor_config.json
    processor: dict  # processor_config.json
    tokens: dict  # tokenizer_config.json's named tokens (image_token, boi_token, ...)

    def token(self, name: str, default: str) -> str:
        value = self.tokens.get(name, self.processor.get(name, default))
        return value["content"] if isinstance(value, dict) else str(value)


@dataclass(frozen=True)
class ImageRules:
    """One family's expansion: ``placeholder`` (what the template writes for each image and the processor
    replaces), ``image_token`` (the token whose embeddings the vision features replace: the tokens the
    rows' ``image_spans`` cover, counted and never learned) and ``expand(height, width)``."""

    family: str
    placeholder: str
    image_token: str
    expand: Callable[[int, int], str]
    folder: Path
    template: Path | None

    def count(self, height: int, width: int) -> int:
        return self.expand(height, width).count(self.image_token)


@family("Qwen2VLProcessor", "Qwen2_5_VLProcessor")
def qwen2_vl(c: Configs) -> tuple[str, str, Callable]:
    token = c.token("image_token", "<|image_pad|>")
    patch, merge = int(c.image.get("patch_size", 14)), int(c.image.get("merge_size", 2))
    size = dict(c.image.get("size") or {"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 1280})
    low = int(c.image.get("min_pixels") or size["shortest_edge"])
    high = int(c.image.get("max_pixels") or size["longest_edge"])

    def expand(height: int, width: int) -> str:
        resized_h, resized_w = sizes.smart_resize(height, width, patch * merge, low, high)
        return token * ((resized_h // patch) * (resized_w // patch) // merge**2)

    return token, token, expand


@family("LlavaProcessor")
def llava(c: Configs) -> tuple[str, str, Callable]:
    token = c.token("image_token", "<image>")
    patch = c.processor.get("patch_size")
    if not patch:
        raise ObjcliError(f"--processor {c.folder}: processor_config.json has no patch_size; add the model's")
    extra = int(c.processor.get("num_additional_image_tokens", 0))
    drop_cls = c.processor.get("vision_feature_select_strategy", "default") == "default"

    def expand(height: int, width: int) -> str:
        out_h, out_w = sizes.clip_output_size(height, width, c.image)
        return token * ((out_h // patch) * (out_w // patch) + extra - drop_cls)

    return token, token, expand


@family("Gemma3Processor")
def gemma3(c: Configs) -> tuple[str, str, Callable]:
    """Every image ``image_seq_length`` soft tokens between its begin and end tokens. Pan and scan is off
    whatever the image config says: the processor's own defaults (``Gemma3Processor.images_kwargs``)
    come before it, as ``ProcessorMixin._merge_kwargs`` orders them."""
    boi, eoi = c.token("boi_token", "<start_of_image>"), c.token("eoi_token", "<end_of_image>")
    token = c.token("image_token", "<image_soft_token>")
    full = f"\n\n{boi}{token * int(c.processor.get('image_seq_length', 256))}{eoi}\n\n"
    return boi, token, lambda height, width: full


@family("Idefics3Processor", "SmolVLMProcessor")
def idefics3(c: Configs) -> tuple[str, str, Callable]:
    token = c.token("image_token", "<image>")
    fake = c.token("fake_image_token", "<fake_token_around_image>")
    whole = c.token("global_image_token", "<global-img>")
    length = int(c.processor.get("image_seq_len", 169))

    def expand(height: int, width: int) -> str:
        rows, cols = sizes.idefics3_tiles(height, width, c.image)
        tiles = "".join(
            "".join(f"{fake}<row_{r + 1}_col_{k + 1}>{token * length}" for k in range(cols)) + "\n" for r in range(rows)
        )
        return tiles + ("\n" if rows else "") + f"{fake}{whole}{token * length}{fake}"

    return token, token, expand


def _read(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ObjcliError(f"--processor: {path} is not readable JSON ({error}); restore the file") from None
    if not isinstance(data, dict):
        raise ObjcliError(f"--processor: {path} holds {type(data).__name__}, not an object; restore the file")
    return data


def _named_tokens(config: dict) -> dict:
    extra = config.get("extra_special_tokens") or config.get("model_specific_special_tokens") or {}
    return {**(extra if isinstance(extra, dict) else {}), **{k: v for k, v in config.items() if k.endswith("_token")}}


def load_rules(folder: str | Path) -> ImageRules:
    """The image rules of a processor folder; one line when it is none objcli knows."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ObjcliError(f"--processor {folder}: no such folder; give the folder the model's processor was saved in")
    image, processor = _read(folder / "preprocessor_config.json"), _read(folder / "processor_config.json")
    image = image or processor.get("image_processor") or {}
    tokens = _read(folder / "tokenizer_config.json")
    name = processor.get("processor_class") or image.get("processor_class") or tokens.get("processor_class")
    if name not in FAMILIES:
        known = ", ".join(sorted(FAMILIES))
        raise ObjcliError(
            f"--processor {folder}: processor class {name or 'not named'} (its preprocessor_config.json or "
            f"processor_config.json names it); objcli expands images for {known}"
        )
    try:  # every setting read, and used once, here: a wrong type is one line before any record
        placeholder, image_token, expand = FAMILIES[name](Configs(folder, image, processor, _named_tokens(tokens)))
        expand(224, 320)
    except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError) as error:
        raise ObjcliError(
            f"--processor {folder}: its configs do not read as {name}'s ({type(error).__name__}: {error}); "
            "restore the files save_pretrained wrote"
        ) from None
    template = next((folder / f for f in TEMPLATE_FILES if _holds_template(folder / f)), None)
    return ImageRules(name, placeholder, image_token, expand, folder, template)


def _holds_template(path: Path) -> bool:
    return path.suffix == ".jinja" and path.is_file() or path.suffix == ".json" and "chat_template" in _read(path)
