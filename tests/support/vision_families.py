"""Vision-language processors as the families release them, built with ``transformers`` from each
family's configuration (image processor settings, processor settings, chat template) and one small
byte-level BPE holding every family's special tokens, then saved with ``save_pretrained``: the folder
``--processor`` reads. Images of many sizes and formats (EXIF-rotated JPEGs too) and conversations
showing them: what ``tests/objectives/test_chat_images.py`` compares with the processors' own ids."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from paths import CHAT_TEMPLATES

VISION = CHAT_TEMPLATES / "vision"
ROWS_COLS = [f"<row_{r}_col_{c}>" for r in range(1, 9) for c in range(1, 9)]
SPECIALS = [
    "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>",
    "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>",
    "<image_soft_token>", "<s>", "</s>", "<image>", "<fake_token_around_image>", "<global-img>",
    "<end_of_utterance>", "<|begin_of_text|>", "<pad>", *ROWS_COLS,
]  # fmt: skip
WORDS = "the river runs to the sea ; why is the sky blue ? describe this image , a picture of a red boat".split()

# family -> (module, processor class, image processor class and settings, processor settings, template,
# bos, eos, named tokens): each as the released checkpoint's preprocessor and processor configs set them.
FAMILIES = {
    "qwen2_vl": ("qwen2_vl", "Qwen2VLProcessor", "Qwen2VLImageProcessorPil",
                 {"min_pixels": 3136, "max_pixels": 12845056}, {}, "qwen2_vl.jinja", None, "<|im_end|>", {}),
    "qwen2_vl_256": ("qwen2_vl", "Qwen2VLProcessor", "Qwen2VLImageProcessorPil",
                     {"min_pixels": 3136, "max_pixels": 256 * 28 * 28}, {}, "qwen2_vl.jinja", None, "<|im_end|>", {}),
    "llava": ("llava", "LlavaProcessor", "LlavaImageProcessorPil",
              {"size": {"shortest_edge": 336}, "crop_size": {"height": 336, "width": 336}},
              {"patch_size": 14, "vision_feature_select_strategy": "default", "num_additional_image_tokens": 1},
              "llava_1_5.jinja", "<s>", "</s>", {"image_token": "<image>"}),
    "gemma3": ("gemma3", "Gemma3Processor", "Gemma3ImageProcessorPil", {"size": {"height": 896, "width": 896}},
               {"image_seq_length": 256}, "gemma3.jinja", "<bos>", "<eos>",
               {"image_token": "<image_soft_token>", "boi_token": "<start_of_image>", "eoi_token": "<end_of_image>"}),
    "gemma3_pan_and_scan": ("gemma3", "Gemma3Processor", "Gemma3ImageProcessorPil",
                            {"size": {"height": 896, "width": 896}, "do_pan_and_scan": True,
                             "pan_and_scan_min_crop_size": 256, "pan_and_scan_max_num_crops": 4,
                             "pan_and_scan_min_ratio_to_activate": 1.2},
                            {"image_seq_length": 256}, "gemma3.jinja", "<bos>", "<eos>",
                            {"image_token": "<image_soft_token>", "boi_token": "<start_of_image>",
                             "eoi_token": "<end_of_image>"}),
    "idefics3": ("idefics3", "Idefics3Processor", "Idefics3ImageProcessorPil",
                 {"size": {"longest_edge": 4 * 364}, "max_image_size": {"longest_edge": 364}},
                 {"image_seq_len": 169}, "idefics3.jinja", "<|begin_of_text|>", "<end_of_utterance>", {}),
    "smolvlm": ("smolvlm", "SmolVLMProcessor", "SmolVLMImageProcessorPil",
                {"size": {"longest_edge": 4 * 384}, "max_image_size": {"longest_edge": 384}},
                {"image_seq_len": 81}, "smolvlm.jinja", "<|im_start|>", "<end_of_utterance>", {}),
}  # fmt: skip


def train_tokenizer(folder: Path, bos: str | None):
    """The small BPE every family shares; a BOS the post-processor adds where the family's tokenizer does
    (LLaVA's Llama 2 tokenizer adds <s>)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    rng = np.random.default_rng(7)
    texts = [" ".join(rng.choice(WORDS, 12)) for _ in range(400)] + [p.read_text() for p in VISION.glob("*.jinja")]
    trainer = trainers.BpeTrainer(
        vocab_size=900, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )  # fmt: skip
    tokenizer.train_from_iterator(texts, trainer)
    if bos == "<s>":
        tokenizer.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", tokenizer.token_to_id("<s>"))]
        )
    return tokenizer


def build_processor(family: str, folder: Path):
    """The family's processor, saved in ``folder`` (what ``--processor`` reads); returns it."""
    import importlib

    from transformers import PreTrainedTokenizerFast

    module, processor_class, image_class, image_settings, settings, template, bos, eos, named = FAMILIES[family]
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=train_tokenizer(folder, bos), bos_token=bos, eos_token=eos, pad_token="<pad>",
        extra_special_tokens=named,
    )  # fmt: skip
    package = f"transformers.models.{module}"
    image_processor = getattr(importlib.import_module(f"{package}.image_processing_pil_{module}"), image_class)(
        **image_settings
    )
    cls = getattr(importlib.import_module(f"{package}.processing_{module}"), processor_class)
    with _without_video(cls) as parts:
        processor = cls(image_processor, tokenizer, **parts, chat_template=(VISION / template).read_text(), **settings)
    if parts:  # saved as released checkpoints lay it out: each part's own file (save_pretrained needs them all)
        processor.video_processor = SimpleNamespace(num_frames=None, fps=None)  # what SmolVLM's template call reads
        image_processor.save_pretrained(str(folder))
        tokenizer.save_pretrained(str(folder))
        (folder / "chat_template.jinja").write_text(processor.chat_template)
        (folder / "processor_config.json").write_text(json.dumps({"processor_class": processor_class, **settings}))
    else:
        processor.save_pretrained(str(folder))
    return processor


@contextmanager
def _without_video(cls):
    """Video processors need torchvision, which images do not: a processor that takes one is built
    without it (``None``, its check skipped) where torchvision is not installed."""
    from transformers.processing_utils import ProcessorMixin

    if "video_processor" not in cls.get_attributes():
        yield {}
        return
    check = ProcessorMixin.check_argument_for_proper_class
    ProcessorMixin.check_argument_for_proper_class = lambda self, name, arg: (
        None if name == "video_processor" and arg is None else check(self, name, arg)
    )
    try:
        yield {"video_processor": None}
    finally:
        ProcessorMixin.check_argument_for_proper_class = check


SHAPES = [(20, 31), (28, 28), (56, 90), (224, 224), (300, 200), (333, 517), (480, 640), (1000, 90), (90, 700),
          (768, 1024), (1200, 900), (37, 1500), (2000, 33), (512, 512), (1456, 364), (365, 729)]  # fmt: skip


def make_images(folder: Path, rng: np.random.Generator, count: int) -> list[Path]:
    """Images of many sizes (``SHAPES`` and random ones) as PNG, JPEG (some EXIF-rotated) and WebP."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(count):
        height, width = SHAPES[k] if k < len(SHAPES) else (int(rng.integers(8, 1400)), int(rng.integers(8, 1400)))
        color = tuple(int(c) for c in rng.integers(0, 255, 3))
        image = Image.new("RGB", (width, height), color)
        kind = k % 4
        if kind == 0:
            path = folder / f"image-{k}.png"
            image.save(path)
        elif kind == 1:
            path = folder / f"image-{k}.webp"
            image.save(path)
        else:
            path = folder / f"image-{k}.jpg"
            exif = Image.Exif()
            exif[0x0112] = int(rng.choice([1, 3, 6, 8]))  # orientations 6 and 8 turn it a quarter
            image.save(path, exif=exif.tobytes())
        paths.append(path)
    return paths


def conversations(images: list[Path], rng: np.random.Generator, count: int, layout: str = "parts") -> list[dict]:
    """Conversations of one to three exchanges, each user turn showing zero to two images (``parts``:
    content parts naming them; ``tags``: LLaMA-Factory's ``<image>`` tags and an ``images`` list)."""
    records = []
    for _ in range(count):
        messages, listed = [], []
        for _turn in range(int(rng.integers(1, 4))):
            shown = [str(images[int(i)]) for i in rng.integers(0, len(images), int(rng.integers(0, 3)))]
            text = " ".join(rng.choice(WORDS, int(rng.integers(2, 9))))
            if layout == "tags":
                messages.append({"role": "user", "content": "<image>" * len(shown) + text})
                listed += shown
            else:
                key = ["image", "path"][int(rng.integers(0, 2))]
                parts = [{"type": "image", key: s} for s in shown] + [{"type": "text", "text": text}]
                messages.append({"role": "user", "content": parts})
            answer = " ".join(rng.choice(WORDS, int(rng.integers(2, 9))))
            messages.append({"role": "assistant", "content": [{"type": "text", "text": answer}]})
        records.append({"messages": messages, **({"images": listed} if layout == "tags" else {})})
    return records


def processor_messages(record: dict) -> list[dict]:
    """A record as the processor takes it (``tags``: as TRL's ``prepare_multimodal_messages`` makes them)."""
    if "images" not in record:
        return record["messages"]
    listed, out = list(record["images"]), []
    for message in record["messages"]:
        pieces = message["content"].split("<image>") if isinstance(message["content"], str) else None
        if pieces is None:
            out.append(message)
            continue
        parts = []
        for k, piece in enumerate(pieces):
            if k:
                parts.append({"type": "image", "image": listed.pop(0)})
            if piece:
                parts.append({"type": "text", "text": piece})
        out.append({**message, "content": parts})
    return out


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path
