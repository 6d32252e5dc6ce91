"""``objcli inspect --split --start``: a row of one split reached directly, numbered within its split, as the
reader numbers it (issue 83, item 6)."""

import numpy as np
import pytest
from runs import SAMPLE, cli, run_transform

from objcli.reading import Rows
from objcli.tokenizers import open_tokenizer

SPM = SAMPLE / "tokenizer.model"


def test_inspect_shows_row_n_of_a_split(tmp_path):
    out = tmp_path / "out"
    run_transform([SAMPLE / "prose.jsonl"], SPM, out, seq_len=64, split="validation=10%", shard_size="50")
    rows = Rows(out, "validation")
    assert len(rows) > 60 and len(rows.shards) > 1
    shown = cli(["inspect", str(out), "--split", "validation", "--start", "57", "-n", "2"])
    assert shown.exit_code == 0, shown.output
    headers = [line for line in shown.output.splitlines() if line.startswith("── ")]
    assert [h.split(" · ")[0] for h in headers] == ["── validation row 57", "── validation row 58"]
    assert headers[0].split(" · ")[1] == rows.file_of(57)
    text = open_tokenizer(SPM).decode(np.asarray(rows[57]["input_ids"]))
    assert text.split()[0] in shown.output.split("── validation row 58")[0]
    past = cli(["inspect", str(out), "--split", "validation", "--start", str(len(rows) + 1)])
    assert past.exit_code != 0 and f"has {len(rows):,} rows in its validation split" in past.output


@pytest.mark.parametrize("split", ["test", ""])
def test_inspect_of_a_split_that_is_not_there_is_one_line(split, tmp_path):
    run_transform([SAMPLE / "prose.jsonl"], SPM, tmp_path / "out", seq_len=64, split="validation=10%")
    shown = cli(["inspect", str(tmp_path / "out"), "--split", split])
    assert shown.exit_code != 0 and "has no split" in shown.output and len(shown.output.splitlines()) == 1
