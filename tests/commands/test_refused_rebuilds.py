"""A refused reshard or merge into a folder it made leaves no folder behind (issue 81: not even its lock
file); one into a folder that was there leaves the folder as it was."""

import pytest
from runs import SAMPLE, run_transform

from objcli.commands.reshard import reshard
from objcli.errors import ObjcliError


def test_a_refused_reshard_leaves_no_folder(tmp_path):
    run_transform([SAMPLE / "prose.jsonl"], SAMPLE / "tokenizer.model", tmp_path / "rows", seq_len=128)
    for fmt in ("megatron", "plan"):
        with pytest.raises(ObjcliError, match="reshard"):
            reshard(str(tmp_path / "rows"), str(tmp_path / f"new-{fmt}" / "deeper"), "10", output_format=fmt)
        assert not (tmp_path / f"new-{fmt}").exists()
    (tmp_path / "there").mkdir()
    (tmp_path / "there" / "notes.txt").write_text("mine")
    with pytest.raises(ObjcliError, match="reshard"):
        reshard(str(tmp_path / "rows"), str(tmp_path / "there"), "10", output_format="megatron")
    assert (tmp_path / "there" / "notes.txt").read_text() == "mine"
