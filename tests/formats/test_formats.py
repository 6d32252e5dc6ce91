"""Formats of whole token documents, read back by the clients trainers use: Megatron's indexed dataset
(documented layout: megatron-core needs torch, which the test extra does not install), a header-less
token file through ``np.memmap`` (nanoGPT, OLMo/dolma), llm.c's header as its ``dataloader.h`` reads
it, and datatrove's ``.ds`` files through datatrove's own merger readers."""

import json

import numpy as np
import pytest
from runs import manifest_json, run_transform

from objcli.formats.flat import LLMC_MAGIC, LlmcWriter
from objcli.formats.megatron import read_megatron_index
from objcli.rows import ColumnSpec, Ragged, RowBatch
from objcli.tokenizers import open_tokenizer


@pytest.fixture(scope="module")
def documents(small_corpus, sample_tokenizer):
    """Every document of the corpus as the tokenizer encodes it, with EOS (clm's default)."""
    tokenizer = open_tokenizer(sample_tokenizer)
    texts = [json.loads(line)["text"] for line in (small_corpus / "prose.jsonl").read_text().splitlines()]
    eos = tokenizer.resolve("eos")
    return [[*tokenizer.encode([t], 1)[0].tolist(), eos] for t in texts]


def _run(small_corpus, sample_tokenizer, folder, fmt):
    run_transform(
        [small_corpus / "prose.jsonl"], sample_tokenizer, folder, output_format=fmt, seq_len=64, shard_size="20KB"
    )
    return manifest_json(folder)


def test_megatron_keeps_every_document_whole_with_its_eos(small_corpus, sample_tokenizer, documents, tmp_path):
    """Issue 15: with --packing none, a document longer than --seq-len became several Megatron documents,
    only the last with EOS. Now each document is one sequence, in files named as Megatron names them."""
    manifest = _run(small_corpus, sample_tokenizer, tmp_path, "megatron")
    assert manifest["config"]["packing"] == "none" and any(len(d) > 64 for d in documents)
    sequences = []
    for shard in manifest["shards"]:
        bin_name, idx_name = shard["files"]
        assert bin_name.endswith("_input_ids_document.bin") and idx_name.endswith("_input_ids_document.idx")
        dtype, lengths, offsets, document_index = read_megatron_index(tmp_path / idx_name)
        data = np.fromfile(tmp_path / bin_name, dtype=dtype)
        sequences += [data[a : a + n].tolist() for n, a in zip(lengths, offsets[:-1])]
        assert document_index.tolist() == list(range(len(lengths) + 1))  # a document a sequence
    assert sequences == documents
    lines = (tmp_path / "megatron.txt").read_text().split("\n")[:-1]
    assert [int(line.split()[0]) for line in lines] == [s["tokens"] for s in manifest["shards"]]
    for line in lines:  # each prefix names a .bin/.idx pair, relative to the output folder
        prefix = line.split()[1]
        assert (tmp_path / f"{prefix}.bin").exists() and (tmp_path / f"{prefix}.idx").exists()


def test_flat_tokens_read_with_np_memmap(small_corpus, sample_tokenizer, documents, tmp_path):
    manifest = _run(small_corpus, sample_tokenizer, tmp_path, "tokens")
    dtype = manifest["columns"][0]["disk_dtype"]
    assert dtype == "uint16" and [c["name"] for c in manifest["columns"]] == ["input_ids"]
    read = []
    for shard in manifest["shards"]:
        data = np.memmap(tmp_path / shard["files"][0], dtype=np.uint16, mode="r")  # nanoGPT's get_batch
        offsets = np.load(tmp_path / shard["files"][1])
        assert offsets[-1] == len(data)
        read += [data[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])]
    assert read == documents


def test_llmc_header_as_its_dataloader_reads_it(small_corpus, sample_tokenizer, documents, tmp_path):
    manifest = _run(small_corpus, sample_tokenizer, tmp_path, "llmc")
    stream = []
    for shard in manifest["shards"]:
        raw = (tmp_path / shard["files"][0]).read_bytes()
        header = np.frombuffer(raw[:1024], dtype="<i4")
        assert (header[0], header[1]) == (20240520, 1)  # GPT-2 layout: uint16 tokens
        tokens = np.frombuffer(raw[1024:], dtype="<u2")
        assert header[2] == len(tokens) == shard["tokens"]
        stream += tokens.tolist()
    assert stream == [t for d in documents for t in d]


def test_llmc_takes_uint32_and_llama3s_header_for_a_large_vocabulary(tmp_path):
    spec = ColumnSpec("input_ids", "ragged", 0, 128_255, "token ids")
    writer = LlmcWriter(tmp_path / "shard", [spec])
    values = np.array([5, 128_000, 70_000, 2], dtype=np.int32)
    writer.write(
        RowBatch({"input_ids": Ragged(values, np.array([0, 3, 4]))}, np.array([3, 1]), np.zeros(2), np.ones(2))
    )
    (path, digest), (offsets_path, _) = writer.close()
    header = np.fromfile(path, dtype="<i4", count=3)
    assert tuple(header[:2]) == LLMC_MAGIC[np.dtype(np.uint32)] == (20240801, 7) and header[2] == 4
    assert np.fromfile(path, dtype="<u4", offset=1024).tolist() == values.tolist()
    assert np.load(offsets_path).tolist() == [0, 3, 4]
    import hashlib

    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()


def test_nanoset_read_by_datatroves_own_readers(small_corpus, sample_tokenizer, documents, tmp_path):
    merger = pytest.importorskip("datatrove.pipeline.tokens.merger")
    manifest = _run(small_corpus, sample_tokenizer, tmp_path, "nanoset")
    read = []
    for shard in manifest["shards"]:
        ds = tmp_path / shard["files"][0]
        ends = merger.load_doc_ends(open(f"{ds}.index", "rb"))
        read += [np.frombuffer(b, dtype="<u2").tolist() for b in merger.get_data_reader(open(ds, "rb"), ends, 2)]
        name, count = (tmp_path / f"{shard['files'][0]}.metadata").read_text().split("\n")[:2]
        assert name == "objcli|2" and int(count) == shard["tokens"]
    assert read == documents


def test_flat_formats_take_whole_documents_only(small_corpus, sample_tokenizer, tmp_path):
    from objcli.errors import ObjcliError

    with pytest.raises(ObjcliError, match="--format llmc writes whole documents back to back"):
        run_transform(
            [small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path, output_format="llmc", packing="concat"
        )


@pytest.mark.parametrize("objective, extra", [("clm", {}), ("nsp", {})])
def test_hf_folder_opens_with_load_from_disk(small_corpus, sample_tokenizer, tmp_path, objective, extra):
    """Issue 15: the output folder was not a datasets saved dataset. --format hf writes state.json and
    dataset_info.json beside the shards, features declared at each column's width (issue 73: uint16 ids)."""
    datasets = pytest.importorskip("datasets")
    import pyarrow as pa

    run_transform(
        [small_corpus / "prose.jsonl"],
        sample_tokenizer,
        tmp_path / "hf",
        output_format="hf",
        objective=objective,
        seq_len=64,
        shard_size="20KB",
        **extra,
    )
    run_transform(
        [small_corpus / "prose.jsonl"],
        sample_tokenizer,
        tmp_path / "arrow",
        objective=objective,
        seq_len=64,
        shard_size="20KB",
        **extra,
    )
    loaded = datasets.load_from_disk(str(tmp_path / "hf"))
    arrow = pa.concat_tables(
        pa.ipc.open_stream(str(p)).read_all() for p in sorted((tmp_path / "arrow").glob("*.arrow"))
    )
    assert loaded.num_rows == arrow.num_rows and loaded.column_names == arrow.column_names
    assert loaded.to_dict() == arrow.to_pydict()
    manifest = manifest_json(tmp_path / "hf")
    for column in manifest["columns"]:
        feature = loaded.features[column["name"]]
        width = column["disk_dtype"]
        assert width in ("uint8", "uint16", "int8", "int16")  # a 32k vocabulary, rows of 64: narrow
        length = f", length={column['length']}" if column.get("length") else ""  # a fixed-size list
        expected = width if column["kind"] == "scalar" else f"List(Value('{width}'){length})"
        assert (feature.dtype if column["kind"] == "scalar" else repr(feature)) == expected
        if column["kind"] == "fixed" and "length" in column:  # each row that long, as datasets reads it
            assert {len(row) for row in loaded[column["name"]]} == {column["length"]}


def test_megatron_gets_one_data_args_file_per_split(small_corpus, sample_tokenizer, tmp_path):
    """With --split, megatron.txt lists only train shards (a held-out split never trains) and
    megatron-validation.txt the validation ones, for --valid-data-path."""
    run_transform(
        [small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path, output_format="megatron", split="validation=10%"
    )
    manifest = manifest_json(tmp_path)
    for name, split in (("megatron.txt", "train"), ("megatron-validation.txt", "validation")):
        prefixes = [line.split()[1] for line in (tmp_path / name).read_text().splitlines()]
        expected = [s["files"][0].removesuffix(".bin") for s in manifest["shards"] if s["split"] == split]
        assert prefixes == expected and all(p.startswith(f"{split}-") for p in prefixes)


@pytest.mark.parametrize("rows, split", [(100, None), (37, "validation=10%")])
def test_megatron_prefixes_are_as_few_as_the_shard_size_says(rows, split, sample_dir, sample_tokenizer, tmp_path):
    """--shard-size in rows over many partitions: each split's prefixes hold exactly that many rows (the last
    the rest), cut between rows where a partition ends inside one; the rows, their provenance and every
    count equal a run of one partition's, and verify passes."""
    import math

    from objcli.commands.verify import verify_output
    from objcli.reading import Rows

    corpus = sample_dir / "prose.jsonl"
    options = {"output_format": "megatron", "shard_size": str(rows), "provenance": True}
    options |= {"split": split} if split else {}
    run_transform([corpus], sample_tokenizer, tmp_path / "many", partition_size="100KiB", **options)
    run_transform([corpus], sample_tokenizer, tmp_path / "one", partition_size="64MiB", shard_size="1000000",
                  **{k: v for k, v in options.items() if k != "shard_size"})  # fmt: skip
    many, one = manifest_json(tmp_path / "many"), manifest_json(tmp_path / "one")
    assert len({s["partition"] for s in many["shards"]}) > 3
    for name in ("train", "validation") if split else ("",):
        counts = [s["rows"] for s in many["shards"] if s.get("split", "") == name]
        total = sum(counts)
        assert len(counts) == math.ceil(total / rows) and all(c == rows for c in counts[:-1]), counts
        mine, theirs = Rows(tmp_path / "many", name or None), Rows(tmp_path / "one", name or None)
        assert [r["input_ids"].tolist() for r in mine] == [r["input_ids"].tolist() for r in theirs]
    for key in ("rows", "tokens", "padding_tokens"):
        assert many["totals"][key] == one["totals"][key] == sum(s[key] for s in many["shards"]), key
    assert sum(s["documents"] for s in many["shards"]) == sum(s["documents"] for s in one["shards"])
    assert verify_output(tmp_path / "many").ok
    from objcli.formats.provenance import provenance_file, read_provenance
    from objcli.storage.shard_info import ShardRecord

    def spans(folder, manifest):
        found = []
        for shard in manifest["shards"]:
            record = ShardRecord(**{k: v for k, v in shard.items() if k in ShardRecord.__struct_fields__})
            records = read_provenance(folder / provenance_file(record), shard["rows"], [])["__p_record"]
            found += [tuple(records.values[a:b]) for a, b in zip(records.offsets[:-1], records.offsets[1:])]
        return found

    assert spans(tmp_path / "many", many) == spans(tmp_path / "one", one)
