"""The token store, tokenized inputs and folder rules under hostile use (issue 61): each defect the red
team found, reproduced, and the rules that close them (work files and pending-work files never reach
outside the output; a store's manifest is checked against itself; options given are compared with the
store's, never replaced). Every refusal is one line."""

import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runs import SAMPLE, folder_bytes, manifest_json, run_cli, without_warnings

from objcli.commands.reshard import reshard_in_place
from objcli.errors import ObjcliError
from objcli.formats.sizes import ShardSize
from objcli.inputs.store_checks import check_store_sections
from objcli.inputs.token_inputs.megatron import MegatronInput

SPM = str(SAMPLE / "tokenizer.model")


def _one_line_error(result) -> str:
    lines = without_warnings(result.stderr).strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("hostile") / "corpus"
    folder.mkdir()
    lines = (SAMPLE / "prose.jsonl").read_text().splitlines(keepends=True)
    (folder / "a.jsonl").write_text("".join(lines[:120]))
    return folder


@pytest.fixture(scope="module")
def store(corpus) -> Path:
    out = corpus.parent / "store"
    assert run_cli("tokenize", corpus, "-t", SPM, "-o", out, "-q").returncode == 0
    return out


def test_transform_append_onto_a_store_is_refused_and_the_store_kept(store, tmp_path):
    """Defect 1: the store stayed a store only in name (its manifest rewritten as a clm output)."""
    new = tmp_path / "new"
    new.mkdir()
    (new / "b.jsonl").write_text((SAMPLE / "code.jsonl").read_text().splitlines(keepends=True)[0])
    before = folder_bytes(store)
    line = _one_line_error(run_cli("transform", new, "-t", SPM, "-o", store, "--append", "-q"))
    assert "is a token store" in line and "objcli tokenize" in line and "--append" in line
    assert folder_bytes(store) == before


@pytest.mark.parametrize("name", [".objcli-tmp", ".objcli-lock"])
@pytest.mark.parametrize("command", ["tokenize", "transform"])
def test_a_work_folder_or_lock_that_is_a_link_is_refused_and_nothing_outside_touched(corpus, tmp_path, name, command):
    """Defect 2: a linked work folder had every *.tmp of the scratch folder deleted and run.json written there."""
    scratch, out = tmp_path / "scratch", tmp_path / "out"
    scratch.mkdir()
    out.mkdir()
    (scratch / "theirs.tmp").write_text("kept")
    (scratch / "run.json").write_text("theirs")
    target = scratch if name == ".objcli-tmp" else scratch / "run.json"
    (out / name).symlink_to(target)
    line = _one_line_error(run_cli(command, corpus, "-t", SPM, "-o", out, "-q"))
    assert f"{name} is a symbolic link" in line
    assert sorted(p.name for p in scratch.iterdir()) == ["run.json", "theirs.tmp"]
    assert (scratch / "run.json").read_text() == "theirs" and (scratch / "theirs.tmp").read_text() == "kept"


def test_a_linked_work_folder_is_refused_by_reshard(corpus, tmp_path):
    out, scratch = tmp_path / "out", tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "keep.txt").write_text("kept")
    assert run_cli("transform", corpus, "-t", SPM, "-o", out, "--seq-len", "64", "-q").returncode == 0
    (out / ".objcli-tmp").symlink_to(scratch)
    line = _one_line_error(run_cli("reshard", out, "--shard-size", "50"))
    assert "symbolic link" in line and (scratch / "keep.txt").read_text() == "kept"


@pytest.fixture(scope="module")
def small_output(corpus) -> Path:
    out = corpus.parent / "small-output"
    assert run_cli("transform", corpus, "-t", SPM, "-o", out, "--seq-len", "64", "-q").returncode == 0
    return out


def test_a_foreign_pending_reshard_deletes_nothing(small_output, tmp_path):
    """Defect 3: ``old: ["../victim.txt"]`` deleted the file beside the output, then a KeyError traceback."""
    out = tmp_path / "out"
    out.mkdir()
    for p in small_output.iterdir():
        if p.is_file():
            (out / p.name).write_bytes(p.read_bytes())
    (tmp_path / "victim.txt").write_text("theirs")
    (out / ".objcli-reshard.json").write_text(json.dumps({"manifest": {}, "renames": [], "old": ["../victim.txt"]}))
    before = folder_bytes(out)
    line = _one_line_error(run_cli("reshard", out, "--shard-size", "50"))
    assert ".objcli-reshard.json" in line and "nothing was moved" in line
    assert (tmp_path / "victim.txt").read_text() == "theirs" and folder_bytes(out) == before


# Names a hostile pending-work or manifest file may hold: outside the folder, absolute, links, odd types.
HOSTILE_NAMES = st.one_of(
    st.sampled_from(["../victim.txt", "/etc/hostname", "", ".", "..", "sub/part-00000-of-00001.arrow", "link.txt"]),
    st.sampled_from(["notes.txt", "part-00000-of-00001.arrow", "manifest.json", "a\x00b", "x\\y"]),
    st.integers(),
    st.none(),
    st.lists(st.text(max_size=3), max_size=2),
)


@st.composite
def pending_records(draw, manifest: dict):
    """A pending reshard record: the real manifest (or one with keys taken away), renames and old names
    drawn from hostile names and the output's own."""
    shard_files = [name for shard in manifest["shards"] for name in shard["files"]]
    new = dict(manifest, resharded_from={"output": "x", "shards": 1, "shard_size": "50"})
    for key in draw(st.lists(st.sampled_from(["shards", "totals", "resharded_from", "config"]), max_size=2)):
        new.pop(key, None)
    names = st.one_of(HOSTILE_NAMES, st.sampled_from(shard_files))
    renames = draw(st.one_of(st.lists(st.lists(names, min_size=2, max_size=2), max_size=3), HOSTILE_NAMES))
    old = draw(st.one_of(st.lists(names, max_size=3), HOSTILE_NAMES))
    record = {"manifest": new, "renames": renames, "old": old}
    for key in draw(st.lists(st.sampled_from(["manifest", "renames", "old"]), max_size=1)):
        record.pop(key)
    return record


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_hostile_pending_reshard_files_touch_nothing_outside_and_are_one_line(small_output, tmp_path_factory, data):
    """Property: whatever a pending-work file names, nothing outside the folder (nor any user file in
    it) is touched, and the reshard either refuses in one line or finishes a valid commit."""
    base = tmp_path_factory.mktemp("pending")
    out = base / "out"
    out.mkdir()
    for p in small_output.iterdir():
        if p.is_file():
            (out / p.name).write_bytes(p.read_bytes())
    (base / "victim.txt").write_text("theirs")
    (out / "notes.txt").write_text("user")
    (out / "link.txt").symlink_to(base / "victim.txt")
    record = data.draw(pending_records(manifest_json(small_output)))
    (out / ".objcli-reshard.json").write_text(json.dumps(record))
    try:
        reshard_in_place(str(out), ShardSize.parse("50"), "50")
    except ObjcliError as error:
        assert "\n" not in str(error) and ".objcli-reshard.json" in str(error)
        assert (out / "manifest.json").exists()  # refused before anything moved
    assert (base / "victim.txt").read_text() == "theirs"
    assert (out / "notes.txt").read_text() == "user" and (out / "link.txt").is_symlink()


@pytest.fixture(scope="module")
def paragraph_store(corpus) -> tuple[Path, Path]:
    text = corpus.parent / "paragraphs"
    text.mkdir()
    records = [json.loads(line)["text"] for line in (corpus / "a.jsonl").read_text().splitlines()]
    (text / "a.txt").write_text("\n\n".join(records[:60]) + "\n")
    out = corpus.parent / "paragraph-store"
    assert run_cli("tokenize", text, "-t", SPM, "-o", out, "--text-unit", "paragraph", "-q").returncode == 0
    return text, out


def test_an_option_given_at_its_default_is_compared_with_the_store(paragraph_store, tmp_path):
    """Defect 4: ``--text-unit line`` (the default) was replaced by the store's paragraph silently."""
    text, store = paragraph_store
    line = _one_line_error(run_cli("transform", store, "-t", SPM, "--text-unit", "line", "-o", tmp_path / "a", "-q"))
    assert "--text-unit line" in line and "paragraph" in line
    left = run_cli("transform", store, "-t", SPM, "-o", tmp_path / "b", "--seq-len", "128", "-q")
    from_text = run_cli(
        "transform", text, "-t", SPM, "--text-unit", "paragraph", "-o", tmp_path / "c", "--seq-len", "128", "-q"
    )
    assert left.returncode == from_text.returncode == 0, left.stderr + from_text.stderr
    shards = [n for n in folder_bytes(tmp_path / "c") if n.startswith("part-")]
    assert shards and all((tmp_path / "b" / n).read_bytes() == (tmp_path / "c" / n).read_bytes() for n in shards)


def test_a_mixture_source_text_key_given_is_compared_with_the_store(store, corpus, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    records = [json.loads(line)["text"] for line in (corpus / "a.jsonl").read_text().splitlines()]
    (other / "o.jsonl").write_text("".join(json.dumps({"content": t[::-1]}) + "\n" for t in records))
    other_store = tmp_path / "other-store"
    assert run_cli("tokenize", other, "-t", SPM, "-o", other_store, "--text-key", "content", "-q").returncode == 0
    sources = ("--source", f"a={store}", "--source", f"b={other_store}", "--weights", "a=1,b=1")
    line = _one_line_error(run_cli("transform", *sources, "-t", SPM, "--text-key", "text", "-o", tmp_path / "o", "-q"))
    assert "--text-key text" in line and "content" in line
    assert run_cli("transform", *sources, "-t", SPM, "--text-key", "a=text", "-o", tmp_path / "p", "-q").returncode == 0


def test_a_store_whose_text_changed_is_said_by_the_run_and_by_verify(corpus, tmp_path):
    """Defect 5: records appended to an input: exit 0 silently, and verify passed."""
    text = tmp_path / "text"
    text.mkdir()
    (text / "a.jsonl").write_bytes((corpus / "a.jsonl").read_bytes())
    store = tmp_path / "store"
    assert run_cli("tokenize", text, "-t", SPM, "-o", store, "-q").returncode == 0
    assert run_cli("verify", store).returncode == 0
    with open(text / "a.jsonl", "a") as f:
        f.write(json.dumps({"text": "one more record"}) + "\n")
    derived = run_cli("transform", store, "-t", SPM, "-o", tmp_path / "d", "-q")
    assert derived.returncode == 0 and "changed since it was tokenized" in derived.stderr
    checked = run_cli("verify", store)
    assert checked.returncode != 0 and "changed since it was tokenized" in checked.stdout + checked.stderr


EDITS = {
    "a partition twice": lambda m: m["partitions"].append(dict(m["partitions"][0])),
    "no partitions": lambda m: m.update(partitions=[]),
    "documents read edited": lambda m: m["partitions"][0].update(documents_read=m["totals"]["documents_read"] + 3),
    "skips edited": lambda m: m["partitions"][0].update(skipped_by_reason={"bad_json": 2}),
    "totals edited": lambda m: m["totals"].update(documents_read=m["totals"]["documents_read"] + 1),
    "partition renumbered": lambda m: m["partitions"][0].update(index=5),
    "a shard in no partition": lambda m: m["partitions"][0].update(shards=[]),
    "a count of the wrong type": lambda m: m["partitions"][0].update(documents_read="882"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_hand_edited_store_manifest_is_refused_by_the_run_and_by_verify(store, tmp_path, edit):
    """Defect 6: a duplicated partition read every document twice (exit 0); verify passed each edit."""
    copy = tmp_path / "store"
    copy.mkdir()
    for p in store.iterdir():
        (copy / p.name).write_bytes(p.read_bytes())
    manifest = manifest_json(copy)
    EDITS[edit](manifest)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    line = _one_line_error(run_cli("transform", copy, "-t", SPM, "-o", tmp_path / "d", "-q"))
    assert "manifest" in line and "tokenize the text again" in line
    checked = run_cli("verify", copy)
    assert checked.returncode != 0 and "Traceback" not in checked.stderr


@settings(max_examples=60, deadline=None)
@given(
    path=st.lists(st.sampled_from(["partitions", "totals", "shards", "inputs", "token_store", 0, "index", "shards"])),
    value=st.one_of(HOSTILE_NAMES, st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)),
)
def test_hostile_store_manifest_sections_are_one_line(store, path, value):
    """Property: any value put anywhere in a store manifest's sections is accepted only if the checks
    hold, and is otherwise one ObjcliError, never another exception."""
    manifest = manifest_json(store)
    node = manifest
    for key in path[:-1]:
        inside = isinstance(node, dict) and key in node or isinstance(node, list) and key == 0 and node
        node = node[key] if inside else None
        if node is None:
            return
    if path and isinstance(node, dict):
        node[path[-1]] = value
    try:
        check_store_sections(manifest, "input s/manifest.json")
    except ObjcliError as error:
        assert "\n" not in str(error)


def _megatron_pair(folder: Path, sizes: list[int], tokens: int) -> str:
    """A Megatron MMIDIDX pair written byte by byte (uint16 ids), pointers consistent with ``sizes``."""
    prefix = folder / "data_text_document"
    pointers = np.concatenate([[0], np.cumsum(sizes)[:-1]]) * 2
    document_index = np.arange(len(sizes) + 1, dtype="<i8")
    head = b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(sizes), len(document_index))
    body = np.asarray(sizes, "<i4").tobytes() + pointers.astype("<i8").tobytes() + document_index.tobytes()
    Path(f"{prefix}.idx").write_bytes(head + body)
    Path(f"{prefix}.bin").write_bytes(np.arange(tokens, dtype="<u2").tobytes())
    return str(prefix)


def test_a_megatron_index_with_a_negative_size_or_a_longer_bin_is_one_line(tmp_path):
    """Defect 7: a negative size with pointers consistent with it was read (tokens repeated)."""
    with pytest.raises(ValueError, match="negative size"):
        MegatronInput().open(_megatron_pair(tmp_path, [3, -1, 2], 4), "input_ids", None)
    with pytest.raises(ValueError, match="past the 5 its index lists"):
        MegatronInput().open(_megatron_pair(tmp_path, [3, 2], 9), "input_ids", None)
    opened = MegatronInput().open(_megatron_pair(tmp_path, [3, 2], 5), "input_ids", None)
    assert opened.offsets.tolist() == [0, 3, 5]
    line = _one_line_error(
        run_cli("transform", _megatron_pair(tmp_path, [3, -1, 2], 4), "-t", SPM, "-o", tmp_path / "o", "-q")
    )
    assert "negative size" in line


def test_strict_on_a_store_whose_text_had_bad_records_fails_as_the_text_run(tmp_path):
    """Defect 8: --strict on the derived run exited 0 where the text run exits 1."""
    text = tmp_path / "text"
    text.mkdir()
    good = (SAMPLE / "prose.jsonl").read_text().splitlines(keepends=True)[:10]
    (text / "a.jsonl").write_text("".join(good) + "{broken\n")
    store = tmp_path / "store"
    assert run_cli("tokenize", text, "-t", SPM, "-o", store, "-q").returncode == 0
    from_text = run_cli("transform", text, "-t", SPM, "-o", tmp_path / "t", "--strict", "-q")
    line = _one_line_error(run_cli("transform", store, "-t", SPM, "-o", tmp_path / "s", "--strict", "-q"))
    assert from_text.returncode == 1 and "bad_json" in line and "--strict" in line
    assert run_cli("transform", store, "-t", SPM, "-o", tmp_path / "u", "-q").returncode == 0


@pytest.mark.parametrize("name", ["ABSOLUTE", "../outside.arrow", "sub/../../outside.arrow", 7])
def test_a_saved_dataset_naming_a_file_outside_its_folder_is_one_line(tmp_path, name):
    """Defect 9: an absolute data file name was a FileNotFoundError traceback; '..' read outside the folder."""
    import pyarrow as pa

    folder = tmp_path / "ids"
    folder.mkdir()
    table = pa.table({"input_ids": pa.array([[5, 6, 7], [8, 9]], pa.list_(pa.int32()))})
    with pa.OSFile(str(tmp_path / "outside.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    filename = str(tmp_path / "outside.arrow") if name == "ABSOLUTE" else name
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": filename}]}))
    (folder / "dataset_info.json").write_text(json.dumps({"features": {"input_ids": {"_type": "Sequence"}}}))
    line = _one_line_error(run_cli("transform", folder, "-t", SPM, "-o", tmp_path / "o", "-q"))
    assert "state.json" in line and "inside the folder" in line


def test_a_store_and_its_own_text_are_not_two_sources(store, corpus, tmp_path):
    """Defect 10: the store and the text it was tokenized from as two sources read every document twice."""
    line = _one_line_error(
        run_cli(
            "transform",
            "--source",
            f"s={store}",
            "--source",
            f"t={corpus}",
            "--weights",
            "s=1,t=1",
            "-t",
            SPM,
            "-o",
            tmp_path / "o",
            "-q",
        )  # fmt: skip
    )
    assert "both hold" in line and "token store" in line


def test_trace_of_a_store_says_to_trace_an_output_derived_from_it(corpus, tmp_path):
    """Defect 11: trace STORE 0 said to run verify, which passes."""
    store = tmp_path / "store"
    assert run_cli("tokenize", corpus, "-t", SPM, "-o", store, "--provenance", "-q").returncode == 0
    line = _one_line_error(run_cli("trace", store, "0"))
    assert "token store" in line and "--provenance" in line and "verify" not in line


def test_a_glob_of_a_stores_files_is_one_line_and_never_read_as_text(store, tmp_path):
    line = _one_line_error(run_cli("transform", f"{store}/*", "-t", SPM, "-o", tmp_path / "o", "-q"))
    assert "token store" in line and "give the store's folder" in line


def test_weights_without_a_unit_that_read_as_token_counts_are_refused(store, corpus, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.jsonl").write_text(json.dumps({"text": "a few words here"}) + "\n")
    args = ("--source", f"a={corpus}", "--source", f"b={other}", "-t", SPM, "-o", tmp_path / "o", "-q")
    line = _one_line_error(run_cli("transform", *args, "--weights", "a=100000,b=50000"))
    assert "a=100K" in line


def test_a_budget_smaller_than_every_document_of_a_source_is_said(corpus, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.jsonl").write_text((SAMPLE / "prose.jsonl").read_text().splitlines(keepends=True)[200])
    args = ("--source", f"a={corpus}", "--source", f"b={other}", "-t", SPM, "-o", tmp_path / "o", "-q")
    result = run_cli("transform", *args, "--weights", "a=20K,b=0.005K", "--seq-len", "128")
    assert result.returncode == 0 and "source b: none of its 1 documents was written" in result.stderr
    assert os.path.exists(tmp_path / "o" / "manifest.json")
