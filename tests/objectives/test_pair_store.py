"""A pair store (``objcli tokenize --preference``, issue 64 item 5): preference pairs rendered and
encoded once; ``--objective preference`` (unpacked and packed) and ``reward`` derived from it write the
text runs' bytes, count the same skips, and render nothing; a run that would render otherwise is
refused in one line; the CLI makes the same store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runs import run_cli, run_tokenize, run_transform, shard_files
from trl_families import family_folder, preference_records, train_tokenizer

from objcli.errors import ObjcliError

pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair-store")
    folder = family_folder(train_tokenizer(root), "qwen2_5", "qwen2_5", root / "tokenizer")
    records = preference_records("qwen2_5", 60, seed=5)
    records[7] = {"prompt": "p", "chosen": "same", "rejected": "same"}  # a counted skip, kept as such
    records[11]["margin"] = 1.5
    data = root / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = run_tokenize([data], folder / "tokenizer.json", root / "store", "pairs", objective="preference")
    return folder, data, root / "store", summary


@pytest.mark.parametrize(
    "options",
    [
        {"objective": "preference", "packing": "none", "seq_len": 160},
        {"objective": "preference", "packing": "best-fit", "seq_len": 300},
        {"objective": "reward", "seq_len": 160, "margin": True},
    ],
    ids=["preference-none", "preference-best-fit", "reward-margin"],
)
def test_runs_from_a_pair_store_write_the_text_runs_bytes(options, made, tmp_path):
    folder, data, store, _ = made
    text = run_transform([data], folder, tmp_path / "text", **options)
    derived = run_transform([store], folder, tmp_path / "derived", **options)
    assert shard_files(tmp_path / "derived") == shard_files(tmp_path / "text") != {}
    assert derived.manifest["totals"]["skipped_by_reason"] == text.manifest["totals"]["skipped_by_reason"]
    assert derived.manifest["totals"]["skipped_by_reason"].get("identical_pair") == 1


def test_a_pair_store_serves_pair_objectives_only_and_its_template_only(made, tmp_path):
    folder, _, store, summary = made
    assert summary.manifest["token_store"]["tokenized"] == "pairs"
    with pytest.raises(ObjcliError, match="holds rendered preference pairs"):
        run_transform([store], folder, tmp_path / "clm", objective="clm", seq_len=64)
    other = tmp_path / "other.jinja"
    other.write_text(
        Path(folder / "tokenizer_config.json").read_text().replace("{", "{{").replace("}", "}}")[:0] + "{{ 1 }}"
    )
    with pytest.raises(ObjcliError, match="the store was rendered with chat template"):
        run_transform([store], folder, tmp_path / "t", objective="preference", seq_len=64, chat_template=str(other))


def test_the_cli_makes_the_same_store(made, tmp_path):
    folder, data, store, _ = made
    done = run_cli(
        "tokenize", data, "-t", folder / "tokenizer.json", "-o", tmp_path / "cli", "--preference", "--workers", "1"
    )
    assert done.returncode == 0, done.stderr
    assert shard_files(tmp_path / "cli") == shard_files(store)
    wrong = run_cli(
        "tokenize", data, "-t", folder / "tokenizer.json", "-o", tmp_path / "x", "--preference", "--turns", "each"
    )
    assert wrong.returncode == 1 and wrong.stderr.startswith("Error: --turns: applies to a chat store")


@pytest.mark.parametrize(
    "column, edit, said",
    [
        ("q_prompt", lambda v: v + 10_000, "q_prompt lies outside its renderings"),
        ("q_prompt", lambda v: -1, "q_prompt lies outside its renderings"),
        ("q_lengths", lambda v: [x + 7 for x in v], "q_lengths do not add up to their ids"),
        ("q_lengths", lambda v: [-5, *v[1:]], "q_lengths do not add up to their ids"),
        ("q_lengths", lambda v: v[:2], "q_lengths are not its three renderings"),
    ],
)
def test_a_pair_store_edited_by_hand_is_one_line_never_wrong_rows(made, tmp_path, column, edit, said):
    """A shard rewritten with other pair columns (and the manifest's sha256 made to match): one line
    naming the shard and what does not hold, never rows cut at the wrong place or a crash."""
    import hashlib
    import shutil

    import pyarrow as pa

    from objcli.formats.store import block_file_of

    folder, _, store, _ = made
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    shard = sorted(copy.glob("*.store"))[0]
    table = pa.ipc.open_stream(pa.BufferReader(shard.read_bytes())).read_all()
    index = table.schema.get_field_index(column)
    values = [edit(v) for v in table.column(column).to_pylist()]
    table = table.set_column(index, table.schema.field(index), pa.array(values, table.schema.field(index).type))
    with pa.ipc.new_stream(str(shard), table.schema) as writer:
        writer.write_table(table)
    blocks = shard.with_name(shard.name + ".blocks")
    blocks.write_bytes(block_file_of(shard))  # its block digests made to match too
    manifest = json.loads((copy / "manifest.json").read_text())
    for entry in manifest["shards"]:
        if shard.name in entry["sha256"]:
            for path in (shard, blocks):
                entry["sha256"][path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
                entry["bytes"][path.name] = path.stat().st_size
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ObjcliError, match=f"input .*{shard.name}: .*{said}.*; tokenize"):
        run_transform([copy], folder, tmp_path / "out", objective="preference", seq_len=160)
