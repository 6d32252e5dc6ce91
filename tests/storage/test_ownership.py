"""What an output folder holds that is objcli's (``storage/output.own_files``): ``--overwrite`` removes
the manifest, the files it lists and the formats' side files by their exact names, never a file of
the user's however much it looks like a shard, never an input of the run, and never through a link."""

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runs import SAMPLE, folder_bytes, manifest_json

from objcli.commands.verify import verify_output
from objcli.errors import ObjcliError
from objcli.formats import SIDE_FILES
from objcli.recipe import config_from_values
from objcli.transform import transform

SPM = SAMPLE / "tokenizer.model"


@pytest.fixture(scope="module")
def prose(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("prose") / "p.jsonl"
    path.write_text("".join((SAMPLE / "prose.jsonl").read_text().splitlines(keepends=True)[:40]))
    return path


def _run(inputs, out, overwrite=False, **options):
    values = {"inputs": [str(i) for i in inputs], "tokenizer": str(SPM), "output": str(out), "seq_len": 64, **options}
    return transform(config_from_values(values), workers=1, overwrite=overwrite)


def test_overwrite_keeps_files_shaped_like_shards_and_the_runs_own_input(tmp_path, prose):
    """The issue's case: a Hub-style input and a user's CSV named like shards, inside -o."""
    out = tmp_path / "o"
    out.mkdir()
    shutil.copy(prose, out / "train-00000-of-00001.jsonl")
    (out / "data-00000-of-00001.csv").write_text("a,b\n")
    for seq_len in (128, 64):  # a first run, then another configuration over it with --overwrite
        _run([out / "train-00000-of-00001.jsonl"], out, overwrite=True, seq_len=seq_len)
        assert (out / "data-00000-of-00001.csv").read_text() == "a,b\n"
        assert (out / "train-00000-of-00001.jsonl").read_bytes() == prose.read_bytes()
    assert verify_output(out).ok  # the user's files are not "left by another run"
    with pytest.raises(ObjcliError, match="another configuration"):  # a run's own files still protected
        _run([out / "train-00000-of-00001.jsonl"], out, seq_len=32)


def test_an_input_listed_by_the_outputs_manifest_is_never_removed(tmp_path, prose):
    out = tmp_path / "o"
    _run([prose], out, output_format="parquet")
    shard = out / manifest_json(out)["shards"][0]["files"][0]
    held = shard.read_bytes()
    with pytest.raises(ObjcliError, match="is an input of this run"):
        _run([shard], out, overwrite=True, text_key="text", output_format="parquet", seq_len=32)
    assert shard.read_bytes() == held


def test_a_users_file_where_a_shard_goes_is_never_replaced_and_the_rerun_finishes(tmp_path, prose):
    out = tmp_path / "o"
    out.mkdir()
    (out / "part-00000-of-00001.arrow").write_text("mine")
    with pytest.raises(ObjcliError, match="objcli did not write"):
        _run([prose], out)
    assert (out / "part-00000-of-00001.arrow").read_text() == "mine"
    (out / "part-00000-of-00001.arrow").rename(tmp_path / "moved")
    summary = _run([prose], out)
    assert summary.kept == 1 and verify_output(out).ok  # the finished partition was kept


def test_hf_split_folders_are_checked_like_the_top_level_and_never_followed(tmp_path, prose):
    out = tmp_path / "o"
    (out / "train").mkdir(parents=True)
    (out / "train" / "state.json").write_text('{"mine": 1}')
    with pytest.raises(ObjcliError, match="already holds"):  # as a top-level state.json is refused
        _run([prose], out, output_format="hf", split="validation=0.1")
    assert (out / "train" / "state.json").read_text() == '{"mine": 1}'
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "state.json").write_text("keep")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "train").symlink_to(elsewhere)
    for overwrite in (False, True):
        with pytest.raises(ObjcliError, match="symbolic link"):
            _run([prose], linked, overwrite=overwrite, output_format="hf", split="validation=0.1")
    assert sorted(os.listdir(elsewhere)) == ["state.json"] and (elsewhere / "state.json").read_text() == "keep"


WORDS = st.sampled_from(["part", "train", "data", "validation", "test"])
EXTENSIONS = st.sampled_from(["csv", "jsonl", "arrow", "parquet", "bin", "idx", "provenance", "txt", "json"])
SHARD_LIKE = st.builds(
    lambda w, i, n, e: f"{w}-{i:05d}-of-{n:05d}.{e}", WORDS, st.integers(0, 2), st.just(1), EXTENSIONS
)
OTHER = st.sampled_from(["notes.txt", "README.txt", "manifest.json.bak", "megatron.csv", "state.txt"])
FILES = st.lists(
    st.tuples(st.one_of(SHARD_LIKE, OTHER), st.sampled_from(["file", "input", "link"])),
    min_size=1,
    max_size=6,
    unique_by=lambda f: f[0],
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=FILES, earlier=st.sampled_from([None, "arrow", "megatron", "parquet"]))
def test_overwrite_removes_only_what_objcli_wrote(tmp_path_factory, prose, files, earlier):
    root = tmp_path_factory.mktemp("own")
    out, outside = root / "o", root / "outside"
    outside.mkdir()
    if earlier:
        _run([prose], out, output_format=earlier, seq_len=32)
    out.mkdir(exist_ok=True)
    owned_before = set(os.listdir(out))
    users, inputs = {}, []
    for name, kind in files:
        if kind == "input":
            name = name.rsplit(".", 1)[0] + ".jsonl"
        if name in owned_before or name in users:  # an input's .jsonl name may be another entry's too
            continue
        if kind == "link":
            (outside / name).write_text(f"outside {name}")
            (out / name).symlink_to(outside / name)
        elif kind == "input":
            shutil.copy(prose, out / name)
            inputs.append(out / name)
        else:
            (out / name).write_text(f"user {name}")
        users[name] = (out / name).read_bytes()
    outside_bytes = folder_bytes(outside)
    try:
        _run(inputs or [prose], out, overwrite=True)
        finished = True
    except ObjcliError as error:  # a user's file where one of this run's own goes: said, never replaced
        assert "objcli did not write" in str(error)
        finished = False
    for name, held in users.items():
        if SIDE_FILES.is_side_file(name):
            continue  # a format's exact side-file name is objcli's (documented)
        assert (out / name).read_bytes() == held, name
    assert folder_bytes(outside) == outside_bytes
    if finished:  # verify names only the user's files shaped like this output's shards, never its own
        problems = verify_output(out).problems
        assert all(p.split(":")[0] in users and "not listed in the manifest" in p for p in problems), problems
