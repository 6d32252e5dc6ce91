"""Images in conversations (``--processor``): objcli's ids equal each family's processor's own
``input_ids`` (``apply_chat_template(..., tokenize=True)``, the processor built with ``transformers``
from the family's configuration, ``tests/support/vision_families.py``), every image's span covers
exactly its image tokens, no image token is learned, and packed rows keep every span whole."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from runs import SAMPLE, cli, read_output, run_cli, run_transform
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


# Two families in the default run (a run of one token by the image's size; a fixed count with a BOS the
# tokenizer adds); the rest (Idefics3's tiles: tests/images/test_sizes.py in the default run) with the heavy tests.
DEFAULT_RUN = ("qwen2_vl", "llava")


@pytest.mark.parametrize(
    "family", [f if f in DEFAULT_RUN else pytest.param(f, marks=pytest.mark.heavy) for f in sorted(FAMILIES)]
)
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


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen") / "processor"
    return build_processor("qwen2_vl_256", folder), folder


def _run(qwen, records, out, **options):
    processor, folder = qwen
    data = write_jsonl(out.parent / f"{out.name}.jsonl", records)
    return run_transform([data], folder / "tokenizer.json", out, objective="chat", processor=str(folder), **options)


def test_packed_rows_keep_each_conversations_images_and_spans(qwen, images, tmp_path):
    records = conversations(images, np.random.default_rng(11), 40)
    _run(qwen, records, tmp_path / "one", packing="none", seq_len=4096)
    _run(qwen, records, tmp_path / "packed", packing="best-fit", seq_len=4096)
    _, alone = read_output(tmp_path / "one")
    _, packed = read_output(tmp_path / "packed")
    by_ids = {tuple(ids): k for k, ids in enumerate(alone["input_ids"])}
    seen = 0
    for row, ids in enumerate(packed["input_ids"]):
        segments = np.array(packed["segment_ids"][row])
        spans, refs = packed["image_spans"][row], packed["images"][row]
        at = 0
        for segment in [s for s in dict.fromkeys(segments.tolist()) if s > 0]:
            where = np.flatnonzero(segments == segment)
            k = by_ids[tuple(ids[where[0] : where[-1] + 1])]  # a conversation whole in the row
            own = [[s - where[0], e - where[0]] for s, e in spans if where[0] <= s < where[-1] + 1]
            assert own == alone["image_spans"][k]
            assert refs[at : at + len(own)] == alone["images"][k]
            at += len(own)
            seen += 1
        assert at == len(refs)
    assert seen == len(alone["input_ids"]) == len(records)
    _check_rows(packed, qwen[0].tokenizer.convert_tokens_to_ids("<|image_pad|>"))


def test_unreadable_images_are_counted_skips_that_name_them(qwen, images, tmp_path):
    (tmp_path / "text.png").write_text("not an image")
    good = conversations(images, np.random.default_rng(5), 6)
    shown = {"role": "user", "content": [{"type": "image", "image": "?"}, {"type": "text", "text": "what is it"}]}
    answer = {"role": "assistant", "content": "a boat"}

    def showing(reference):
        content = [{"type": "image", "image": reference}, shown["content"][1]]
        return {"messages": [{**shown, "content": content}, answer]}

    bad = [showing(str(tmp_path / "missing.png")), showing(str(tmp_path / "text.png")),
           {"messages": [{"role": "user", "content": "<image><image> two"}, answer], "images": [str(images[0])]},
           {"messages": [{"role": "user", "content": [{"type": "image"}]}, answer]}]  # fmt: skip
    summary = _run(qwen, good + bad, tmp_path / "out", seq_len=4096)
    totals = summary.manifest["totals"]
    assert totals["documents_read"] == totals["documents_written"] + totals["documents_skipped"] == len(good) + 4
    assert totals["skipped_by_reason"] == {"image_missing": 1, "image_unreadable": 1, "image_count_mismatch": 1,
                                           "bad_image": 1}  # fmt: skip
    (partition,) = summary.manifest["partitions"]
    assert "missing.png" in partition["first_skipped"]["image_missing"]
    assert "text.png" in partition["first_skipped"]["image_unreadable"]


def test_no_pixel_is_decoded(qwen, images, tmp_path, monkeypatch):
    from PIL import ImageFile

    def refuse(self):
        raise AssertionError("a pixel was decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", refuse)
    summary = _run(qwen, conversations(images, np.random.default_rng(8), 10), tmp_path / "out", seq_len=4096)
    assert summary.manifest["totals"]["documents_written"] == 10


def test_stats_and_verify_read_the_images(qwen, images, tmp_path):
    from objcli.commands.stats import compute_stats
    from objcli.commands.verify import verify_output

    _run(qwen, conversations(images, np.random.default_rng(9), 12), tmp_path / "out", seq_len=4096)
    _, rows = read_output(tmp_path / "out")
    image_id = qwen[0].tokenizer.convert_tokens_to_ids("<|image_pad|>")
    stats = compute_stats(tmp_path / "out")
    assert stats["images"] == sum(map(len, rows["images"])) > 0
    assert stats["image_tokens"] == sum(int((np.array(ids) == image_id).sum()) for ids in rows["input_ids"])
    assert verify_output(tmp_path / "out").ok
    shown = cli(["inspect", tmp_path / "out", "--rows", "1"]).output  # each image where its tokens are, folded
    first = rows["image_spans"][0]
    assert shown.count("[image ×") == len(first) and f"image {len(first)}: {rows['images'][0][-1]}" in shown


@pytest.mark.parametrize(
    "change, said",
    [
        (lambda row: row["spans"].__setitem__(0, [row["spans"][0][0] - 1, row["spans"][0][1]]), "start and end"),
        (lambda row: row["labels"].__setitem__(row["spans"][0][0], 7), "carries loss"),
        (lambda row: row["spans"].pop(), "images for"),
        (lambda row: row["ids"].__setitem__(0, 9), "outside every image span"),
        (lambda row: row["spans"].reverse(), "out of order"),
    ],
)
def test_verify_finds_each_broken_span(change, said):
    from objcli.commands.verify_images import check_image_spans
    from objcli.formats import Column

    row = {"ids": [1, 9, 9, 9, 2, 9, 9, 3], "labels": [-100] * 7 + [3], "spans": [[1, 4], [5, 7]]}
    images = ["a.png", "b.png"]
    assert not _check(check_image_spans, Column, row, images)
    change(row)
    assert said in _check(check_image_spans, Column, row, images)[0]


def _check(check, column, row, images):
    def one(values):
        return column(np.array(values), np.array([0, len(values)]))

    def value(item):
        values = np.empty(1, dtype=object)
        values[0] = item
        return column(values, np.array([0, 1]))

    return check(one(row["ids"]), value(row["spans"]), value(images), one(row["labels"]), None)


@pytest.mark.parametrize(
    "options, said",
    [
        ({"output_format": "megatron"}, "images, image_spans"),
        ({"assistant_parts": "answer"}, "not with --processor"),
        ({"processor": "/no/such/folder"}, "no such folder"),
        ({"objective": "clm"}, "applies to chat"),
    ],
)
def test_what_images_cannot_do_is_refused_in_one_line(qwen, tmp_path, options, said):
    from objcli.errors import ObjcliError

    data = write_jsonl(tmp_path / "c.jsonl", [{"messages": [{"role": "user", "content": "hi"},
                                                             {"role": "assistant", "content": "ho"}]}])  # fmt: skip
    values = {"objective": "chat", "processor": str(qwen[1]), **options}
    with pytest.raises(ObjcliError, match=said):
        run_transform([data], qwen[1] / "tokenizer.json", tmp_path / "out", **values)


@pytest.mark.heavy
def test_images_in_object_storage_are_read_by_their_headers(qwen, images, tmp_path):
    """Images named by s3:// URLs (a real S3 endpoint on loopback): the same ids as the same images on disk,
    the rows naming the URLs."""
    from s3_server import moto_s3

    records = conversations(images, np.random.default_rng(21), 8)
    _run(qwen, records, tmp_path / "local", packing="none", seq_len=4096)
    with moto_s3() as s3:
        s3.mkdir("pictures")
        for path in images:
            s3.put(str(path), f"pictures/{path.name}")
        remote = json.loads(json.dumps(records).replace(str(images[0].parent), "s3://pictures"))
        _run(qwen, remote, tmp_path / "remote", packing="none", seq_len=4096)
    _, local = read_output(tmp_path / "local")
    _, rows = read_output(tmp_path / "remote")
    assert rows["input_ids"] == local["input_ids"] and rows["image_spans"] == local["image_spans"]
    assert [[r.replace("s3://pictures", str(images[0].parent)) for r in refs] for refs in rows["images"]] == local[
        "images"
    ]
    assert any(refs for refs in rows["images"]) and all(r.startswith("s3://") for refs in rows["images"] for r in refs)


@pytest.mark.parametrize("packing", ["best-fit", pytest.param("none", marks=pytest.mark.heavy)])
def test_a_chat_store_keeps_the_images_and_its_derived_runs_equal_the_text_runs(qwen, images, tmp_path, packing):
    from objcli.commands.verify import verify_output

    processor, folder = qwen
    records = conversations(images, np.random.default_rng(31), 20) + [
        {
            "messages": [
                {"role": "user", "content": [{"type": "image", "image": "/no/such.png"}]},
                {"role": "assistant", "content": "none"},
            ]
        }  # fmt: skip
    ]
    data = write_jsonl(tmp_path / "c.jsonl", records)
    made = run_cli("tokenize", data, "-t", folder / "tokenizer.json", "--chat", "--processor", folder, "-o",
                   tmp_path / "store")  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert verify_output(tmp_path / "store").ok
    for seq_len in (1024, 4096):
        options = {"objective": "chat", "packing": packing, "seq_len": seq_len}
        text = run_transform([data], folder / "tokenizer.json", tmp_path / f"t{seq_len}", processor=str(folder),
                             **options)  # fmt: skip
        derived = run_transform([tmp_path / "store"], folder / "tokenizer.json", tmp_path / f"d{seq_len}", **options)
        assert derived.manifest["totals"]["skipped_by_reason"] == text.manifest["totals"]["skipped_by_reason"]
        assert read_output(tmp_path / f"d{seq_len}")[1] == read_output(tmp_path / f"t{seq_len}")[1]
    assert any(read_output(tmp_path / "d4096")[1]["images"])


def test_chat_stores_without_images_refuse_a_processor_in_one_line(qwen, tmp_path, monkeypatch):
    """A store tokenized without --processor, and one made before stores kept images (by the objcli of stop
    88, ``tests/data/stores/chat-before-images``), which still derives as it did."""
    import shutil

    from paths import CHAT_TEMPLATES

    from objcli.errors import ObjcliError

    folder = shutil.copytree(Path(__file__).parents[1] / "data" / "stores", tmp_path / "stores")
    shutil.copy(CHAT_TEMPLATES / "qwen2.5.jinja", folder)
    monkeypatch.chdir(folder)
    tokenizer = SAMPLE / "llama-style" / "tokenizer.json"
    common = {"objective": "chat", "seq_len": 512, "chat_template": "qwen2.5.jinja"}
    run_transform(["chat-before-images"], tokenizer, tmp_path / "derived", **common)
    run_transform(["chats-12.jsonl"], tokenizer, tmp_path / "text", **common)
    assert read_output(tmp_path / "derived")[1] == read_output(tmp_path / "text")[1]
    with pytest.raises(ObjcliError, match="tokenized without --processor"):
        run_transform(["chat-before-images"], tokenizer, tmp_path / "images", processor=str(qwen[1]), **common)
