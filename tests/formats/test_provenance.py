"""--provenance: for every segment of every row, the recorded span cut from the source record's text
is exactly the text the segment's tokens decode to (a byte-level BPE: exact), whatever the packer,
shuffles, splits, long records cut, partitions cut inside a file, mixtures, append, merge and
reshard (where a row boundary falls inside a character, the span holds that character whole); the
shards are the bytes a run without it writes; `objcli trace` reads it back."""

import hashlib
import json
import shutil
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chat_data import TEMPLATES, conversations, write_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import SAMPLE_DATA
from readback import fill_sentinels
from runs import cli, folder_bytes, run_cli, run_transform
from tokenizers import Tokenizer

from objcli.commands.trace import trace
from objcli.commands.verify import verify_output
from objcli.reading.shards import iter_rows
from objcli.tokenizers.bpe_spec import byte_characters

TOKENIZER = SAMPLE_DATA / "llama-style" / "tokenizer.json"  # byte-level BPE
BYTES = {c: b for b, c in enumerate(byte_characters())}  # a byte-level piece's characters, as bytes


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Prose and code records as JSON lines, a JSON array, Parquet and plain text lines."""
    folder = tmp_path_factory.mktemp("provenance")
    texts = [json.loads(line)["text"] for line in (SAMPLE_DATA / "prose.jsonl").open()][:120]
    texts += [json.loads(line)["text"] for line in (SAMPLE_DATA / "code.jsonl").open()][:40]
    (folder / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[:80]))
    (folder / "b.json").write_text(json.dumps([{"text": t} for t in texts[80:120]]))
    pq.write_table(pa.table({"text": texts[120:]}), folder / "c.parquet")
    (folder / "d.txt").write_text("".join(t.replace("\n", " ").strip() + "\n" for t in texts[:30]))
    return folder


def _record(path: str, record: int, cache: dict) -> str:
    """A record's text, read here the plain way each format is written above."""
    if path not in cache:
        if path.endswith(".jsonl"):
            cache[path] = [json.loads(line)["text"] for line in open(path)]
        elif path.endswith(".json"):
            cache[path] = [r["text"] for r in json.load(open(path))]
        elif path.endswith(".parquet"):
            cache[path] = pq.read_table(path).column("text").to_pylist()
        else:
            cache[path] = open(path).read().split("\n")
    return cache[path][record]


def _as_traced(span: dict) -> dict:
    traced = {"file": span["file"], "record": span["record"], "chars": [span["start"], span["end"]]}
    return {**traced, "segment": span["segment"], **({"copy": span["copy"]} if span["copy"] else {})}


def recorded_spans(out) -> list[tuple[str, list[dict]]]:
    """Each row's (split, spans as the provenance files hold them), in the manifest's shard order."""
    recorded = []
    for shard in json.loads((out / "manifest.json").read_text())["shards"]:
        by_row = [[] for _ in range(shard["rows"])]
        for span in pq.read_table(out / shard["files"][-1]).to_pylist():
            by_row[span["row"]].append(span)
        recorded += [(shard["split"], spans) for spans in by_row]
    return recorded


def row_spans(out) -> list[list[dict]]:
    """Each row's spans as ``trace`` gives them (an output without splits); ``trace`` itself is
    checked against them on a sample of rows."""
    rows = [[_as_traced(span) for span in spans] for _, spans in recorded_spans(out)]
    for index in range(0, len(rows), 97):
        assert trace(out, index) == rows[index]
    return rows


def check_spans(out) -> int:
    """Every span against its segment's tokens; returns how many spans were checked."""
    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    manifest = json.loads((out / "manifest.json").read_text())
    specials = {v for k, v in manifest["special_tokens"]["ids"].items() if k in ("bos", "eos", "pad")}
    rows = [row for _, row in iter_rows(out)]  # in the manifest's shard order
    recorded = recorded_spans(out)  # trace is checked on a sample
    seen: dict[str, int] = {}
    spans, cache = 0, {}
    for number, (row, (split, found)) in enumerate(zip(rows, recorded)):
        index = seen[split] = seen.get(split, -1) + 1  # the row's place among its split's rows
        if number % 97 == 0:
            expected = [_as_traced(f) for f in found]
            assert trace(out, index, split or None) == expected
        segment_ids, tokens = row["segment_ids"], row["input_ids"]
        if manifest["objective"] == "mlm":  # the original tokens: the labels where a token was masked
            tokens = np.where(row["labels"] >= 0, row["labels"], tokens)
        assert sorted({s["segment"] for s in found}) == list(range(int(segment_ids.max())))
        for span in found:
            ids = [int(t) for t in tokens[segment_ids == span["segment"] + 1] if t not in specials]
            source = _record(span["file"], span["record"], cache)[span["start"] : span["end"]]
            text = tokenizer.decode(ids, skip_special_tokens=False)
            if "\ufffd" not in text:
                assert source == text, span
            else:  # a row boundary inside a character: the span holds that character whole
                pieces = b"".join(bytes(BYTES[c] for c in tokenizer.id_to_token(i)) for i in ids)
                at = source.encode().find(pieces)
                assert 0 <= at <= 3 and len(source.encode()) - at - len(pieces) <= 3, span
            spans += 1
    return spans


OPTIONS = st.fixed_dictionaries(
    {
        "packing": st.sampled_from(["concat", "best-fit", "none"]),
        "seq_len": st.sampled_from([64, 200]),
        "shuffle_rows": st.booleans(),
        "split": st.sampled_from(["", "validation=25%"]),
        "shuffle_documents": st.sampled_from([None, "32KiB"]),
        "max_document_chars": st.sampled_from([10_000_000, 1500]),
        "partition_size": st.sampled_from(["16MiB", "16KiB"]),
    }
)


@pytest.mark.heavy
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(options=OPTIONS)
def test_every_span_is_the_text_its_segment_decodes_to(options, inputs, tmp_path_factory):
    """Each run writes a shard every row or two (2 s an example): the default suite draws 4 layouts, the slow one 40."""
    _spans_are_their_segments_text(options, inputs, tmp_path_factory)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(options=OPTIONS)
def test_every_span_is_the_text_its_segment_decodes_to_in_many_layouts(options, inputs, tmp_path_factory):
    _spans_are_their_segments_text(options, inputs, tmp_path_factory)


def _spans_are_their_segments_text(options, inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    options = {k: v for k, v in options.items() if v not in ("", None)}
    files = [inputs / name for name in ("a.jsonl", "b.json", "c.parquet")]
    run_transform(files, TOKENIZER, out, provenance=True, shard_size="400", pool="threads", **options)
    assert verify_output(out).ok and check_spans(out) > 0
    plain = tmp_path_factory.mktemp("plain")
    run_transform(files, TOKENIZER, plain, shard_size="400", pool="threads", **options)
    with_spans = {k: v for k, v in folder_bytes(out).items() if not k.endswith(".provenance")}
    assert {k: v for k, v in with_spans.items() if k not in ("manifest.json", "README.md")} == {
        k: v for k, v in folder_bytes(plain).items() if k not in ("manifest.json", "README.md")
    }  # the shards are a plain run's: the spans are only added beside them


@pytest.mark.parametrize("objective", ["mtp", "mlm"])
def test_text_lines_and_other_document_objectives(objective, inputs, tmp_path):
    run_transform([inputs / "d.txt"], TOKENIZER, tmp_path / "out", objective=objective, seq_len=96, provenance=True)
    assert check_spans(tmp_path / "out") > 0


def test_span_corruption_rows_come_from_their_spans(inputs, tmp_path):
    """An example cut from the documents joined: its spans, in order, are the text its tokens were
    before corruption (inputs with each sentinel filled from the labels)."""
    run_transform([inputs / "a.jsonl"], TOKENIZER, tmp_path / "out", objective="span-corruption", seq_len=128,
                  provenance=True)  # fmt: skip
    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    ids, sentinels = manifest["special_tokens"]["ids"], set(manifest["special_tokens"]["sentinels"])
    cache, rows = {}, [row for _, row in iter_rows(tmp_path / "out")]
    for index, row in enumerate(rows):
        inputs_, labels = [int(t) for t in row["input_ids"]], [int(t) for t in row["labels"] if t >= 0]
        original = fill_sentinels([*inputs_, ids.get("eos", 0)], labels, sentinels)
        text = tokenizer.decode([t for t in original if t not in {*ids.values(), *sentinels}])
        spans = trace(tmp_path / "out", index)
        assert "".join(_record(s["file"], s["record"], cache)[slice(*s["chars"])] for s in spans) == text
    assert len(rows) > 100


@pytest.mark.parametrize("packing", ["none", "trim-and-pack"])
def test_ul2_examples_tile_their_documents(packing, inputs, tmp_path):
    """The stream is cut end to end: over the rows in order, each document's spans follow one another
    from its first character, with nothing left out or read twice (whatever each denoiser made)."""
    run_transform([inputs / "a.jsonl"], TOKENIZER, tmp_path / "out", objective="ul2", seq_len=128, packing=packing,
                  provenance=True)  # fmt: skip
    table = pa.concat_tables(pq.read_table(p) for p in sorted((tmp_path / "out").glob("*.provenance")))
    reached: dict[int, int] = {}
    for span in table.to_pylist():
        assert span["start"] == reached.get(span["record"], 0), span
        reached[span["record"]] = span["end"]
    texts = (inputs / "a.jsonl").read_text().splitlines()
    whole = [r for r, end in reached.items() if end == len(json.loads(texts[r])["text"])]
    assert len(whole) >= len(reached) - 1 and len(reached) > 10  # but the last, whose tail was dropped


@pytest.mark.parametrize("packing", ["concat", "best-fit", "none"])
def test_a_fim_segment_spans_its_whole_document(packing, inputs, tmp_path):
    """FIM at document level rearranges each document: a segment's span is the document it was made
    from, whose characters its tokens hold (all of them where no row boundary cut the document)."""
    run_transform([inputs / "a.jsonl"], TOKENIZER, tmp_path / "out", objective="fim", seq_len=512, packing=packing,
                  provenance=True)  # fmt: skip
    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    skip = {*manifest["special_tokens"]["ids"].values(), *manifest["special_tokens"]["sentinels"]}
    rows, cache, pieces = [row for _, row in iter_rows(tmp_path / "out")], {}, Counter()
    spans = [(index, span) for index in range(len(rows)) for span in trace(tmp_path / "out", index)]
    pieces.update(span["record"] for _, span in spans)
    last = max(pieces)
    for index, span in spans:
        record = _record(span["file"], span["record"], cache)
        assert span["chars"] == [0, len(record)]
        segment = rows[index]["input_ids"][rows[index]["segment_ids"] == span["segment"] + 1]
        text = Counter(tokenizer.decode([int(t) for t in segment if t not in skip]))
        whole = pieces[span["record"]] == 1 and span["record"] != last  # concat drops the last one's tail
        assert not text - Counter(record) and (not whole or text == Counter(record))


@pytest.mark.parametrize(
    "layout, packing", [("decoder", "none"), ("decoder", "best-fit"), ("encdec", "none"), ("encdec", "trim-and-pack")]
)
def test_prefix_lm_rows_are_their_spans_text(layout, packing, inputs, tmp_path):
    """Prefix LM keeps the text: a row's tokens (its prefix, then its target) are its spans' text."""
    run_transform([inputs / "a.jsonl"], TOKENIZER, tmp_path / "out", objective="prefix-lm", layout=layout,
                  packing=packing, seq_len=128, provenance=True)  # fmt: skip
    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    skip = set(manifest["special_tokens"]["ids"].values())
    cache, checked = {}, 0
    for index, (_, row) in enumerate(iter_rows(tmp_path / "out")):
        tokens = [*row["input_ids"], *(row["labels"] if layout == "encdec" else [])]
        text = tokenizer.decode([int(t) for t in tokens if t >= 0 and t not in skip])
        spans = trace(tmp_path / "out", index)
        if "\ufffd" not in text:  # a row boundary inside a character: see check_spans
            assert "".join(_record(s["file"], s["record"], cache)[slice(*s["chars"])] for s in spans) == text
            checked += 1
    assert checked > 100


def test_spans_survive_append_merge_and_reshard(inputs, tmp_path):
    common = ["-t", TOKENIZER, "--seq-len", "128", "--provenance", "--shard-size", "30", "-q"]
    for name, source in (("one", "a.jsonl"), ("two", "b.json")):
        assert run_cli("transform", inputs / source, "-o", tmp_path / name, *common).returncode == 0
    steps = [
        ("merge", tmp_path / "one", tmp_path / "two", "-o", tmp_path / "merged"),
        ("merge", tmp_path / "one", tmp_path / "two", "-o", tmp_path / "shuffled", "--shuffle-rows", "7"),
        ("reshard", tmp_path / "merged", "--num-shards", "3", "-o", tmp_path / "three"),
        ("reshard", tmp_path / "merged", "--shard-size", "20KB", "-o", tmp_path / "bytes"),
    ]
    for step in steps:
        result = cli([str(a) for a in step])
        assert result.exit_code == 0, result.output
    shutil.copytree(tmp_path / "one", tmp_path / "grown")
    assert run_cli("transform", inputs / "b.json", "-o", tmp_path / "grown", "--append", "-q").returncode == 0
    expected = check_spans(tmp_path / "merged")
    for name in ("shuffled", "three", "bytes", "grown"):
        assert verify_output(tmp_path / name).ok and check_spans(tmp_path / name) == expected


def test_a_megatron_join_joins_the_spans(inputs, tmp_path):
    """merge joins each split's Megatron shards into one pair: its provenance file is the sources'
    spans in the same order, rows counted on, and each span is its document's text."""
    common = ["-t", TOKENIZER, "--format", "megatron", "--provenance", "--shard-size", "40KB", "-q"]
    for name, source in (("one", "a.jsonl"), ("two", "b.json")):
        args = ("transform", inputs / source, "-o", tmp_path / name, *common, "--split", "validation=20%")
        assert run_cli(*args).returncode == 0
    result = cli(["merge", str(tmp_path / "one"), str(tmp_path / "two"), "-o", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    merged = json.loads((tmp_path / "m" / "manifest.json").read_text())
    assert verify_output(tmp_path / "m").ok and len(merged["shards"]) == 2
    tokenizer, cache, rows = Tokenizer.from_file(str(TOKENIZER)), {}, {}
    for split in ("train", "validation"):
        expected = []
        for name in ("one", "two"):
            manifest = json.loads((tmp_path / name / "manifest.json").read_text())
            count = sum(s["rows"] for s in manifest["shards"] if s["split"] == split)
            expected += [trace(tmp_path / name, i, split) for i in range(count)]
        assert len(expected) > 10 and [trace(tmp_path / "m", i, split) for i in range(len(expected))] == expected
        rows[split] = expected
    ids = merged["special_tokens"]["ids"]
    first = merged["shards"][0]
    for index, (_, row) in enumerate(iter_rows(tmp_path / "m")):  # shards in the manifest's order
        later = index >= first["rows"]
        (span,) = rows[merged["shards"][int(later)]["split"]][index - first["rows"] * later]
        text = tokenizer.decode([int(t) for t in row["input_ids"] if t not in (ids["bos"], ids["eos"])])
        assert _record(span["file"], span["record"], cache)[slice(*span["chars"])] == text


def test_a_mixture_records_each_copy(inputs, tmp_path):
    """A small source repeated to meet its share: each span names which copy of the document it is."""
    (tmp_path / "small.jsonl").write_text("".join((inputs / "a.jsonl").read_text().splitlines(keepends=True)[:4]))
    run_transform(
        [],
        TOKENIZER,
        tmp_path / "out",
        source=[f"small={tmp_path / 'small.jsonl'}", f"big={inputs / 'a.jsonl'}"],
        weights="small=0.5,big=0.5",
        seq_len=128,
        provenance=True,
    )
    assert check_spans(tmp_path / "out") > 0
    tables = [pq.read_table(path) for path in sorted((tmp_path / "out").glob("*.provenance"))]
    copies = pa.concat_tables(tables).filter(pa.compute.match_substring(pa.compute.cast(
        pa.concat_tables(tables).column("file"), pa.string()), "small.jsonl")).column("copy").to_pylist()  # fmt: skip
    assert max(copies) >= 2 and sorted(set(copies)) == list(range(max(copies) + 1))


def test_trace_prints_each_segment_and_its_text(inputs, tmp_path):
    run_transform([inputs / "a.jsonl"], TOKENIZER, tmp_path / "out", seq_len=64, provenance=True)
    shown = cli(["trace", str(tmp_path / "out"), "3"])
    spans = json.loads(cli(["trace", str(tmp_path / "out"), "3", "--json"]).output)
    assert shown.exit_code == 0 and all(set(s) == {"file", "record", "chars", "segment"} for s in spans)
    record = json.loads((inputs / "a.jsonl").read_text().splitlines()[spans[0]["record"]])["text"]
    assert record[slice(*spans[0]["chars"])] in shown.output and f"record {spans[0]['record']}" in shown.output
    errors = [
        (["trace", str(tmp_path / "out"), "100000"], "row 100000: the output's rows are 0 to"),
        (["trace", str(tmp_path / "out"), "1", "--split", "test"], "--split test: the output's splits are"),
    ]
    for args, message in errors:
        result = cli(args)
        assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output


def test_trace_without_provenance_and_an_objective_that_does_not_record_are_one_line(inputs, tmp_path, monkeypatch):
    run_transform([inputs / "a.jsonl"], TOKENIZER, tmp_path / "plain", seq_len=64)
    result = cli(["trace", str(tmp_path / "plain"), "0"])
    assert result.exit_code == 1 and "written without --provenance" in result.output
    from objcli.objectives.pairs import NextSentencePrediction

    monkeypatch.setattr(NextSentencePrediction, "provenance", None)  # an objective registered without it
    result = cli(["transform", str(inputs / "a.jsonl"), "-t", str(TOKENIZER), "-o",
                                       str(tmp_path / "nsp"), "--objective", "nsp", "--provenance"])  # fmt: skip
    assert result.exit_code == 1 and result.output.count("\n") == 1 and "Traceback" not in result.output
    assert "--provenance: nsp rewrites" in result.output and "bart, chat, clm, contrastive, electra" in result.output


def test_a_damaged_provenance_file_fails_verify(inputs, tmp_path):
    run_transform([inputs / "a.jsonl"], TOKENIZER, tmp_path / "out", seq_len=64, provenance=True)
    sidecar = next((tmp_path / "out").glob("*.provenance"))
    table = pq.read_table(sidecar)
    pq.write_table(table.slice(0, table.num_rows // 2), sidecar)
    assert any("sha256 differs" in p for p in verify_output(tmp_path / "out").problems)
    # The manifest edited to match: the spans no longer name every row.
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    for shard in manifest["shards"]:
        if sidecar.name in shard["sha256"]:
            shard["sha256"][sidecar.name] = hashlib.sha256(sidecar.read_bytes()).hexdigest()
    (tmp_path / "out" / "manifest.json").write_text(json.dumps(manifest))
    assert any("do not name each of the shard's" in p for p in verify_output(tmp_path / "out").problems)


def test_provenance_is_the_same_bytes_whatever_the_workers_and_pool(inputs, tmp_path):
    files = [inputs / "a.jsonl", inputs / "b.json"]
    options = {"seq_len": 128, "provenance": True, "partition_size": "16KiB", "shuffle_rows": True}
    run_transform(files, TOKENIZER, tmp_path / "one", workers=1, pool="threads", **options)
    run_transform(files, TOKENIZER, tmp_path / "two", workers=2, pool="processes", **options)
    assert folder_bytes(tmp_path / "one") == folder_bytes(tmp_path / "two")
    assert any(name.endswith(".provenance") for name in folder_bytes(tmp_path / "one"))


def test_a_chat_example_spans_its_whole_record(sample_tokenizer, tmp_path):
    """A conversation is one record: each segment's span is its record's whole JSON text, and every
    record written is named (skipped ones are not)."""
    write_jsonl(conversations(60, "mistral", seed=3), tmp_path / "chat.jsonl")
    run_transform([tmp_path / "chat.jsonl"], sample_tokenizer, tmp_path / "out", objective="chat", seq_len=256,
                  chat_template=str(TEMPLATES / "mistral.jinja"), provenance=True)  # fmt: skip
    lines = (tmp_path / "chat.jsonl").read_text(encoding="utf-8").splitlines()
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    seen = set()
    for index in range(manifest["totals"]["rows"]):
        for span in trace(tmp_path / "out", index):
            assert span["chars"] == [0, len(lines[span["record"]].strip())]
            seen.add(span["record"])
    assert len(seen) == manifest["totals"]["documents_written"] > 20
    shown = cli(["trace", str(tmp_path / "out"), "0"]).output
    assert '"messages"' in shown


def test_a_bart_example_spans_the_document_its_sentences_come_from(inputs, tmp_path):
    """BART cuts each document's sentences into examples: an example's span is that document, whose
    characters its targets (the example's text before noise) hold, and every document written is named."""
    run_transform([inputs / "a.jsonl"], TOKENIZER, tmp_path / "out", objective="bart", seq_len=128, provenance=True)
    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    skip = set(manifest["special_tokens"]["ids"].values())
    cache, seen = {}, set()
    for index, (_, row) in enumerate(iter_rows(tmp_path / "out")):
        (span,) = trace(tmp_path / "out", index)
        record = _record(span["file"], span["record"], cache)
        assert span["chars"] == [0, len(record)]
        target = tokenizer.decode([int(t) for t in row["labels"] if t >= 0 and t not in skip])
        assert not Counter(target.replace(" ", "")) - Counter(record.replace(" ", ""))
        seen.add(span["record"])
    assert len(seen) == manifest["totals"]["documents_written"]


def _restored(row: dict) -> np.ndarray:
    """A row's tokens before masking (the labels where a token was selected)."""
    ids = np.asarray(row["input_ids"])
    return np.where(row["labels"] >= 0, row["labels"], ids) if "labels" in row else ids


def _inside(tokenizer, ids, skip: set, record: str) -> bool:
    """Whether the characters ``ids`` decode to (special tokens and cut characters left out) are
    characters of ``record``."""
    text = tokenizer.decode([int(t) for t in ids if t not in skip]).replace("\ufffd", "")
    return not Counter(text.replace(" ", "")) - Counter(record.replace(" ", ""))


@pytest.mark.parametrize(
    "objective, extra", [("nsp", ()), ("nsp", ("--mlm",)), ("sop", ()), ("electra", ()), ("contrastive", ())]
)
def test_pair_and_view_rows_span_the_documents_they_come_from(objective, extra, inputs, tmp_path):
    """NSP, SOP, ELECTRA and contrastive rows join pieces of one or more documents: a row's spans
    are those whole documents, A's (or the anchor's) first, then B's where it is another (NSP's
    random B) or each negative's; each piece's characters are its document's. The shards are a
    plain run's bytes."""
    options = ["--negatives", "2"] if objective == "contrastive" else list(extra)
    lines = (inputs / "a.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "a.jsonl").write_text("".join(lines[:30]))
    args = [tmp_path / "a.jsonl", "-t", TOKENIZER, "--objective", objective, "--seq-len", "96", *options]
    assert run_cli("transform", *args, "-o", tmp_path / "out", "--provenance").returncode == 0
    assert run_cli("transform", *args, "-o", tmp_path / "plain").returncode == 0
    shards = {k: v for k, v in folder_bytes(tmp_path / "out").items() if k.endswith(".arrow")}
    assert shards and shards == {k: v for k, v in folder_bytes(tmp_path / "plain").items() if k.endswith(".arrow")}
    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    skip = set(manifest["special_tokens"]["ids"].values())
    cache, seen, two = {}, set(), 0
    for (_, row), spans in zip(iter_rows(tmp_path / "out"), row_spans(tmp_path / "out"), strict=True):
        records = [_record(s["file"], s["record"], cache) for s in spans]
        assert all(s["chars"] == [0, len(r)] and s["segment"] == 0 for s, r in zip(spans, records))
        seen.update(s["record"] for s in spans)
        if objective == "contrastive":
            assert len(spans) == 3 and spans[0]["record"] not in {spans[1]["record"], spans[2]["record"]}
            views = ["anchor_ids", "positive_ids", "negative_1_ids", "negative_2_ids"]
            assert all(_inside(tokenizer, row[v], skip, records[max(0, i - 1)]) for i, v in enumerate(views))
            continue
        ids, types = _restored(row), np.asarray(row["token_type_ids"])
        label = int(row.get("next_sentence_label", 0))
        assert len(spans) == (2 if label and objective == "nsp" and spans[0]["record"] != spans[-1]["record"] else 1)
        two += len(spans) == 2
        assert _inside(tokenizer, ids[types == 0], skip, records[0])
        assert _inside(tokenizer, ids[types == 1], skip, records[-1])
    assert seen and len(seen) <= manifest["totals"]["documents_written"]
    assert two > 0 if objective == "nsp" else two == 0


def test_context_fim_segments_come_from_their_spans(inputs, tmp_path):
    """FIM at context level rearranges the segments of rows packed as clm packs them: with no
    segment transformed, every span is exactly its segment's text; transformed, each segment's
    pieces are characters of its span's text."""
    common = dict(objective="fim", seq_len=128, fim_level="context", provenance=True)
    run_transform([inputs / "a.jsonl"], TOKENIZER, tmp_path / "plain", fim_rate=0.0, **common)
    assert check_spans(tmp_path / "plain") > 100
    run_transform([inputs / "a.jsonl"], TOKENIZER, tmp_path / "out", fim_rate=1.0, **common)
    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    skip = {*manifest["special_tokens"]["ids"].values(), *manifest["special_tokens"]["sentinels"]}
    cache, checked, transformed = {}, 0, 0
    for (_, row), found in zip(iter_rows(tmp_path / "out"), row_spans(tmp_path / "out"), strict=True):
        spans = {s["segment"]: s for s in found}
        transformed += int(np.sum(np.asarray(row["fim_modes"]) > 0))
        for segment in range(int(row["segment_ids"].max())):
            span = spans[segment]
            text = _record(span["file"], span["record"], cache)[slice(*span["chars"])]
            assert _inside(tokenizer, row["input_ids"][row["segment_ids"] == segment + 1], skip, text)
            checked += 1
    assert checked > 100 and transformed > checked // 2
