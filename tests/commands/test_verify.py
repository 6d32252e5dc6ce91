"""``objcli verify``: passes on every objective and format, and catches damage and broken invariants."""

import hashlib
import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runs import cli, run_transform

from objcli.commands.verify import verify_output

OBJECTIVES = [
    ("clm", {}),
    ("clm", {"packing": "best-fit"}),
    ("fim", {}),
    ("mlm", {}),
    ("mlm", {"whole_word": True}),
    ("mlm", {"packing": "best-fit"}),
    ("electra", {}),
    ("nsp", {}),
    ("sop", {}),
    ("span-corruption", {}),
    ("prefix-lm", {}),
    ("prefix-lm", {"layout": "encdec", "pack": True}),
    ("prefix-lm", {"pack": True}),
    ("ul2", {}),
    ("ul2", {"layout": "decoder"}),
    ("bart", {}),
    ("bart", {"pack": True}),
]


@pytest.fixture(scope="module")
def corpus(small_corpus):
    return [small_corpus / "prose.jsonl", small_corpus / "code.jsonl"]


@pytest.mark.parametrize(
    "objective, options", OBJECTIVES, ids=lambda x: x if isinstance(x, str) else "-".join(map(str, x.values()))
)
def test_every_objective_passes(corpus, sample_tokenizer, tmp_path, objective, options):
    run_transform(
        corpus, sample_tokenizer, tmp_path / "out", objective=objective, seq_len=128, shard_size="100", **options
    )
    report = verify_output(tmp_path / "out")
    assert report.problems == []
    assert report.shards > 1 and report.rows > 100


@pytest.mark.parametrize("output_format", ["parquet", "npy", "megatron"])
def test_every_format_passes(corpus, sample_tokenizer, tmp_path, output_format):
    run_transform(
        corpus, sample_tokenizer, tmp_path / "out", seq_len=128, shard_size="100", output_format=output_format
    )
    assert verify_output(tmp_path / "out").problems == []


@pytest.fixture
def written(corpus, sample_tokenizer, tmp_path):
    out = tmp_path / "out"
    run_transform(corpus, sample_tokenizer, out, seq_len=128, shard_size="100")
    return out


def invoke_verify(folder):
    return cli(["verify", str(folder)])


def test_cli_exit_status_and_summary(written):
    result = invoke_verify(written)
    assert result.exit_code == 0
    assert result.output.startswith(f"objcli verify: {written}: ") and "every check passed" in result.output


def test_catches_a_flipped_byte(written):
    shard = sorted(written.glob("part-*"))[1]
    data = bytearray(shard.read_bytes())
    data[len(data) // 3] ^= 0x01
    shard.write_bytes(bytes(data))
    result = invoke_verify(written)
    assert result.exit_code == 1
    assert f"objcli verify: {shard.name}: {shard.name}: sha256 differs from the manifest" in result.output
    assert "1 problem(s)" in result.output


def test_catches_a_missing_shard(written):
    shard = sorted(written.glob("part-*"))[-1]
    shard.unlink()
    result = invoke_verify(written)
    assert result.exit_code == 1
    assert f"{shard.name} is missing" in result.output


def test_catches_a_truncated_shard(written):
    shard = sorted(written.glob("part-*"))[0]
    shard.write_bytes(shard.read_bytes()[:-100])
    assert any("sha256 differs" in p for p in verify_output(written).problems)


def test_catches_an_unlisted_shard(written):
    (written / "part-00099-of-00100.arrow").write_bytes(b"")
    assert verify_output(written).problems == [
        "part-00099-of-00100.arrow: not listed in the manifest (left by another run?)"
    ]


def _rewrite_first_shard(folder, change):
    """Apply ``change`` to the first shard's columns and re-record its sha256, so only the
    invariant checks can notice."""
    manifest = json.loads((folder / "manifest.json").read_text())
    shard = manifest["shards"][0]
    path = folder / shard["files"][0]
    table = pa.ipc.open_stream(pa.memory_map(str(path))).read_all()
    columns = table.to_pydict()
    change(columns)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(pa.table(columns, schema=table.schema))
    path.write_bytes(sink.getvalue().to_pybytes())
    shard["sha256"][shard["files"][0]] = hashlib.sha256(path.read_bytes()).hexdigest()
    (folder / "manifest.json").write_text(json.dumps(manifest))


def test_catches_broken_segment_ids(written):
    def swap(columns):
        row = next(r for r in columns["segment_ids"] if max(r) > 1)
        row[0], row[-1] = row[-1], row[0]  # a later segment first, segment 1 last

    _rewrite_first_shard(written, swap)
    problems = verify_output(written).problems
    assert problems == [
        f"{sorted(written.glob('part-*'))[0].name}: segment_ids do not count up from 1 with padding (0) only at the "
        "end of a row"
    ]


def test_catches_positions_that_do_not_restart(written):
    def shift(columns):
        columns["position_ids"][3][0] = 1  # in range, but a segment must start at 0

    _rewrite_first_shard(written, shift)
    assert any("position_ids do not restart at 0" in p for p in verify_output(written).problems)


def test_catches_a_value_out_of_range(written):
    def poison(columns):
        columns["input_ids"][0][5] = 65_000  # fits the column's uint16, past the vocabulary

    _rewrite_first_shard(written, poison)
    assert any("input_ids has values outside [0, " in p for p in verify_output(written).problems)


def test_catches_sentinels_out_of_order(corpus, sample_tokenizer, tmp_path):
    out = tmp_path / "t5"
    run_transform(corpus, sample_tokenizer, out, objective="span-corruption", seq_len=128, shard_size="100")
    sentinels = json.loads((out / "manifest.json").read_text())["special_tokens"]["sentinels"]

    def reorder(columns):
        labels = columns["labels"][0]
        first, second = labels.index(sentinels[0]), labels.index(sentinels[1])
        labels[first], labels[second] = labels[second], labels[first]

    _rewrite_first_shard(out, reorder)
    problems = verify_output(out).problems
    assert any("labels hold sentinels out of order" in p for p in problems)
    assert any("input_ids and labels hold different sentinel sequences" in p for p in problems)


@pytest.mark.parametrize("pack", [False, True])
def test_catches_prefix_labels_that_are_not_masked(corpus, sample_tokenizer, tmp_path, pack):
    out = tmp_path / "prefix"
    run_transform(corpus, sample_tokenizer, out, objective="prefix-lm", seq_len=128, shard_size="100", pack=pack)

    def unmask(columns):
        columns["labels"][0][0] = columns["input_ids"][0][1]

    _rewrite_first_shard(out, unmask)
    assert any("labels are not -100 on the prefix" in p for p in verify_output(out).problems)


@given(sizes=st.lists(st.integers(0, 3000), max_size=12), writeback=st.integers(1, 4096), pinned=st.booleans())
@settings(max_examples=60, deadline=None)
def test_a_hashing_file_holds_and_hashes_exactly_what_was_written(sizes, writeback, pinned, tmp_path_factory):
    """Whatever the sizes of the writes, and however often the writeback is started early (the
    threshold is lowered here so that it happens between and inside small writes), the file holds
    the bytes written, in order, and the digest is theirs: hashed on another thread, or in the
    writer's own where it is pinned to one core."""
    from objcli.storage import files

    path = tmp_path_factory.mktemp("hashing") / "shard.bin"
    chunks = [bytes((k * 31 + i) % 251 for i in range(n)) for k, n in enumerate(sizes)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(files, "WRITEBACK_BYTES", writeback)
        patch.setattr(files, "OVERLAP_BYTES", 1024)  # the hash on another thread too
        patch.setattr(files, "_several_cores", lambda: not pinned)
        out = files.HashingFile(path)
        for chunk in chunks:
            assert out.write(chunk) == len(chunk)
        out.close()
    assert path.read_bytes() == b"".join(chunks)
    assert out.digest.hexdigest() == hashlib.sha256(b"".join(chunks)).hexdigest()
