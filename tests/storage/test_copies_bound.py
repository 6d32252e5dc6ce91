"""The cache of objects copied from object storage (``remote-copies``) is bounded (issue 83, item 3): past
``OBJCLI_REMOTE_COPIES_BYTES`` the copies used longest ago are removed, never the one just made nor one in use."""

from __future__ import annotations

import os

import fsspec

import objcli.storage.copies as copies


def _put(name: str, size: int) -> str:
    fs = fsspec.filesystem("memory")
    fs.pipe(f"/bound/{name}", os.urandom(size))
    return f"memory://bound/{name}"


def test_the_copies_stay_within_their_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("OBJCLI_REMOTE_COPIES_BYTES", str(250_000))
    monkeypatch.setattr(copies, "IDLE_SECONDS", 0)
    made = []
    for k in range(4):
        folder = copies.local_copy(_put(f"o{k}", 100_000), [f"/bound/o{k}"], "/bound")
        os.utime(folder, (k, k))  # used in this order, long ago
        made.append(folder)
    kept = [folder.is_dir() for folder in made]
    assert kept[-1] and sum(kept) == 2  # 400 KB made, 250 KB allowed: the two used longest ago went
    assert (made[-1] / "o3").stat().st_size == 100_000
    again = copies.local_copy(_put("o3", 100_000), ["/bound/o3"], "/bound")
    assert again == made[-1]  # still there: not fetched again


def test_a_copy_in_use_is_never_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("OBJCLI_REMOTE_COPIES_BYTES", "1")
    first = copies.local_copy(_put("a", 50_000), ["/bound/a"], "/bound")
    second = copies.local_copy(_put("b", 50_000), ["/bound/b"], "/bound")
    assert first.is_dir() and second.is_dir()  # both used within IDLE_SECONDS: over the limit, kept
    monkeypatch.setenv("OBJCLI_REMOTE_COPIES_BYTES", "not a number")
    assert copies._limit() == copies.DEFAULT_LIMIT_BYTES
