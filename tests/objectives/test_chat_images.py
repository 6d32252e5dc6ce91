"""Images in conversations (``--processor``): objcli's ids equal each family's processor's own
``input_ids`` (``apply_chat_template(..., tokenize=True)``, the processor built with ``transformers``
from the family's configuration, ``tests/support/vision_families.py``), every image's span covers
exactly its image tokens, no image token is learned, and packed rows keep every span whole."""

from __future__ import annotations

import json

import numpy as np
import pytest
from runs import read_output, run_transform
from vision_families import FAMILIES, build_processor, conversations, make_images, processor_messages, write_jsonl

pytest.importorskip("transformers")
pytest.importorskip("PIL")

IGNORE = -100


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return make_images(tmp_path_factory.mktemp("images"), np.random.default_rng(3), 40)


def _processor_ids(processor, record: dict) -> list[int]:
    out = processor.apply_chat_template(processor_messages(record), tokenize=True, return_dict=True)
    return list(out["input_ids"][0])


def _image_token(processor) -> str:
    """The token the vision features replace: the tokenizer's image token (Gemma 3's soft token, not the
    <start_of_image> its template writes), else the processor's."""
    return getattr(processor.tokenizer, "image_token", None) or processor.image_token


def _check_rows(rows: dict, image_id: int) -> None:
    """Every image token of a row inside one of its spans, each span starting and ending on one, no loss
    on a span, spans in order and inside one segment."""
    for k, ids in enumerate(rows["input_ids"]):
        ids, labels = np.array(ids), np.array(rows["labels"][k])
        spans = rows["image_spans"][k]
        assert len(spans) == len(rows["images"][k])
        covered = np.zeros(len(ids), dtype=bool)
        for start, end in spans:
            assert ids[start] == image_id and ids[end - 1] == image_id
            assert not covered[start:end].any()
            covered[start:end] = True
            assert (labels[start:end] == IGNORE).all()
            if "segment_ids" in rows:
                assert len(set(rows["segment_ids"][k][start:end])) == 1
        assert set(np.flatnonzero(ids == image_id)) <= set(np.flatnonzero(covered))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_ids_equal_the_processors_own(family, images, tmp_path):
    processor = build_processor(family, tmp_path / "processor")
    records = conversations(images, np.random.default_rng(len(family)), 14, "parts" if len(family) % 2 else "tags")
    data = write_jsonl(tmp_path / "c.jsonl", records)
    summary = run_transform([data], tmp_path / "processor" / "tokenizer.json", tmp_path / "out", objective="chat",
                            packing="none", seq_len=1 << 16, processor=str(tmp_path / "processor"))  # fmt: skip
    assert summary.manifest["totals"]["rows"] == len(records)
    _, rows = read_output(tmp_path / "out")
    image_id = processor.tokenizer.convert_tokens_to_ids(_image_token(processor))
    for record, ids, refs in zip(records, rows["input_ids"], rows["images"]):
        assert ids == _processor_ids(processor, record)
        shown = [p.get("image") or p.get("path") for m in processor_messages(record) for p in m["content"]
                 if isinstance(p, dict) and p.get("type") == "image"]  # fmt: skip
        assert refs == shown
    _check_rows(rows, image_id)
    counted = sum(int((np.array(ids) == image_id).sum()) for ids in rows["input_ids"])
    assert sum(e - s for spans in rows["image_spans"] for s, e in spans) >= counted > 0
