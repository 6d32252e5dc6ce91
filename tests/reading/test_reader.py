"""``objcli.reading.Rows`` over written shards of every format (the registry): the rows each format's own
reader gives, at the Arrow output's dtypes; and the PyTorch datasets over it, with DataLoader workers,
ranks and a saved state."""

import json

import numpy as np
import pytest
from optional import lazily, requires
from runs import SAMPLE, run_transform

from objcli.formats import FORMATS
from objcli.reading import Rows

SPM = SAMPLE / "tokenizer.model"
torch = lazily("torch")


@pytest.fixture(scope="module")
def arrow_rows(small_corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("reader") / "arrow"
    run_transform([small_corpus], SPM, out, objective="clm", seq_len=64, split="validation=10%", shard_size="200")
    return out


@pytest.mark.parametrize("name", [n for n, f in FORMATS.items() if not f.packs_positions])
def test_every_written_format_reads_as_the_arrow_rows(name, small_corpus, arrow_rows, tmp_path):
    """Rows of a format that holds rows equal the Arrow rows, at the widths its manifest names; a format of
    whole documents holds their ids back to back, as --packing none writes them."""
    f = FORMATS[name]
    packing = {"packing": "none"} if f.whole_documents else {}
    options = {"objective": "clm", "seq_len": 64, "split": "validation=10%", **packing}
    run_transform([small_corpus], SPM, tmp_path / "out", output_format=name, shard_size="200", **options)
    reference = arrow_rows if not packing else tmp_path / "arrow"
    if packing:
        run_transform([small_corpus], SPM, reference, shard_size="200", **options)
    for split in ("train", "validation"):
        mine, theirs = Rows(tmp_path / "out", split), Rows(reference, split)
        if f.whole_documents:
            assert np.array_equal(*(np.concatenate([r["input_ids"] for r in x]) for x in (mine, theirs)))
            continue
        assert len(mine) == len(theirs) > 0
        shared = [c for c in mine.columns if c in theirs.columns]
        assert "input_ids" in shared
        for i in range(len(mine)):
            a, b = mine[i], theirs[i]
            for column in shared:
                assert np.array_equal(a[column], b[column]), (split, i, column)
                assert a[column].dtype == mine.dtypes[column]  # the width the format's manifest declares


def test_a_missing_split_and_a_bad_index_are_one_line(arrow_rows):
    from objcli.errors import ObjcliError

    with pytest.raises(ObjcliError, match="a file, not an output folder"):
        Rows(arrow_rows / "manifest.json")
    with pytest.raises(ObjcliError, match="no manifest.json"):
        Rows(arrow_rows / "nothing-here")
    with pytest.raises(ObjcliError, match="has no split 'test' \\(its splits: train, validation\\)"):
        Rows(arrow_rows, "test")
    rows = Rows(arrow_rows, "train")
    assert np.array_equal(rows[-1]["input_ids"], rows[len(rows) - 1]["input_ids"])
    with pytest.raises(IndexError):
        rows[len(rows)]


@requires("torch")
def test_torch_loaders_read_every_row_once_and_resume(arrow_rows):
    from objcli.reading.torch_rows import IterableTorchRows, TorchRows

    rows = Rows(arrow_rows, "train")
    expected = torch.stack([torch.from_numpy(rows[i]["input_ids"].astype(np.int64)) for i in range(len(rows))])
    mapped = torch.utils.data.DataLoader(TorchRows(rows), batch_size=5)
    assert torch.equal(torch.cat([b["input_ids"] for b in mapped]), expected)
    seen = []
    for rank in range(3):  # each rank's rows, split again between two workers for one of them
        loader = torch.utils.data.DataLoader(
            IterableTorchRows(rows, rank, 3), batch_size=4, num_workers=2 * (rank == 1)
        )
        seen += [row for batch in loader for row in batch["input_ids"]]
    assert sorted(map(tuple, torch.stack(seen).tolist())) == sorted(map(tuple, expected.tolist()))
    dataset = IterableTorchRows(rows, 1, 2)
    stream = iter(dataset)
    first = [next(stream)["input_ids"] for _ in range(7)]
    state = json.loads(json.dumps(dataset.state_dict()))
    again = IterableTorchRows(rows, 1, 2)
    again.load_state_dict(state)
    rest = [row["input_ids"] for row in again]
    whole = [row["input_ids"] for row in IterableTorchRows(rows, 1, 2)]
    assert len(first) + len(rest) == len(whole)
    assert all(torch.equal(a, b) for a, b in zip(first + rest, whole))


def test_importing_the_reader_imports_no_objective_and_no_store_kind():
    """``import objcli.reading`` loads what reading needs: the registries of objectives and of store kinds are
    filled when first asked for (a plan's reader asks for its objective when it opens one), not on import."""
    import subprocess
    import sys

    code = (
        "import sys, objcli.reading\n"
        "loaded = [m for m in sys.modules if m.startswith(('objcli.objectives.', 'objcli.stores.'))]\n"
        "print(' '.join(sorted(loaded)))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert not [m for m in loaded if m.rsplit(".", 1)[1] not in ("base", "supply")], loaded
