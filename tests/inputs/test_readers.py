"""Readers: formats, compression by content, partitions, and the bad-record policy."""

import bz2
import gzip
import io
import json
import lzma
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st
from readback import text_inputs

from objcli.errors import BadRecord, ObjcliError
from objcli.inputs import ReadOptions, RecordLog, cut_partitions, read_documents
from objcli.inputs.origins import count_newlines
from objcli.inputs.pieces import InputFile, Partition, Piece

DOCS = ["first document", "second — with ünïcode ✓", "  indented code():\n    return 1", "last"]

COMPRESSORS = {
    "none": lambda b: b,
    "gzip": gzip.compress,
    "zstd": lambda b: zstandard.ZstdCompressor().compress(b),
    "bz2": bz2.compress,
    "xz": lzma.compress,
}


def read_all(path, **options):
    files = text_inputs([str(path)], options.pop("input_format", "auto"))
    log = RecordLog(strict=options.pop("strict", False))
    partition_bytes = options.pop("partition_bytes", 1 << 40)
    opts = ReadOptions(**options)
    texts = []
    for partition in cut_partitions(files, partition_bytes, opts.text_unit):
        texts += [t for batch in read_documents(partition, opts, log) for t in batch]
    return texts, log


def jsonl_bytes(docs, key="text"):
    return "".join(json.dumps({key: d, "id": i}) + "\n" for i, d in enumerate(docs)).encode()


@pytest.mark.parametrize("compression", sorted(COMPRESSORS))
def test_jsonl_in_every_compression_detected_by_content(tmp_path, compression):
    # A misleading name: detection must come from the bytes, not the extension.
    path = tmp_path / "data.jsonl"
    path.write_bytes(COMPRESSORS[compression](jsonl_bytes(DOCS)))
    texts, log = read_all(path)
    assert texts == DOCS
    assert log.read == 4 and not log.skipped


@pytest.mark.parametrize("compression", sorted(COMPRESSORS))
def test_text_lines_in_every_compression(tmp_path, compression):
    path = tmp_path / "data.txt.bin"
    path.write_bytes(COMPRESSORS[compression](b"alpha\r\n\nbeta  \n   \ngamma"))
    texts, log = read_all(path, input_format="text")
    assert texts == ["alpha", "beta  ", "gamma"]  # blank lines are not records; \r\n handled
    assert log.read == 3


def test_paragraph_and_file_units(tmp_path):
    path = tmp_path / "prose.txt"
    path.write_text("one\nstill one\n\n\n  \ntwo\n\nthree\n")
    assert read_all(path, text_unit="paragraph")[0] == [
        "one\nstill one",
        "two",
        "three",
    ]  # no line end kept at the edges (issue 17, item 10)
    assert read_all(path, text_unit="file")[0] == ["one\nstill one\n\n\n  \ntwo\n\nthree\n"]


def test_paragraphs_across_block_boundaries(tmp_path):
    paragraphs = [f"paragraph {i} " + "word " * (i % 7) for i in range(300)]
    path = tmp_path / "p.txt"
    path.write_text("\n\n".join(paragraphs))
    texts, _ = read_all(path, text_unit="paragraph", batch_bytes=97)
    assert texts == paragraphs


def test_parquet_column_and_nulls(tmp_path):
    path = tmp_path / "data.parquet"
    pq.write_table(pa.table({"body": ["a", None, "c"], "n": [1, 2, 3]}), path)
    texts, log = read_all(path, text_key="body")
    assert texts == ["a", "c"]
    assert log.read == 3 and log.skipped == {"null_text": 1}
    with pytest.raises(
        ObjcliError, match=r"no column 'text' \(columns: body, n\); choose the text column with --text-key"
    ):
        read_all(path)
    with pytest.raises(ObjcliError, match="column 'n' is int64, not text"):
        read_all(path, text_key="n")


def test_a_dotted_text_key_reaches_nested_fields(tmp_path):
    """Issue 17, rough edge: --text-key could not reach meta.body.text or a Parquet struct field."""
    records = [{"id": i, "meta": {"body": {"text": d, "lang": "en"}, "n": i}} for i, d in enumerate(DOCS)]
    records += [{"meta": {"body": {"lang": "fr"}}}, {"meta": "flat"}, {"meta": {"body": {"text": 7}}}]
    (tmp_path / "nested.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    texts, log = read_all(tmp_path / "nested.jsonl", text_key="meta.body.text")
    assert texts == DOCS
    assert log.skipped == {"missing_field": 2, "not_a_string": 1}
    assert "record has no field 'meta.body.text' (its fields: meta;" in log.first_example["missing_field"]
    table = pa.table(
        {
            "meta": [{"body": {"text": d}} for d in DOCS] + [{"body": {"text": None}}],
            "meta.flat": DOCS + ["dotted name"],
        }
    )
    pq.write_table(table, tmp_path / "nested.parquet")
    texts, log = read_all(tmp_path / "nested.parquet", text_key="meta.body.text")
    assert texts == DOCS and log.skipped == {"null_text": 1}
    assert read_all(tmp_path / "nested.parquet", text_key="meta.flat")[0] == DOCS + ["dotted name"]  # its own name wins
    with pytest.raises(ObjcliError, match=r"column 'meta.body' has no field 'txt' \(fields: text\); fix --text-key"):
        read_all(tmp_path / "nested.parquet", text_key="meta.body.txt")


def test_folders_follow_symbolic_links_like_find_l(tmp_path):
    """Issue 17, rough edge: a symlinked folder was not followed and a dangling link was ignored
    silently. Now links are followed as `find -L` does, a loop is walked once, dangling links are named."""
    corpus, elsewhere = tmp_path / "corpus", tmp_path / "elsewhere"
    (corpus / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    (corpus / "a.jsonl").write_bytes(jsonl_bytes(DOCS[:1]))
    (elsewhere / "b.jsonl").write_bytes(jsonl_bytes(DOCS[1:2]))
    (corpus / "linked").symlink_to(elsewhere, target_is_directory=True)
    (corpus / "sub" / "loop").symlink_to(corpus, target_is_directory=True)
    (corpus / "gone.jsonl").symlink_to(tmp_path / "missing.jsonl")
    warnings = []
    files = text_inputs([str(corpus)], warn=warnings.append)
    assert [f.path for f in files] == [str(corpus / "a.jsonl"), str(corpus / "linked" / "b.jsonl")]
    assert warnings == [f"input {corpus}: skipped 1 dangling symbolic link(s), e.g. {corpus / 'gone.jsonl'}"]


@pytest.mark.parametrize("partition_bytes", [1, 7, 50, 333, 10_000])
@pytest.mark.parametrize("batch_bytes", [5, 64, 1 << 20])
def test_byte_range_partitions_read_every_line_once(tmp_path, partition_bytes, batch_bytes):
    lines = [f"line {i} " + "x" * (i * 7 % 23) for i in range(200)]
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(lines) + "\n")
    texts, log = read_all(path, partition_bytes=partition_bytes, batch_bytes=batch_bytes)
    assert texts == lines
    assert log.read == len(lines)


def test_partitions_depend_on_input_not_workers(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_bytes(jsonl_bytes(DOCS * 50))
    files = text_inputs([str(path)])
    parts = cut_partitions(files, 1000, "line")
    assert [(p.pieces[0].start, p.pieces[0].end) for p in parts][:2] == [(0, 1000), (1000, 2000)]
    assert all(len(p.pieces) == 1 for p in parts) and parts[-1].pieces[0].end == path.stat().st_size
    # Compressed files cannot be split.
    gz = tmp_path / "big.jsonl.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert len(cut_partitions(text_inputs([str(gz)]), 1000, "line")) == 1


def test_small_files_are_grouped_into_partitions_of_about_the_partition_size(tmp_path):
    """Issue 14: every file was its own partition, each dropping its own partial last row."""
    for i in range(30):
        (tmp_path / f"f{i:02d}.jsonl").write_bytes(jsonl_bytes([f"document {i:02d} " * 20]))
    files = text_inputs([str(tmp_path)])
    size = files[0].size
    parts = cut_partitions(files, 10 * size, "line")
    assert [len(p.pieces) for p in parts] == [10, 10, 10]
    assert [piece.input.path for p in parts for piece in p.pieces] == [f.path for f in files]  # input order kept
    texts, _ = read_all(tmp_path, partition_bytes=10 * size)
    assert texts == [f"document {i:02d} " * 20 for i in range(30)]


BAD_JSONL = (
    b'{"text": "good one"}\n'
    b'{"text": broken\n'
    b'{"body": "no text field"}\n'
    b"\n"
    b'{"text": 42}\n'
    b"[1, 2]\n"
    b'{"text": "bad \xff utf8"}\n'
    b'{"text": ""}\n'
    b'{"text": "good two"}\n'
)


def test_bad_records_are_counted_per_reason_with_first_location(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(BAD_JSONL)
    texts, log = read_all(path)
    assert texts == ["good one", "good two"]
    assert log.read == 8  # the blank line is not a record
    assert dict(log.skipped) == {
        "bad_json": 1,
        "missing_field": 1,
        "not_a_string": 1,
        "not_an_object": 1,
        "invalid_utf8": 1,
        "empty_text": 1,
    }
    assert log.first_example["bad_json"].startswith(f"{path}:2: broken JSON")
    assert log.first_example["missing_field"] == f"{path}:3: record has no field 'text' (its fields: body)"
    assert log.first_example["not_a_string"].startswith(f"{path}:5: field 'text' is not a string")
    assert log.first_example["empty_text"] == f"{path}:8: field 'text' is empty"
    assert log.first_example["invalid_utf8"] == f"{path}:7: invalid UTF-8 (invalid start byte)"
    assert log.documents == 2


def test_bad_records_of_whole_json_records_are_counted_per_reason(tmp_path):
    """--records (conversations, pairs) reads each line's whole JSON: the same reasons, whichever
    error type the installed msgspec gives for invalid UTF-8 (0.23 changed it)."""
    path = tmp_path / "bad.jsonl"
    path.write_bytes(BAD_JSONL + b'{"text": "deep", "x": ' + b"[" * 100_000 + b"\n")
    texts, log = read_all(path, records=True)
    assert [json.loads(t).get("text") for t in texts] == ["good one", None, 42, "", "good two"]
    assert log.read == 9
    assert dict(log.skipped) == {"bad_json": 2, "not_an_object": 1, "invalid_utf8": 1}
    assert log.first_example["bad_json"].startswith(f"{path}:2: broken JSON")
    assert log.first_example["invalid_utf8"] == f"{path}:7: invalid UTF-8 (invalid start byte)"


def test_line_numbers_in_a_later_byte_range_partition(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(jsonl_bytes(["ok"] * 30) + b"{oops\n" + jsonl_bytes(["ok"] * 5))
    _, log = read_all(path, partition_bytes=100)
    assert log.first_example["bad_json"].startswith(f"{path}:31: broken JSON")


def test_strict_makes_the_first_bad_record_fatal(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(BAD_JSONL)
    with pytest.raises(BadRecord) as error:
        read_all(path, strict=True)
    assert str(error.value).startswith(f"{path}:2: broken JSON")
    assert str(error.value).endswith("fix the JSON on that line or pass without --strict to skip such records")


def test_a_file_where_no_record_has_the_key_is_an_error(tmp_path):
    path = tmp_path / "wrong.jsonl"
    path.write_bytes(jsonl_bytes(DOCS, key="content"))
    with pytest.raises(ObjcliError) as error:
        read_all(path)
    assert str(error.value) == (
        f"input {path}: no record has the field 'text' (fields of the first record: content, id); "
        "choose the text field with --text-key"
    )
    assert read_all(path, text_key="content")[0] == DOCS


def test_invalid_utf8_in_text_lines(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"fine\nbad \xc3\x28 bytes\nfine again\n")
    texts, log = read_all(path)
    assert texts == ["fine", "fine again"]
    assert log.first_example["invalid_utf8"].startswith(f"{path}:2: invalid UTF-8")


def test_truncated_gzip_is_a_clear_error(tmp_path):
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(gzip.compress(jsonl_bytes(DOCS * 100))[:-30])
    with pytest.raises(ObjcliError, match=r"corrupt or truncated gzip .*re-create or remove the file"):
        read_all(path)


def test_a_zstd_file_cut_inside_its_frame_is_one_line_when_its_format_is_sniffed(tmp_path):
    """Its first bytes are read to tell its format: a frame cut short there is ZstdError, no OSError."""
    import zstandard

    path = tmp_path / "cut.zst"  # no inner suffix: the format comes from the content
    path.write_bytes(zstandard.ZstdCompressor().compress(jsonl_bytes(DOCS * 20))[:24])
    with pytest.raises(ObjcliError, match=r"cut\.zst: corrupt compressed data \(the data ends inside a zstd frame\)"):
        text_inputs([str(path)])


def test_inputs_folders_globs_and_missing_paths(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.jsonl").write_bytes(jsonl_bytes(["b"]))
    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / "notes.md").write_text("not data\n")
    (tmp_path / ".hidden.txt").write_text("hidden\n")
    found = [f.path for f in text_inputs([str(tmp_path)])]
    assert found == [str(tmp_path / "a.txt"), str(tmp_path / "sub" / "b.jsonl")]
    assert [f.path for f in text_inputs([str(tmp_path / "**" / "*.jsonl")])] == [str(tmp_path / "sub" / "b.jsonl")]
    with pytest.raises(ObjcliError, match=r"input .*nope\.jsonl: no such file or directory; check the path"):
        text_inputs([str(tmp_path / "nope.jsonl")])
    with pytest.raises(ObjcliError, match="the pattern matches no file"):
        text_inputs([str(tmp_path / "*.parquet")])


def test_stdin_is_sniffed_and_decompressed(monkeypatch):
    data = gzip.compress(jsonl_bytes(DOCS))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(data))))
    partition = Partition(0, (Piece(InputFile("-", "auto", None, None)),))
    log = RecordLog()
    texts = [t for batch in read_documents(partition, ReadOptions(), log) for t in batch]
    assert texts == DOCS


def test_empty_texts_are_named_by_their_line_in_a_block_that_decodes_whole(tmp_path):
    """Empty texts in an otherwise good block are located without decoding any line again: the k-th
    record is the k-th non-blank line (blank lines, at the start too, are no records)."""
    lines = ["", '{"text": "a"}', '{"text": ""}', "  ", '{"text": "b"}', "", '{"text": ""}', '{"text": "c"}']
    path = tmp_path / "empty.jsonl"
    path.write_text("\n".join(lines) + "\n")
    texts, log = read_all(path, text_key="text")
    assert texts == ["a", "b", "c"] and log.read == 5 and log.skipped == {"empty_text": 2}
    assert log.first_example["empty_text"] == f"{path}:3: field 'text' is empty"


@given(st.binary(max_size=4096) | st.lists(st.sampled_from([b"\n", b"\r\n", b"x", b"\xe2\x9c\x93", b""])).map(b"".join))
def test_count_newlines_agrees_with_bytes_count(data):
    """Every block's lines are counted with NumPy (line numbers in errors and provenance rest on it)."""
    assert count_newlines(data) == data.count(b"\n")


def test_a_folder_holding_inputs_and_an_objcli_output_reads_the_inputs_and_leaves_the_output_out(tmp_path):
    """The user's .jsonl beside an output (even inside an output folder) is read; the output's manifest,
    shards, format files and split folders never are, and the warning says which output was left out."""
    from runs import SAMPLE, run_cli

    folder = tmp_path / "data"
    folder.mkdir()
    lines = (SAMPLE / "prose.jsonl").read_text().splitlines(keepends=True)
    (folder / "mine.jsonl").write_text("".join(lines[:30]))
    for fmt in ("hf", "megatron"):
        out = folder / f"out-{fmt}"
        split = ["--split", "validation=0.2"] if fmt == "hf" else []
        made = run_cli("transform", folder / "mine.jsonl", "-t", SAMPLE / "tokenizer.model", "--format", fmt,
                       *split, "--seq-len", "64", "-o", out, "-q")  # fmt: skip
        assert made.returncode == 0, made.stderr
        (out / "notes.jsonl").write_text("".join(lines[30:35]))  # the user's own file inside the output
    warnings = []
    files = text_inputs([str(folder)], warn=warnings.append)
    assert sorted(f.path.removeprefix(str(folder) + "/") for f in files) == [
        "mine.jsonl",
        "out-hf/notes.jsonl",
        "out-megatron/notes.jsonl",
    ]
    assert any("left out the objcli output in" in w for w in warnings)
    (folder / "mine.jsonl").unlink()
    (folder / "out-hf" / "notes.jsonl").unlink()
    (folder / "out-megatron" / "notes.jsonl").unlink()
    with pytest.raises(ObjcliError, match="holds no .parquet, .jsonl, .ndjson"):
        text_inputs([str(folder)])
