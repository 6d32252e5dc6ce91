"""Sources as users hold them (issue 53): JSON lines with ``text`` beside a Parquet file with ``content``,
one mixture, each source read with its own field (``--text-key code=content``), traced to its record."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from runs import SAMPLE, read_output, run_cli
from sources import code_paragraphs, run_web_and_code

from objcli.commands.stats import compute_stats
from objcli.commands.trace import trace, trace_lines


@pytest.fixture(scope="module")
def held_sources(tmp_path_factory):
    """web: the sample prose as JSON lines (``text``), with a bad line; code: the sample code's
    paragraphs in a Parquet file whose text column is ``content`` and which also has a ``text`` column
    of something else (a path), so reading the wrong field would be seen."""
    folder = tmp_path_factory.mktemp("held")
    prose = (SAMPLE / "prose.jsonl").read_text(encoding="utf-8").splitlines()[:2000]
    (folder / "web.jsonl").write_text("\n".join([*prose[:10], "{not json", *prose[10:]]) + "\n", encoding="utf-8")
    paragraphs = code_paragraphs()
    table = pa.table({"text": [f"src/file_{i}.py" for i in range(len(paragraphs))], "content": paragraphs})
    pq.write_table(table, folder / "code.parquet")
    return folder, paragraphs


def test_each_source_is_read_with_its_own_text_key_and_traced_to_its_record(held_sources, tmp_path):
    folder, paragraphs = held_sources
    out = tmp_path / "out"
    summary = run_web_and_code(
        out,
        folder / "web.jsonl",
        folder / "code.parquet",
        "content",
        weights="web=0.6,code=0.4",
        seq_len=128,
        provenance=True,
    )
    manifest, table = read_output(out)
    t = manifest["totals"]
    assert t["documents_read"] == t["documents_written"] + t["documents_skipped"]
    skipped = t["skipped_by_reason"]
    assert skipped.get("bad_json") == 1 and set(skipped) <= {"bad_json", "mixture_not_sampled", "remainder_dropped"}, (
        skipped
    )
    shares = compute_stats(out)["mixture"]
    assert abs(shares["web"]["share"] - 0.6) < 0.005 and abs(shares["code"]["share"] - 0.4) < 0.005, shares
    assert {i["path"].rsplit("/", 1)[-1]: i.get("source") for i in manifest["inputs"]} == {
        "web.jsonl": "web",
        "code.parquet": "code",
    }
    code = manifest["columns"][-1]["categories"].index("code")
    row = table["source"].index(code)
    spans = trace(out, row)
    assert spans and all(s["file"].endswith("code.parquet") for s in spans)
    shown = trace_lines(out, row)
    for span, text in zip(spans, shown[1::2]):
        start, end = span["chars"]
        assert text == paragraphs[span["record"]][start:end] and text  # content, not the path in `text`
    assert summary.manifest["recipe"]["text-key"] == "code=content"  # --recipe replays it


@pytest.mark.parametrize(
    ("sources", "text_key", "message"),
    [
        ([], "code=content", "SOURCE=KEY names a --source's own field"),
        (["web", "code"], "docs=content", "give one field for every source"),
        (["web", "code"], "code=content,code=body", "give one field for every source"),
        (["web", "code"], "body,text", "give one field for every source"),
        (["web", "code"], "code=", "names no field"),
    ],
)
def test_a_text_key_for_no_source_is_one_line(held_sources, sources, text_key, message, tmp_path):
    folder, _ = held_sources
    files = {"web": folder / "web.jsonl", "code": folder / "code.parquet"}
    args = [a for name in sources for a in ("--source", f"{name}={files[name]}")]
    args += ["--weights", ",".join(f"{n}=1" for n in sources)] if sources else [str(files["web"])]
    result = run_cli("transform", *args, "--text-key", text_key, "-t", SAMPLE / "tokenizer.model", "-o", tmp_path / "o")
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"Error: --text-key {text_key}: ") and message in result.stderr, result.stderr


@pytest.mark.parametrize("fmt", ["hf", "arrow", "parquet"])
def test_datasets_shows_each_rows_source_by_name(held_sources, fmt, tmp_path):
    """The source column is a ClassLabel: load_from_disk (hf) and load_dataset over the card (arrow,
    parquet) give its names, not bare integers."""
    datasets = pytest.importorskip("datasets")
    folder, _ = held_sources
    out = tmp_path / fmt
    run_web_and_code(
        out,
        folder / "web.jsonl",
        folder / "code.parquet",
        "content",
        weights="web=0.5,code=0.5",
        seq_len=128,
        output_format=fmt,
        split="validation=5%",
    )
    loaded = datasets.load_from_disk(str(out)) if fmt == "hf" else datasets.load_dataset(str(out))
    for split in ("train", "validation"):
        feature = loaded[split].features["source"]
        assert isinstance(feature, datasets.ClassLabel) and feature.names == ["web", "code"]
        names = {feature.int2str(i) for i in loaded[split]["source"]}
        assert names == {"web", "code"} if split == "train" else names <= {"web", "code"}


def test_a_token_store_beside_a_source_with_its_own_field(held_sources, tmp_path):
    """A store's field is fixed when it was made; another source's own --text-key is that source's
    business, and naming another field for the store is refused in one line."""
    folder, paragraphs = held_sources
    store = tmp_path / "web-store"
    made = run_cli("tokenize", folder / "web.jsonl", "-t", SAMPLE / "tokenizer.model", "-o", store)
    assert made.returncode == 0, made.stderr
    summary = run_web_and_code(tmp_path / "out", store, folder / "code.parquet", "content", weights="web=1,code=1")
    code = summary.manifest["mixture"]["code"]
    # The paragraphs (about 226,000 tokens), not the decoy `text` column's paths (about 30,000).
    assert code["counted_tokens"] > 150_000 and code["documents_read"] % len(paragraphs) == 0
    args = ["--source", f"web={store}", "--source", f"code={folder / 'code.parquet'}", "--weights", "web=1,code=1"]
    refused = run_cli("transform", *args, "--text-key", "web=body,code=content", "-o", tmp_path / "bad")
    assert refused.returncode == 1 and refused.stderr.startswith("Error: --text-key web=body,code=content: the token")
