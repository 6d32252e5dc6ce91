"""The real sample tokenizer, real corpora, every output format read back by real readers."""

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sentencepiece as spm
from readback import expected_documents, expected_stream, megatron_read
from runs import folder_bytes, manifest_json, read_output, run_cli, run_transform


def test_arrow_rows_are_the_token_stream_cut_into_rows(small_corpus, sample_tokenizer, tmp_path):
    files = [small_corpus / "prose.jsonl", small_corpus / "code.jsonl"]
    summary = run_transform(files, sample_tokenizer, tmp_path / "out", seq_len=256, shard_size="40")
    manifest = manifest_json(tmp_path / "out")
    stream = expected_stream(expected_documents(files), sample_tokenizer)

    rows = []
    for shard in manifest["shards"]:
        with pa.ipc.open_stream(pa.memory_map(str(tmp_path / "out" / shard["files"][0]))) as reader:
            table = reader.read_all()
        assert table.num_rows == shard["rows"] <= 40
        rows += table.column("input_ids").to_pylist()
        for segs, pos in zip(table.column("segment_ids").to_pylist(), table.column("position_ids").to_pylist()):
            assert segs[0] == 1 and pos[0] == 0
    assert all(len(r) == 256 for r in rows)
    # One partition: the two files together are smaller than --partition-size, so they are grouped and
    # the stream runs on from one file into the next, dropping one remainder at the end.
    assert len(manifest["partitions"]) == 1 and len(manifest["partitions"][0]["pieces"]) == 2
    flat = [t for r in rows for t in r]
    assert flat == stream[: len(flat)] and len(stream) - len(flat) < 256
    totals = summary.totals
    assert totals["rows"] == len(rows) and totals["tokens"] == 256 * len(rows)
    assert totals["documents_read"] == totals["documents_written"] + totals["documents_skipped"]
    assert sum(s["documents"] for s in manifest["shards"]) == totals["documents_written"]


def test_arrow_loads_in_hugging_face_datasets(small_corpus, sample_tokenizer, tmp_path):
    datasets = pytest.importorskip("datasets")
    run_transform([small_corpus], sample_tokenizer, tmp_path / "out", seq_len=128, text_unit="paragraph")
    manifest = manifest_json(tmp_path / "out")
    first = tmp_path / "out" / manifest["shards"][0]["files"][0]
    dataset = datasets.Dataset.from_file(str(first))
    assert dataset.num_rows == manifest["shards"][0]["rows"]
    assert len(dataset[0]["input_ids"]) == 128
    assert dataset.column_names == ["input_ids", "segment_ids", "position_ids"]


def test_parquet_read_by_pyarrow_and_datasets(small_corpus, sample_tokenizer, tmp_path):
    datasets = pytest.importorskip("datasets")
    run_transform([small_corpus], sample_tokenizer, tmp_path / "pq", seq_len=128, output_format="parquet")
    run_transform([small_corpus], sample_tokenizer, tmp_path / "ar", seq_len=128)
    pq_manifest, ar_manifest = manifest_json(tmp_path / "pq"), manifest_json(tmp_path / "ar")
    pq_rows = (
        pa.concat_tables([pq.read_table(tmp_path / "pq" / s["files"][0]) for s in pq_manifest["shards"]])
        .column("input_ids")
        .to_pylist()
    )
    ar_rows = (
        pa.concat_tables(
            [
                pa.ipc.open_stream(pa.memory_map(str(tmp_path / "ar" / s["files"][0]))).read_all()
                for s in ar_manifest["shards"]
            ]
        )
        .column("input_ids")
        .to_pylist()
    )
    assert pq_rows == ar_rows
    assert (
        pq.ParquetFile(tmp_path / "pq" / pq_manifest["shards"][0]["files"][0])
        .metadata.row_group(0)
        .column(0)
        .compression
        == "ZSTD"
    )
    loaded = datasets.load_dataset(
        "parquet", data_files=[str(tmp_path / "pq" / s["files"][0]) for s in pq_manifest["shards"]], split="train"
    )
    assert loaded["input_ids"] == pq_rows


def test_npy_shards_are_2d_uint16_and_match_arrow(small_corpus, sample_tokenizer, tmp_path):
    run_transform([small_corpus], sample_tokenizer, tmp_path / "npy", seq_len=64, output_format="npy", shard_size="100")
    run_transform([small_corpus], sample_tokenizer, tmp_path / "ar", seq_len=64, shard_size="100")
    manifest = manifest_json(tmp_path / "npy")
    arrays = []
    for shard in manifest["shards"]:
        assert sorted(shard["files"]) == sorted(
            shard["files"][0].split(".")[0] + f".{c}.npy" for c in ("input_ids", "segment_ids", "position_ids")
        )
        prefix = shard["files"][0].split(".")[0]
        array = np.load(tmp_path / "npy" / f"{prefix}.input_ids.npy", mmap_mode="r")
        assert array.dtype == np.uint16 and array.shape == (shard["rows"], 64)
        arrays.append(np.asarray(array))
    ar_manifest = manifest_json(tmp_path / "ar")
    arrow_rows = [
        r
        for s in ar_manifest["shards"]
        for r in pa.ipc.open_stream(pa.memory_map(str(tmp_path / "ar" / s["files"][0])))
        .read_all()
        .column("input_ids")
        .to_pylist()
    ]
    assert np.concatenate(arrays).tolist() == arrow_rows


def test_megatron_one_document_per_sequence(small_corpus, sample_tokenizer, tmp_path):
    files = [small_corpus / "prose.jsonl"]
    run_transform(files, sample_tokenizer, tmp_path / "meg", seq_len=100_000, output_format="megatron", packing="none")
    manifest = manifest_json(tmp_path / "meg")
    assert len(manifest["shards"]) == 1
    prefix = tmp_path / "meg" / manifest["shards"][0]["files"][0].removesuffix(".bin")
    version, code, sequences, doc_index = megatron_read(prefix)
    texts = expected_documents(files)
    sp = spm.SentencePieceProcessor(model_file=sample_tokenizer)
    assert version == 1 and code == 8  # uint16: the 8,000-piece model fits
    assert sequences == [sp.encode(t) + [sp.eos_id()] for t in texts]
    assert doc_index == list(range(len(texts) + 1))


def test_packing_none_splits_long_documents(small_corpus, sample_tokenizer, tmp_path):
    files = [small_corpus / "code.jsonl"]
    summary = run_transform(files, sample_tokenizer, tmp_path / "out", seq_len=512, packing="none")
    manifest = manifest_json(tmp_path / "out")
    table = pa.ipc.open_stream(pa.memory_map(str(tmp_path / "out" / manifest["shards"][0]["files"][0]))).read_all()
    rows = table.column("input_ids").to_pylist()
    assert all(1 <= len(r) <= 512 for r in rows)
    assert [t for r in rows for t in r] == expected_stream(expected_documents(files), sample_tokenizer)
    assert summary.totals["documents_split"] == 4  # every code file is longer than 512 tokens
    assert summary.totals["padding_tokens"] == 0


def test_remainder_pad_keeps_every_document(small_corpus, sample_tokenizer, tmp_path):
    files = [small_corpus / "prose.jsonl"]
    summary = run_transform(files, sample_tokenizer, tmp_path / "out", seq_len=1000, remainder="pad")
    t = summary.totals
    assert t["documents_skipped"] == 0 and t["documents_written"] == t["documents_read"] == 120
    stream = expected_stream(expected_documents(files), sample_tokenizer)
    assert t["tokens"] == len(stream)
    assert t["padding_tokens"] == -len(stream) % 1000
    special = manifest_json(tmp_path / "out")["special_tokens"]
    assert special["ids"]["pad"] == 3 and special["added"] == {}


def test_accounting_with_bad_records_in_manifest(tmp_path, sample_tokenizer):
    corpus = tmp_path / "bad.jsonl"
    good = [json.dumps({"text": f"Document number {i} is fine."}) for i in range(50)]
    lines = good[:10] + ['{"text": broken'] + good[10:30] + ['{"other": 1}', '{"text": 7}'] + good[30:]
    corpus.write_text("\n".join(lines) + "\n")
    summary = run_transform([corpus], sample_tokenizer, tmp_path / "out", seq_len=16)
    t = summary.totals
    assert t["documents_read"] == 53
    assert t["skipped_by_reason"]["bad_json"] == 1
    assert t["skipped_by_reason"]["missing_field"] == 1
    assert t["skipped_by_reason"]["not_a_string"] == 1
    assert t["documents_read"] == t["documents_written"] + t["documents_skipped"]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    partition = manifest["partitions"][0]
    assert partition["documents_read"] == partition["documents_written"] + partition["documents_skipped"]


def test_stdin_to_stdout_pipe(small_corpus, sample_tokenizer, tmp_path):
    data = (small_corpus / "prose.jsonl").read_bytes()
    run = subprocess.run(
        [sys.executable, "-m", "objcli", "transform", "-", "-t", sample_tokenizer, "--seq-len", "64", "-o", "-"],
        input=data,
        capture_output=True,
        check=True,
    )
    table = pa.ipc.open_stream(pa.py_buffer(run.stdout)).read_all()
    stream = expected_stream(expected_documents([small_corpus / "prose.jsonl"]), sample_tokenizer)
    assert table.num_rows == len(stream) // 64
    assert [t for r in table.column("input_ids").to_pylist() for t in r] == stream[: table.num_rows * 64]
    assert b"documents read" in run.stderr


def test_a_folder_of_small_files_loses_almost_nothing(sample_tokenizer, tmp_path):
    """Issue 14: 168 files of about 30 KB (5 MB, as the issue's folder of Python sources), one partition
    per file, dropped 12.6 % of all tokens at --seq-len 2048 and wrote 129 shards. Grouped into
    partitions of --partition-size, it now drops less than 0.1 % and writes at most 2 shards."""
    import json

    from runs import SAMPLE

    records = [
        json.loads(line) for name in ("prose.jsonl", "code.jsonl") for line in (SAMPLE / name).read_text().splitlines()
    ]
    folder = tmp_path / "files"
    folder.mkdir()
    per_file = -(-len(records) * 5 // 168)
    stream = records * 5  # the sample data five times over, to reach the 5 MB
    for i in range(168):
        chunk = stream[i * per_file : (i + 1) * per_file]
        (folder / f"file{i:03d}.jsonl").write_text("".join(json.dumps({"text": r["text"]}) + "\n" for r in chunk))
    summary = run_transform([folder], sample_tokenizer, tmp_path / "out", seq_len=2048)
    totals = summary.totals
    dropped = totals.get("tokens_dropped", 0)
    assert dropped / (totals["tokens"] + dropped) < 0.001 and totals["shards"] <= 2
    assert totals["documents_read"] == totals["documents_written"] + totals["documents_skipped"] == len(stream)


def test_shuffle_documents_permutes_within_windows_whatever_the_workers(small_corpus, sample_tokenizer, tmp_path):
    """Issue 14: --shuffle-documents permutes the documents of each window of a partition, keyed to the
    seed and the data position: the same documents, another order, the same bytes for 1 and 2 workers."""
    from objcli.kernels.rng import derive_rng
    from objcli.order.document_windows import shuffled_windows

    common = {"packing": "none", "seq_len": 1 << 20, "partition_size": "16KiB"}
    run_transform([small_corpus], sample_tokenizer, tmp_path / "plain", **common)
    for workers in (1, 2):
        run_transform(
            [small_corpus],
            sample_tokenizer,
            tmp_path / f"shuffled{workers}",
            workers=workers,
            shuffle_documents="8KB",
            **common,
        )
    assert folder_bytes(tmp_path / "shuffled1") == folder_bytes(tmp_path / "shuffled2")
    plain, shuffled = (
        read_output(tmp_path / "plain")[1]["input_ids"],
        read_output(tmp_path / "shuffled1")[1]["input_ids"],
    )
    assert sorted(map(tuple, plain)) == sorted(map(tuple, shuffled)) and plain != shuffled
    # Windows never mix: the kernel keeps each window's documents together, in batches of about batch_bytes.
    texts = [f"doc{i:03d}" * (1 + i % 7) for i in range(300)]
    batches = list(shuffled_windows([texts[:150], texts[150:]], 1000, 200, lambda w: derive_rng(0, 0, w, "s")))
    flat = [t for b in batches for t in b]
    assert sorted(flat) == sorted(texts) and flat != texts
    assert set(flat[:150]) == set(texts[:150])  # the first batch alone passes 1000 characters: one window
    assert all(sum(map(len, b[:-1])) < 200 for b in batches)


def test_splits_follow_the_document_not_the_layout(small_corpus, sample_tokenizer, tmp_path):
    """Issue 14: --split sends each document to a split by a hash of its text keyed to the seed: the
    same documents per split whether the corpus is one file or three, read by 1 or 2 workers; no
    document in two splits; shards named so that datasets.load_dataset returns a DatasetDict."""
    import json

    datasets = pytest.importorskip("datasets")
    texts = [json.loads(line)["text"] for line in (small_corpus / "prose.jsonl").read_text().splitlines()]
    one, three = tmp_path / "one", tmp_path / "three"
    one.mkdir()
    three.mkdir()
    (one / "all.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    for i in range(3):
        (three / f"part{i}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[i::3]))
    common = {"packing": "none", "seq_len": 1 << 20, "split": "validation=10%,test=5%"}
    run_transform([one], sample_tokenizer, tmp_path / "a", **common)
    run_transform([three], sample_tokenizer, tmp_path / "b", workers=2, partition_size="16KiB", **common)
    per_split = []
    for out in (tmp_path / "a", tmp_path / "b"):
        loaded = datasets.load_dataset("arrow", data_dir=str(out))
        assert set(loaded) == {"train", "validation", "test"}
        per_split.append({name: sorted(map(tuple, loaded[name]["input_ids"])) for name in loaded})
    assert per_split[0] == per_split[1]
    rows = [r for rows in per_split[0].values() for r in rows]
    assert len(rows) == len(set(rows)) or len(texts) != len(set(texts))  # no document twice
    n = len(texts)
    for name, fraction in (("validation", 0.10), ("test", 0.05)):
        assert abs(len(per_split[0][name]) / n - fraction) < 3 * np.sqrt(fraction * (1 - fraction) / n)
    assert manifest_json(tmp_path / "a")["splits"]["validation"]["rows"] == len(per_split[0]["validation"])


def test_every_split_name_loads_back_by_the_documented_call(small_corpus, sample_tokenizer, tmp_path):
    """Issue 30, item 11: `--split heldout=10%,dev=10%` lost heldout to load_dataset("arrow", data_dir=OUT).
    The output's dataset card names each split's files: load_dataset(OUT) gives every split by its name
    (and load_dataset("arrow", data_dir=OUT) still infers the names it knows)."""
    datasets = pytest.importorskip("datasets")
    run_transform(
        [small_corpus / "prose.jsonl"],
        sample_tokenizer,
        tmp_path / "o",
        packing="none",
        seq_len=1 << 20,
        split="dev=20%,eval=20%,heldout=10%",
    )
    splits = manifest_json(tmp_path / "o")["splits"]
    loaded = datasets.load_dataset(str(tmp_path / "o"))
    assert {name: len(loaded[name]) for name in loaded} == {name: s["rows"] for name, s in splits.items()}
    inferred = datasets.load_dataset("arrow", data_dir=str(tmp_path / "o"))
    assert {"validation": len(inferred["validation"]), "test": len(inferred["test"])} == {
        "validation": splits["dev"]["rows"],
        "test": splits["eval"]["rows"],
    }


def test_a_split_given_as_a_count_has_exactly_that_many_documents(small_corpus, sample_tokenizer, tmp_path):
    """Issue 14: --split test=N takes the N documents of smallest keyed hash over the whole corpus (a
    first pass), the same N whatever the layout and the workers; fractions share the rest."""
    import json

    lines = (small_corpus / "prose.jsonl").read_text().splitlines()
    texts = list(dict.fromkeys(json.loads(line)["text"] for line in lines))  # no copies: the count is exact
    one, three = tmp_path / "one.jsonl", tmp_path / "three"
    one.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    three.mkdir()
    for i in range(3):
        (three / f"part{i}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[i::3]))
    common = {"packing": "none", "seq_len": 1 << 20, "split": "validation=10%,test=25"}
    first = run_transform([one], sample_tokenizer, tmp_path / "a", **common)
    second = run_transform([three], sample_tokenizer, tmp_path / "b", workers=2, partition_size="16KiB", **common)
    for summary in (first, second):
        assert summary.manifest["splits"]["test"]["documents"] == 25
        assert list(summary.manifest["split_bounds"]) == ["test", "validation"]  # counts own the lowest hashes
    by_split = {}
    for out in (tmp_path / "a", tmp_path / "b"):
        manifest, table = read_output(out)
        names = [s["split"] for s in manifest["shards"] for _ in range(s["rows"])]
        by_split[out.name] = {
            n: sorted(map(tuple, (r for r, m in zip(table["input_ids"], names) if m == n)))
            for n in ("train", "validation", "test")
        }
    assert by_split["a"] == by_split["b"]
    assert first.manifest["splits"]["validation"]["documents"] > 0
    # More documents asked than the corpus holds would leave train empty: one line, no output.
    from objcli.errors import ObjcliError

    with pytest.raises(
        ObjcliError,
        match=f"^--split test=100000: the counts ask for 100,000 documents and the corpus "
        f"has {len(lines)}, which would leave none to train",
    ):
        run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path / "c", split="test=100000")


def test_a_count_split_refuses_standard_input(sample_tokenizer, tmp_path):
    done = run_cli(
        "transform",
        "-",
        "-t",
        sample_tokenizer,
        "-o",
        tmp_path / "out",
        "--split",
        "test=10",
        input='{"text": "one"}\n',
    )
    assert done.returncode == 1
    assert done.stderr.startswith("Error: --split test=10: a count needs a first pass over the inputs")


@pytest.mark.parametrize(
    "spec",
    [
        "train=5%",
        "validation=0",
        "validation=5%,validation=1%",
        "a=60%,b=50%",
        "v=x",
        "test=-3",
        "test=1.5",
        ",,",
        "",
        " , ",
        "test=1e-300",
        "validation=0.0000000001",
    ],
)
def test_bad_split_specs_are_one_line_errors(spec):
    from objcli.errors import ObjcliError
    from objcli.order.splits import parse_splits

    with pytest.raises(ObjcliError, match=f"--split {spec}"):
        parse_splits(spec)


def test_a_count_split_that_leaves_no_document_to_train_is_refused(small_corpus, sample_tokenizer, tmp_path):
    """Issue 30: a count equal to the corpus was accepted silently (train empty); one fewer is fine."""
    from objcli.errors import ObjcliError

    documents = sum(1 for line in (small_corpus / "prose.jsonl").read_text().splitlines() if line.strip())
    common = {"packing": "none", "seq_len": 1 << 20}
    with pytest.raises(
        ObjcliError,
        match=f"ask for {documents:,} documents and the corpus has {documents:,}, which would leave none to train",
    ):
        run_transform(
            [small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path / "a", split=f"test={documents}", **common
        )
    summary = run_transform(
        [small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path / "b", split=f"test={documents - 1}", **common
    )
    assert (
        summary.manifest["splits"]["train"]["rows"] == 1 and summary.manifest["splits"]["test"]["rows"] == documents - 1
    )
