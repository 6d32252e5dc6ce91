"""Per-block digests of a token store's shards (issue 82, item 3): recorded as each shard is written, checked
for exactly the blocks a reader reads (a plan's rows), every block by a derived run and by ``verify``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import xxhash
from runs import SAMPLE, run_tokenize, run_transform

import objcli.storage.blocks as blocks
from objcli.commands.verify import verify_output
from objcli.errors import ObjcliError
from objcli.reading import Rows
from objcli.storage.blocks import MAGIC, ShardBlocks, read_block_file

SPM = SAMPLE / "tokenizer.model"


def _store(out, monkeypatch, block_bytes=64 << 10):
    monkeypatch.setattr(blocks, "BLOCK_BYTES", block_bytes)  # small blocks: a sample corpus holds several
    run_tokenize([SAMPLE / "prose.jsonl"], SPM, out, partition_size="16MiB")
    return out


def test_the_block_file_holds_each_blocks_xxh3(tmp_path, monkeypatch):
    store = _store(tmp_path / "store", monkeypatch)
    shard = store / "part-00000-of-00001.store"
    data = shard.read_bytes()
    raw = (store / "part-00000-of-00001.store.blocks").read_bytes()
    made = read_block_file(raw, "blocks")
    expected = [xxhash.xxh3_128(data[k : k + made.block]).digest() for k in range(0, len(data), made.block)]
    assert raw.startswith(MAGIC) and (made.block, made.size, made.itemsize) == (64 << 10, len(data), 2)
    assert made.digests == expected and len(expected) >= 6 and verify_output(store).ok
    ids = pa.ipc.open_stream(pa.BufferReader(data)).read_all().column("ids")  # where each batch's ids lie
    assert [count for count, _ in made.batches] == [len(chunk.values) for chunk in ids.chunks]
    for (count, start), chunk in zip(made.batches, ids.chunks):
        assert np.frombuffer(data[start : start + 2 * count], np.uint16).tolist() == chunk.values.to_pylist()


def test_a_plan_reader_checks_only_the_blocks_it_reads(tmp_path, monkeypatch):
    store = _store(tmp_path / "store", monkeypatch)
    run_transform([store], SPM, tmp_path / "plan", seq_len=256, output_format="plan")
    run_transform([store], SPM, tmp_path / "rows", seq_len=256)
    rows = Rows(tmp_path / "plan")
    written = Rows(tmp_path / "rows")
    last = len(rows) - 1
    assert rows[last]["input_ids"].tolist() == written[last]["input_ids"].tolist()
    opened = rows._opened_plan().stores[0]._partitions[0]
    checked = {id(c.source.blocks): c.source.blocks for c in opened.chunks}
    (shard_blocks,) = checked.values()
    assert 1 <= sum(shard_blocks.checked) <= 2 < len(shard_blocks.checked)  # the last rows' blocks, not the shard


def test_an_edited_block_is_refused_where_it_is_read_and_everywhere_whole(tmp_path, monkeypatch):
    store = _store(tmp_path / "store", monkeypatch)
    run_transform([store], SPM, tmp_path / "plan", seq_len=256, output_format="plan")
    shard = store / "part-00000-of-00001.store"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a token in a middle block
    shard.write_bytes(bytes(data))
    rows = Rows(tmp_path / "plan")
    first = rows[0]["input_ids"]  # its block is intact: read
    assert len(first) == 256
    with pytest.raises(ObjcliError, match="does not match the digests"):
        for k in range(len(rows)):
            rows[k]
    with pytest.raises(ObjcliError, match="does not match the digests"):
        run_transform([store], SPM, tmp_path / "derived", seq_len=256)
    report = verify_output(store)
    assert not report.ok


def test_a_block_checked_once_is_not_hashed_again_until_its_shard_changes(tmp_path, monkeypatch):
    """A reader over many partitions opens them again (it keeps 64): a block checked stays checked for the
    process while its shard is unchanged, and a shard written since is checked again and refused."""
    import os

    import objcli.reading.store_tokens as store_tokens

    store = _store(tmp_path / "store", monkeypatch)
    run_transform([store], SPM, tmp_path / "plan", seq_len=256, output_format="plan")
    hashed = []
    matches = ShardBlocks.matches
    monkeypatch.setattr(ShardBlocks, "matches", lambda self, k, data: hashed.append(k) or matches(self, k, data))
    monkeypatch.setattr(store_tokens, "_CHECKED_BLOCKS", set())
    last = len(Rows(tmp_path / "plan")) - 1
    first_read = Rows(tmp_path / "plan")[last]["input_ids"].tolist()
    checked = list(hashed)
    assert 1 <= len(checked) <= 2
    again = Rows(tmp_path / "plan", tokenizer=str(SPM))  # another reader: its partitions opened anew
    assert again[last]["input_ids"].tolist() == first_read and hashed == checked  # no block hashed again
    shard = store / "part-00000-of-00001.store"
    data = bytearray(shard.read_bytes())
    data[checked[0] * (64 << 10) + 7] ^= 0xFF  # inside a block the rows read
    shard.write_bytes(bytes(data))
    os.utime(shard, ns=(shard.stat().st_atime_ns, shard.stat().st_mtime_ns + 10**9))  # written since
    with pytest.raises(ObjcliError, match="does not match the digests"):
        Rows(tmp_path / "plan", tokenizer=str(SPM))[last]


def test_a_block_file_of_another_shard_is_refused(tmp_path, monkeypatch):
    store = _store(tmp_path / "store", monkeypatch)
    raw = (store / "part-00000-of-00001.store.blocks").read_bytes()
    assert not ShardBlocks(store / "x", raw).check(np.zeros(10, np.uint8), 0, 10)  # another size
    with pytest.raises(ValueError, match="one digest for each block"):
        read_block_file(raw[:-1], "cut")
    with pytest.raises(ValueError, match="not a block file"):
        read_block_file(b"PK" + raw[2:], "zip")


def test_a_shard_cut_short_under_a_reader_is_one_line(tmp_path, monkeypatch):
    """A store shard truncated while a plan reader has it mapped: refused in one line, never a bus error."""
    store = _store(tmp_path / "store", monkeypatch)
    run_transform([store], SPM, tmp_path / "plan", seq_len=256, output_format="plan")
    rows = Rows(tmp_path / "plan")
    assert len(rows[0]["input_ids"]) == 256  # mapped, and read
    shard = store / "part-00000-of-00001.store"
    with open(shard, "r+b") as f:
        f.truncate(shard.stat().st_size // 2)
    with pytest.raises(ObjcliError, match="does not match the digests"):
        rows[len(rows) - 1]


def test_a_plan_run_reads_lengths_not_ids(tmp_path, monkeypatch):
    """Issue 82, item 3: a plan run checks and reads the blocks that hold the documents' lengths and measures,
    not those holding ids alone; a damaged ids block is refused by the reader where a row reads it, a damaged
    block of lengths by the plan run itself."""
    store = _store(tmp_path / "store", monkeypatch)
    shard = store / "part-00000-of-00001.store"
    made = read_block_file((store / "part-00000-of-00001.store.blocks").read_bytes(), "blocks")
    count, start = made.batches[0]
    inside = -(-start // made.block) * made.block + made.block // 2  # a byte of a block of ids alone
    assert inside + made.block // 2 <= start + 2 * count
    data = bytearray(shard.read_bytes())
    data[inside] ^= 0xFF
    shard.write_bytes(bytes(data))
    run_transform([store], SPM, tmp_path / "plan", seq_len=256, output_format="plan")  # reads no id: done
    with pytest.raises(ObjcliError, match="does not match the digests"):
        list(Rows(tmp_path / "plan"))
    with pytest.raises(ObjcliError, match="does not match the digests"):
        run_transform([store], SPM, tmp_path / "arrow", seq_len=256)  # a run of ids reads it
    data[inside] ^= 0xFF
    data[start - 8] ^= 0xFF  # the lists' offsets, just before the ids: a document's length
    shard.write_bytes(bytes(data))
    with pytest.raises(ObjcliError, match="does not match the digests"):
        run_transform([store], SPM, tmp_path / "plan-2", seq_len=256, output_format="plan")


def test_a_store_in_object_storage_is_fetched_a_few_blocks_a_request(tmp_path, monkeypatch):
    """A shard in object storage: a read fetches the aligned group of blocks its bytes lie in with one ranged
    request (``FETCH_BYTES``), checks and keeps each, and reads the next blocks of the group from memory; the
    blocks kept stay under ``KEPT_BYTES``; a damaged block of the group is refused."""
    import objcli.reading.store_tokens as store_tokens

    store = _store(tmp_path / "store", monkeypatch, block_bytes=16 << 10)
    shard = store / "part-00000-of-00001.store"
    data = shard.read_bytes()
    made = ShardBlocks(shard, (store / "part-00000-of-00001.store.blocks").read_bytes())
    monkeypatch.setattr(store_tokens, "FETCH_BYTES", 64 << 10)  # four blocks a request
    ranges = []

    class Bucket:
        def cat_file(self, inner, start, end):
            ranges.append((start, end))
            return data[start:end]

    ranged = object.__new__(store_tokens._Ranged)
    ranged.where, ranged.blocks, ranged.cache = "s3://b/shard", made, store_tokens._BlockCache(96 << 10)
    ranged.fs, ranged.inner = Bucket(), "b/shard"
    size = 16 << 10
    for start in (5 * size + 10, 6 * size, 4 * size, 7 * size + 3):  # blocks 5, 6, 4, 7: one group
        assert ranged.read(start, start + 100, np.array([start // size])).tobytes() == data[start : start + 100]
    assert ranges == [(4 * size, 8 * size)]
    ranged.read(0, 10, np.array([0]))  # another group: the oldest kept blocks go
    assert ranges[-1] == (0, 4 * size) and ranged.cache.held <= 96 << 10
    damaged = data[: 9 * size] + bytes([data[9 * size] ^ 1]) + data[9 * size + 1 :]
    Bucket.cat_file = lambda self, inner, start, end: damaged[start:end]
    with pytest.raises(ObjcliError, match="does not match the digests"):
        ranged.read(8 * size, 8 * size + 5, np.array([8]))  # block 8 is sound; 9, in its group, is not
