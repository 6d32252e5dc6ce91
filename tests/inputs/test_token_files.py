"""Corpora other tools already tokenized, as inputs (issue 52): files written by the real tools
(Megatron-LM's indexed dataset builder, datatrove's DocumentTokenizer, a ``datasets.map``) and by
objcli's own writers read back document for document; derived runs equal the text run's rows where
no randomness is keyed to batches; damaged inputs are one line."""

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from runs import SAMPLE, manifest_json, run_cli, run_transform, token_format_detected

from objcli.commands.verify import verify_output
from objcli.inputs import RecordLog
from objcli.inputs.token_inputs import TOKEN_INPUTS, open_token_file
from objcli.inputs.token_inputs.partitions import token_batches, token_partitions
from objcli.recipe import config_from_values
from objcli.transform import transform

SPM = SAMPLE / "tokenizer.model"
LLAMA = SAMPLE / "llama-style" / "tokenizer.json"
TOKEN_FILES = Path(__file__).resolve().parent.parent / "data" / "token_files"  # made by the real tools
TEXTS = [json.loads(line)["text"] for line in (SAMPLE / "prose.jsonl").read_text().splitlines()[:120]]


def _run(inputs, out, tokenizer=SPM, **values):
    return run_transform(inputs, tokenizer, out, **values)


def _rows(folder) -> pa.Table:
    return pa.concat_tables(
        [
            pa.ipc.open_stream(pa.memory_map(str(folder / s["files"][0]))).read_all()
            for s in manifest_json(folder)["shards"]
        ]
    )


def _documents(path, fmt, eos, vocab=1 << 20, batch=1 << 20) -> list[list[int]]:
    """Every document an input gives objcli's reader, as lists of ids."""
    from objcli.inputs.pieces import InputFile

    log, found = RecordLog(), []
    for partition in token_partitions(InputFile(str(path), fmt, None, 0), 1 << 16, "input_ids"):
        for docs in token_batches(partition, "input_ids", batch, log, eos, vocab):
            found += [docs.tokens[a:b].tolist() for a, b in zip(docs.offsets[:-1], docs.offsets[1:])]
    return found


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tokenized")
    (folder / "prose.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    return folder


@pytest.mark.parametrize(
    "fmt, given", [("megatron", "prefix"), ("nanoset", ".ds"), ("llmc", ".bin"), ("tokens", ".bin")]
)
def test_objclis_own_token_files_read_back_as_the_text_runs_documents(fmt, given, corpus, tmp_path):
    """clm written by objcli (each document + EOS), read as input: clm rows equal the text run's."""
    _run([corpus / "prose.jsonl"], tmp_path / "written", output_format=fmt)
    files = sorted(p for p in (tmp_path / "written").iterdir() if p.name.startswith("part-"))
    inputs = sorted({str(p).removesuffix(".bin").removesuffix(".idx") for p in files if p.suffix in (".bin", ".idx")})
    if given != "prefix":
        inputs = [str(p) for p in files if p.name.endswith(given)]
    text = _run([corpus / "prose.jsonl"], tmp_path / "text", seq_len=96, partition_size="1GiB")
    derived = _run(inputs, tmp_path / "derived", seq_len=96, partition_size="1GiB")
    assert _rows(tmp_path / "text").equals(_rows(tmp_path / "derived"))
    assert derived.totals["documents_written"] == text.totals["documents_written"] == len(TEXTS)
    assert derived.manifest["inputs"][0]["format"] == {"nanoset": "datatrove", "tokens": "nanogpt"}.get(fmt, fmt)


@pytest.mark.parametrize("objective", ["span-corruption", "mlm", "ul2"])
def test_randomized_objectives_from_token_files_are_deterministic_and_verify(objective, corpus, tmp_path):
    """Their draws are keyed to batches, which a token file cuts by tokens and text by characters: not
    the text run's rows, but the same rows whatever the workers, and every invariant holds."""
    _run([corpus / "prose.jsonl"], tmp_path / "written", output_format="megatron")
    prefix = str(next((tmp_path / "written").glob("*.idx"))).removesuffix(".idx")
    values = {"inputs": [prefix], "tokenizer": str(SPM), "objective": objective, "seq_len": 96}
    for workers, out in ((1, "one"), (2, "two")):
        transform(
            config_from_values({**values, "output": str(tmp_path / out), "partition_size": "32KiB"}), workers=workers
        )
        assert verify_output(tmp_path / out).ok
    assert _rows(tmp_path / "one").equals(_rows(tmp_path / "two"))


def test_megatron_lms_preprocess_data_files_read_as_megatron_reads_them(tmp_path):
    """Written by Megatron-LM's own tools/preprocess_data.py (tests/data/token_files/README.md):
    without and with --append-eod and --split-sentences. Each document's ids are what Megatron's
    reader gives (the EOD off: the objective adds its own) and, whole documents, SentencePiece's ids
    of the text; clm from the file is the text run's rows, byte for byte."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(SPM))
    texts = [json.loads(line)["text"] for line in (TOKEN_FILES / "corpus.jsonl").read_text().splitlines()]
    for name, eod, split in [("plain_text_document", False, False), ("corpus_text_document", True, False),
                             ("corpus_text_sentence", True, True)]:  # fmt: skip
        prefix = TOKEN_FILES / name
        read = _documents(prefix, "megatron", sp.eos_id())
        assert read == _megatron_documents(prefix, eod) and len(read) == len(texts), name
        if not split:
            assert read == [sp.encode(t) for t in texts], name
        assert (open_token_file(str(prefix), "megatron").sentences is not None) == split
    text = _run([TOKEN_FILES / "corpus.jsonl"], tmp_path / "text", seq_len=96)
    derived = _run([TOKEN_FILES / "corpus_text_document.bin"], tmp_path / "derived", seq_len=96)
    assert _rows(tmp_path / "text").equals(_rows(tmp_path / "derived"))
    assert derived.totals["documents_written"] == text.totals["documents_written"] == len(texts)
    nsp = _run([TOKEN_FILES / "corpus_text_sentence"], tmp_path / "nsp", objective="nsp", seq_len=128)
    assert nsp.totals["rows"] > 0 and verify_output(tmp_path / "nsp").ok
    refused = run_cli(
        "transform", TOKEN_FILES / "corpus_text_document", "-t", SPM, "--objective", "nsp", "-o", tmp_path / "x"
    )
    assert refused.returncode == 1 and "--split-sentences" in refused.stderr


def _megatron_documents(prefix: Path, eod: bool) -> list[list[int]]:
    """The documents as Megatron-LM's own reader gives them (megatron-core, the bench extra), else as
    its index file says byte for byte (the format: megatron/core/datasets/indexed_dataset.py)."""
    try:
        from megatron.core.datasets.indexed_dataset import IndexedDataset
    except ImportError:
        IndexedDataset = None  # noqa: N806
    if IndexedDataset is not None:
        theirs = IndexedDataset(str(prefix))
        bounds, sequence = theirs.document_indices, theirs.__getitem__
    else:
        idx = Path(f"{prefix}.idx").read_bytes()
        count, entries = struct.unpack("<QQ", idx[18:34])
        sizes = np.frombuffer(idx, "<i4", count, 34)
        bounds = np.frombuffer(idx, "<i8", entries, 34 + 12 * count)
        flat, starts = np.fromfile(f"{prefix}.bin", "<u2"), np.concatenate([[0], np.cumsum(sizes)])
        sequence = lambda k: flat[starts[k] : starts[k + 1]]  # noqa: E731
    documents = []
    for d in range(len(bounds) - 1):
        ids = np.concatenate([sequence(int(s)) for s in range(bounds[d], bounds[d + 1])]).tolist()
        documents.append(ids[:-1] if eod else ids)
    return documents


def test_datatroves_document_tokenizer_files(tmp_path):
    """Written by datatrove's DocumentTokenizer (make_token_files.py): its index's documents, the EOS
    it appends off, are the tokenizer's ids of each text; clm from them is the text run's."""
    from tokenizers import Tokenizer

    ds = TOKEN_FILES / "corpus_unshuffled.ds"
    assert token_format_detected(str(ds), "auto") == "datatrove"
    texts = [json.loads(line)["text"] for line in (TOKEN_FILES / "corpus.jsonl").read_text().splitlines()]
    tokenizer = Tokenizer.from_file(str(LLAMA))
    eos = tokenizer.token_to_id("<|end_of_text|>")
    assert _documents(ds, "datatrove", eos) == [tokenizer.encode(t, add_special_tokens=False).ids for t in texts]
    text = _run([TOKEN_FILES / "corpus.jsonl"], tmp_path / "text", tokenizer=LLAMA, seq_len=96)
    derived = _run([ds], tmp_path / "derived", tokenizer=LLAMA, seq_len=96)
    assert _rows(tmp_path / "text").equals(_rows(tmp_path / "derived"))
    assert derived.totals["documents_written"] == text.totals["documents_written"] == len(texts)
    assert derived.manifest["inputs"][0]["format"] == "datatrove"


def test_a_datasets_map_output_with_input_ids(tmp_path):
    """A ``Dataset.map`` that added input_ids (make_token_files.py), as save_to_disk and Parquet: the
    rows ``datasets`` itself loads, and the same output from either."""
    datasets = pytest.importorskip("datasets")

    saved = TOKEN_FILES / "mapped"
    assert token_format_detected(str(saved), "auto") == "input-ids"
    theirs = datasets.load_from_disk(str(saved))["input_ids"]
    assert _documents(saved, "input-ids", None) == [list(ids) for ids in theirs]
    out = _run([TOKEN_FILES / "mapped.parquet"], tmp_path / "o", input_format="input-ids", seq_len=64)
    _run([saved], tmp_path / "o2", seq_len=64)
    assert out.totals["documents_written"] == len(theirs) and _rows(tmp_path / "o").equals(_rows(tmp_path / "o2"))


def test_every_token_format_is_a_choice_and_a_nanogpt_file_is_split_at_eos(tmp_path):
    import dataclasses

    from objcli.config import TransformConfig

    choices = next(f for f in dataclasses.fields(TransformConfig) if f.name == "input_format").metadata["choices"]
    assert set(TOKEN_INPUTS) <= set(choices)
    ids = np.array([5, 6, 2, 7, 2, 2, 9, 10, 2], dtype=np.uint16)  # nanoGPT: EOS (2) after each document
    ids.tofile(tmp_path / "train.bin")
    log = RecordLog()
    assert _documents(tmp_path / "train.bin", "nanogpt", 2) == [[5, 6], [7], [9, 10]]
    header = np.zeros(256, "<i4")
    header[:3] = (20240520, 1, 9)
    (tmp_path / "llmc.bin").write_bytes(header.tobytes() + np.array([2, 5, 6, 2, 7, 2, 9, 10, 11], np.uint16).tobytes())
    assert _documents(tmp_path / "llmc.bin", "llmc", 2) == [[5, 6], [7], [9, 10, 11]]
    from objcli.inputs.pieces import InputFile

    (partition,) = token_partitions(InputFile(str(tmp_path / "llmc.bin"), "llmc", None, 0), 1 << 16, "input_ids")
    (batch,) = token_batches(partition, "input_ids", 1 << 20, log, 2, 100)
    assert batch.origins.records.tolist() == [0, 1, 2]  # numbered from the document after llm.c's first EOS
    assert not log.skipped


def test_damaged_or_mismatched_token_files_are_one_line(corpus, tmp_path):
    _run([corpus / "prose.jsonl"], tmp_path / "w", output_format="megatron")
    prefix = next((tmp_path / "w").glob("*.idx")).with_suffix("")
    cases = {}
    cut = tmp_path / "cut_document"
    shutil.copy(f"{prefix}.idx", f"{cut}.idx")
    Path(f"{cut}.bin").write_bytes(Path(f"{prefix}.bin").read_bytes()[:-100])
    cases["cut"] = (cut, "is cut short")
    v2 = tmp_path / "v2_document"
    shutil.copy(f"{prefix}.bin", f"{v2}.bin")
    data = bytearray(Path(f"{prefix}.idx").read_bytes())
    data[9:17] = struct.pack("<Q", 2)
    Path(f"{v2}.idx").write_bytes(bytes(data))
    cases["version"] = (v2, "MMIDIDX version 2")
    alone = tmp_path / "alone_document"
    shutil.copy(f"{prefix}.bin", f"{alone}.bin")
    cases["no idx"] = (Path(f"{alone}.bin"), "without")
    np.array([5, 9000, 2], np.uint16).tofile(tmp_path / "big.bin")
    cases["past the vocabulary"] = (tmp_path / "big.bin", "token 1 is id 9000, outside the tokenizer's")
    _run([corpus / "prose.jsonl"], tmp_path / "n", output_format="nanoset")
    ds = next((tmp_path / "n").glob("*.ds"))
    Path(f"{ds}.metadata").write_text("objcli|4\n")
    cases["token size"] = (ds, "token size 4?")
    for name, (path, message) in cases.items():
        done = run_cli("transform", path, "-t", SPM, "-o", tmp_path / f"out-{name.replace(' ', '-')}")
        assert done.returncode == 1 and done.stderr.count("\n") == 1 and message in done.stderr, (name, done.stderr)
        assert "Traceback" not in done.stderr


def test_a_megatron_list_stands_for_the_prefixes_it_names(corpus, tmp_path):
    """objcli's megatron.txt (and Megatron's --data-path style: WEIGHT PREFIX a line) as an input."""
    _run([corpus / "prose.jsonl"], tmp_path / "w", output_format="megatron")
    listed = _run([tmp_path / "w" / "megatron.txt"], tmp_path / "listed", seq_len=96)
    prefix = next((tmp_path / "w").glob("*.idx")).with_suffix("")
    direct = _run([prefix], tmp_path / "direct", seq_len=96)
    assert _rows(tmp_path / "listed").equals(_rows(tmp_path / "direct"))
    assert listed.manifest["inputs"] == direct.manifest["inputs"]
    (tmp_path / "notes.txt").write_text("0.5 not_a_prefix\n")  # a text file that only looks like one: text
    assert _run([tmp_path / "notes.txt"], tmp_path / "text", seq_len=4).manifest["inputs"][0]["format"] == "text"


def test_hostile_token_inputs_are_one_line(tmp_path):
    """An index claiming a trillion sequences (read before any array is allocated), null ids, a
    save_to_disk folder whose state file holds the wrong types: one line each, no traceback."""
    Path(tmp_path / "huge_document.idx").write_bytes(MAGIC_HEADER(10**12))
    (tmp_path / "huge_document.bin").write_bytes(b"\0\0")
    pa_table = pa.table({"input_ids": [[1, None, 3]]})
    import pyarrow.parquet as pq

    pq.write_table(pa_table, tmp_path / "nulls.parquet")
    pq.write_table(pa.table({"ids": [[1, 2]]}), tmp_path / "other_column.parquet")
    (tmp_path / "cut.parquet").write_bytes((tmp_path / "nulls.parquet").read_bytes()[:7])
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "state.json").write_text('{"_data_files": 5}')
    cases = [
        (tmp_path / "huge_document", "megatron", "not what its 1,000,000,000,000 sequences need"),
        (tmp_path / "nulls.parquet", "input-ids", "holds null ids"),
        (tmp_path / "other_column.parquet", "input-ids", "no column 'input_ids' (name the ids column with --text-key)"),
        (tmp_path / "cut.parquet", "input-ids", "smaller than the minimum file footer"),
        (tmp_path / "hf", "input-ids", "lists no _data_files"),
    ]
    for path, fmt, message in cases:
        done = run_cli("transform", path, "--input-format", fmt, "-t", SPM, "-o", tmp_path / f"o-{path.name}")
        assert done.returncode == 1 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert (
        "--text-key"
        not in run_cli(
            "transform", tmp_path / "cut.parquet", "--input-format", "input-ids", "-t", SPM, "-o", tmp_path / "o-cut2"
        ).stderr
    )  # a damaged file is not a missing column


def MAGIC_HEADER(count: int) -> bytes:  # noqa: N802 - a header as Megatron writes it, claiming ``count``
    return b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, count, count + 1)


def test_a_token_inputs_files_are_known_by_their_sha256(tmp_path):
    """The manifest records each file's sha256; a file rewritten with its old size and time (two ids
    swapped) is another input: verify names it, and the same command runs again instead of finding
    nothing to do."""
    import os

    from objcli.storage.files import file_sha256

    for name in ("corpus_text_document.bin", "corpus_text_document.idx"):
        shutil.copy(TOKEN_FILES / name, tmp_path / name)
    args = ("transform", tmp_path / "corpus_text_document", "-t", SPM, "--seq-len", "64", "-o", tmp_path / "out")
    assert run_cli(*args).returncode == 0
    recorded = manifest_json(tmp_path / "out")["inputs"][0]["sha256"]
    assert recorded == {
        name: file_sha256(tmp_path / name) for name in ("corpus_text_document.idx", "corpus_text_document.bin")
    }
    assert run_cli("verify", tmp_path / "out").returncode == 0
    data, stat = tmp_path / "corpus_text_document.bin", os.stat(tmp_path / "corpus_text_document.bin")
    ids = bytearray(data.read_bytes())
    ids[0:2], ids[2:4] = ids[2:4], ids[0:2]
    data.write_bytes(bytes(ids))
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    checked = run_cli("verify", tmp_path / "out")
    assert checked.returncode == 1 and "corpus_text_document.bin's file" in checked.stdout + checked.stderr
    again = run_cli(*args)
    assert again.returncode == 0 and "nothing to do" not in again.stderr and "inputs changed" in again.stderr
    assert manifest_json(tmp_path / "out")["inputs"][0]["sha256"]["corpus_text_document.bin"] == file_sha256(data)


@pytest.mark.parametrize("packing", ["concat", "best-fit", "none"])
def test_provenance_of_a_tokenized_input_names_each_documents_ids(packing, tmp_path):
    """--provenance over Megatron-LM's file: each span is a document (its index in the file) and a
    range of its ids, and a segment's ids, BOS and EOS aside, are exactly those; the shards are the
    run's without --provenance; trace shows the document's ids decoded."""
    import pyarrow.parquet as pq

    prefix = TOKEN_FILES / "corpus_text_document"
    documents = _megatron_documents(prefix, eod=True)
    options = {"seq_len": 64, "packing": packing, "shard_size": "120"}
    _run([prefix], tmp_path / "spans", provenance=True, **options)
    _run([prefix], tmp_path / "plain", **options)
    assert verify_output(tmp_path / "spans").ok and _rows(tmp_path / "spans").equals(_rows(tmp_path / "plain"))
    manifest = manifest_json(tmp_path / "spans")
    specials = set(manifest["special_tokens"]["ids"].values())
    checked = 0
    for shard in manifest["shards"]:
        rows = pa.ipc.open_stream(pa.memory_map(str(tmp_path / "spans" / shard["files"][0]))).read_all().to_pylist()
        spans = pq.read_table(tmp_path / "spans" / shard["files"][-1]).to_pylist()
        for span in spans:
            row = rows[span["row"]]
            segment = [t for t, s in zip(row["input_ids"], _segment_ids(row)) if s == span["segment"] + 1]
            document = documents[span["record"]]
            assert [t for t in segment if t not in specials] == document[span["start"] : span["end"]], span
            assert span["file"] == str(prefix) and span["copy"] == 0
            checked += 1
    assert checked > len(documents)
    shown = run_cli("trace", tmp_path / "spans", 5)
    assert shown.returncode == 0 and "document" in shown.stdout and "tokens" in shown.stdout, shown.stderr


def _segment_ids(row: dict) -> list[int]:
    """A row's segment ids (1-based), one for an unpacked row."""
    return row.get("segment_ids") or [1] * len(row["input_ids"])


@pytest.mark.parametrize("objective", ["span-corruption", "ul2"])
def test_provenance_of_examples_cut_from_a_tokenized_stream_tiles_each_document(objective, tmp_path):
    """Objectives that cut the documents joined: over the rows in order, each document's spans follow
    one another from its first id to its last, nothing left out or read twice."""
    import pyarrow.parquet as pq

    prefix = TOKEN_FILES / "corpus_text_document"
    documents = _megatron_documents(prefix, eod=True)
    _run([prefix], tmp_path / "o", objective=objective, seq_len=128, provenance=True, packing="none")
    table = pa.concat_tables(pq.read_table(p) for p in sorted((tmp_path / "o").glob("*.provenance")))
    reached: dict[int, int] = {}
    for span in table.to_pylist():
        assert span["start"] == reached.get(span["record"], 0), span
        reached[span["record"]] = span["end"]
    last = max(reached)  # the stream's end is the partial example dropped (--remainder drop)
    assert reached.pop(last) <= len(documents[last]) and len(reached) > 20
    assert reached == {d: len(ids) for d, ids in enumerate(documents) if d in reached}


def test_provenance_of_sentence_pairs_from_megatron_split_sentences(tmp_path):
    """NSP from a --split-sentences file: each row's spans are the whole documents its sentences come
    from, counted in ids."""
    import pyarrow.parquet as pq

    prefix = TOKEN_FILES / "corpus_text_sentence"
    documents = _megatron_documents(prefix, eod=True)
    _run([prefix], tmp_path / "o", objective="nsp", seq_len=128, provenance=True)
    assert verify_output(tmp_path / "o").ok
    spans = pa.concat_tables(pq.read_table(p) for p in sorted((tmp_path / "o").glob("*.provenance"))).to_pylist()
    assert len(spans) > 20 and {(s["start"], s["end"]) == (0, len(documents[s["record"]])) for s in spans} == {True}


def test_documents_ending_in_another_special_token_are_refused_naming_the_eos_to_give(tmp_path):
    """Issue 65: Megatron files made with --append-eod by a tokenizer whose EOD is one special token,
    read with another EOS, wrote two ends a document silently. Now one line names --eos-token; given
    it, the file's EOD comes off and each document ends once, as the text run's do."""
    from objcli.errors import ObjcliError

    prefix = TOKEN_FILES / "corpus_text_document"  # --append-eod: every document ends in </s>
    with pytest.raises(ObjcliError, match=r"every document ends in '</s>'.*--eos-token '</s>'"):
        _run([prefix], tmp_path / "other", seq_len=96, eos_token="<pad>")
    eos = run_cli("transform", prefix, "-t", SPM, "--eos-token", "<pad>", "-o", tmp_path / "cli", "--seq-len", "96")
    assert eos.returncode == 1 and eos.stderr.count("\n") == 1 and "--eos-token '</s>'" in eos.stderr
    given = _run([prefix], tmp_path / "given", seq_len=96, eos_token="</s>")
    text = _run([TOKEN_FILES / "corpus.jsonl"], tmp_path / "text", seq_len=96)
    assert _rows(tmp_path / "given").equals(_rows(tmp_path / "text"))
    assert given.totals["documents_written"] == text.totals["documents_written"]


def test_a_table_of_ids_is_detected_by_its_schema(tmp_path):
    """A Parquet or Arrow file whose ids column is a list of integers is tokens with no --input-format (it
    used to be read as text and refused for its missing text column); ids beside their text leave the
    text read, unless --text-key names the ids column; a column of strings stays text."""
    import pyarrow.parquet as pq

    ids = pa.array([[5, 6, 7], [8, 9]], pa.list_(pa.int32()))
    pq.write_table(pa.table({"input_ids": ids}), tmp_path / "ids.parquet")
    pq.write_table(pa.table({"text": ["a b", "c"], "input_ids": ids}), tmp_path / "both.parquet")
    pq.write_table(pa.table({"tokens": ids}), tmp_path / "named.parquet")
    pq.write_table(pa.table({"input_ids": ["a", "b"]}), tmp_path / "strings.parquet")
    with (
        pa.OSFile(str(tmp_path / "ids.arrow"), "wb") as sink,
        pa.ipc.new_stream(sink, pa.schema([("input_ids", ids.type)])) as w,
    ):
        w.write_table(pa.table({"input_ids": ids}))
    assert token_format_detected(str(tmp_path / "ids.parquet"), "auto") == "input-ids"
    assert token_format_detected(str(tmp_path / "ids.arrow"), "auto") == "input-ids"
    assert token_format_detected(str(tmp_path / "both.parquet"), "auto") is None
    assert token_format_detected(str(tmp_path / "both.parquet"), "auto", "input_ids") is None
    assert token_format_detected(str(tmp_path / "named.parquet"), "auto", "tokens") == "input-ids"
    assert token_format_detected(str(tmp_path / "named.parquet"), "auto") is None
    assert token_format_detected(str(tmp_path / "strings.parquet"), "auto") is None
    auto = _run([TOKEN_FILES / "mapped.parquet"], tmp_path / "auto", seq_len=64)
    _run([TOKEN_FILES / "mapped.parquet"], tmp_path / "named", seq_len=64, input_format="input-ids")
    assert auto.manifest["inputs"][0]["format"] == "input-ids"
    assert _rows(tmp_path / "auto").equals(_rows(tmp_path / "named")) and auto.totals["documents_written"] > 0


def test_rows_of_fixed_size_lists_are_ids_as_their_lists_are(tmp_path):
    """objcli's own Arrow and Parquet rows of one length are fixed-size lists (issue 73): a table whose ids
    column is one is detected as tokens and read as the same documents as the same ids in lists."""
    import pyarrow.parquet as pq

    values = pa.array(np.arange(5, 5 + 3 * 64) % 8000, pa.uint16())
    fixed = pa.FixedSizeListArray.from_arrays(values, 64)
    listed = fixed.cast(pa.list_(pa.uint16()))
    for name, ids in (("fixed", fixed), ("listed", listed)):
        pq.write_table(pa.table({"input_ids": ids}), tmp_path / f"{name}.parquet")
        assert token_format_detected(str(tmp_path / f"{name}.parquet"), "auto") == "input-ids"
        _run([tmp_path / f"{name}.parquet"], tmp_path / name, seq_len=32)
    assert _rows(tmp_path / "fixed").equals(_rows(tmp_path / "listed"))
    assert manifest_json(tmp_path / "fixed")["totals"]["documents_written"] == 3
