"""The reader's promises under hostile use (issue 81): a reader's rows are one run's, starts and states are
checked, a plan's tokenizer is found as the run named it (a folder too) or where it moved, and the PyTorch
adapters follow the epoch protocol of ``DataLoader`` and torchdata's ``StatefulDataLoader``: every epoch
every row once, whatever the world, the workers and where a run stopped and resumed."""

import copy
import json
import shutil
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from optional import lazily, requires
from runs import SAMPLE, run_tokenize, run_transform

from objcli.errors import ObjcliError
from objcli.reading import Rows

SPM = SAMPLE / "tokenizer.model"
torch = lazily("torch")


@pytest.fixture(scope="module")
def output(small_corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("protocol") / "arrow"
    run_transform([small_corpus], SPM, out, objective="clm", seq_len=64, shard_size="40")
    return out


@pytest.fixture(scope="module")
def llama_store(tmp_path_factory):
    out = tmp_path_factory.mktemp("protocol-store") / "store"
    # several partitions: several plan files
    run_tokenize([SAMPLE / "prose.jsonl"], SAMPLE / "llama-style", out, partition_size="64KiB", batch_size="16KiB")
    return out


def _ids(rows) -> list[tuple]:
    return [tuple(np.asarray(r["input_ids"]).tolist()) for r in rows]


def test_a_plan_made_with_a_tokenizer_folder_reads_and_a_moved_one_is_given(llama_store, tmp_path):
    """``-t FOLDER`` (a tokenizer.json's folder) is the run's tokenizer; moved, the reader and inspect take its
    new path, and only a different tokenizer is refused."""
    from objcli.commands.show import inspect_output
    from objcli.commands.verify import verify_output

    folder = shutil.copytree(SAMPLE / "llama-style", tmp_path / "tok")
    run_transform([llama_store], folder, tmp_path / "plan", objective="mlm", seq_len=64, output_format="plan")
    run_transform([llama_store], folder, tmp_path / "arrow", objective="mlm", seq_len=64)
    planned, written = Rows(tmp_path / "plan"), Rows(tmp_path / "arrow")
    assert len(planned) == len(written) > 0
    assert all(np.array_equal(planned[i]["labels"], written[i]["labels"]) for i in range(len(planned)))
    assert not verify_output(str(tmp_path / "plan")).problems
    folder.rename(tmp_path / "moved")
    with pytest.raises(ObjcliError, match="the plan's tokenizer is not there"):
        Rows(tmp_path / "plan")[0]
    moved = Rows(tmp_path / "plan", tokenizer=str(tmp_path / "moved"))
    assert np.array_equal(moved[3]["labels"], written[3]["labels"])
    shown = list(inspect_output(str(tmp_path / "plan"), 1, str(tmp_path / "moved"), False))
    assert shown[0].startswith("── row 0")
    with pytest.raises(ObjcliError, match="not the tokenizer the plan was made with"):
        Rows(tmp_path / "plan", tokenizer=str(SPM))[0]


def test_starts_and_states_outside_a_view_are_refused(output):
    rows = Rows(output)
    view = rows.shard(1, 3)
    for start in (-2, -1, len(view) + 1, 1.5, True):
        with pytest.raises(ValueError, match="a start is a row of this view"):
            view.iterate(start)
    assert list(view.iterate(len(view))) == []
    for bad in (-5, len(view) + 1, "3", None):
        state = {**view.state(0), "next_row": bad}
        with pytest.raises(ObjcliError, match="not a row of its view"):
            view.resume(state)
    with pytest.raises(ObjcliError, match="other rows"):
        rows.shard(0, 3).resume(view.state(2))
    assert _ids(view.resume(json.loads(json.dumps(view.state(2))))) == _ids(view)[2:]


@pytest.mark.parametrize("output_format", ["arrow", "parquet"])
def test_a_reader_refuses_the_files_of_the_run_that_replaced_its_output(small_corpus, tmp_path, output_format):
    """A rerun with --overwrite (same row counts: only the seed differs) under an open reader: the reader
    gives the rows it had, then refuses, never the new run's rows as the old run's; a state saved before is
    refused by a reader of the new run."""
    out = tmp_path / "out"
    options = {"objective": "mlm", "seq_len": 64, "shard_size": "20", "output_format": output_format}
    run_transform([small_corpus], SPM, out, seed=1, **options)
    reader = Rows(out)
    first = reader[0]
    state = reader.state(5)
    run_transform([small_corpus], SPM, out, seed=2, **options)
    assert np.array_equal(reader[0]["labels"], first["labels"])  # held: the rows it had read
    with pytest.raises(ObjcliError, match="replaced by another run since this reader opened it"):
        reader[len(reader) - 1]
    with pytest.raises(ObjcliError, match="other rows"):
        Rows(out).resume(state)


def test_a_plan_reader_refuses_a_replaced_plan(llama_store, tmp_path):
    out = tmp_path / "plan"
    options = {"objective": "clm", "seq_len": 64, "output_format": "plan"}
    run_transform([llama_store], SAMPLE / "llama-style", out, **options)
    reader = Rows(out)
    assert len(reader.shards) > 1
    reader[0]
    run_transform([llama_store], SAMPLE / "llama-style", out, **{**options, "seq_len": 32})
    with pytest.raises(ObjcliError, match="replaced by another run"):
        reader[len(reader) - 1]


class _Workers:
    """``get_worker_info`` as a DataLoader worker process sees it (each worker has its own dataset copy)."""

    def __init__(self, monkeypatch):
        self.monkeypatch = monkeypatch

    def run(self, worker: int, workers: int, fn):
        info = SimpleNamespace(id=worker, num_workers=workers)
        with self.monkeypatch.context() as patched:
            patched.setattr(torch.utils.data, "get_worker_info", lambda: info)
            return fn()


@requires("torch")
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    world=st.integers(1, 4),
    workers=st.integers(0, 3),
    epochs=st.integers(1, 3),
    stop=st.floats(0, 1),
    stop_epoch=st.integers(0, 2),
)
def test_every_row_once_an_epoch_whatever_the_world_workers_and_resume(
    output, monkeypatch, world, workers, epochs, stop, stop_epoch
):
    """Each rank's DataLoader workers (a copy of the dataset each, as processes have), several epochs, one
    stopped mid-epoch, its state through JSON, resumed by new datasets: every row once an epoch."""
    from objcli.reading.torch_rows import IterableTorchRows

    rows = Rows(output)
    expected = Counter(_ids(rows))
    patch = _Workers(monkeypatch)
    each = max(workers, 1)
    for epoch in range(epochs):
        seen = []
        for rank in range(world):
            for worker in range(each):

                def read(rank=rank, worker=worker, epoch=epoch):
                    dataset = IterableTorchRows(rows, rank, world)
                    got = list(iter(dataset))
                    if epoch != stop_epoch:
                        return got
                    dataset = IterableTorchRows(rows, rank, world)  # the run that stops
                    stream, got = iter(dataset), []
                    for _ in range(int(stop * len(dataset.rows.shard(worker, each)))):
                        got.append(next(stream))
                    state = json.loads(json.dumps(dataset.state_dict()))
                    again = IterableTorchRows(rows, rank, world)
                    again.load_state_dict(state)
                    got += list(iter(again))
                    assert len(list(iter(again))) == len(got)  # the epoch after: from its first row
                    return got

                got = patch.run(worker, each, read) if workers else read()
                seen += [tuple(r["input_ids"].tolist()) for r in got]
        assert Counter(seen) == expected


@requires("torch")
def test_plain_dataloader_epochs_read_every_row(output):
    from objcli.reading.torch_rows import IterableTorchRows

    rows = Rows(output)
    for options in ({"num_workers": 0}, {"num_workers": 2, "persistent_workers": True}):
        loader = torch.utils.data.DataLoader(IterableTorchRows(rows), batch_size=4, **options)
        counts = [sum(len(b["input_ids"]) for b in loader) for _ in range(3)]
        assert counts == [len(rows)] * 3, options


@requires("torch")
def test_states_that_cannot_resume_are_refused(output, monkeypatch):
    from objcli.reading.torch_rows import IterableTorchRows

    rows = Rows(output)
    patch = _Workers(monkeypatch)
    dataset = IterableTorchRows(rows, 0, 2)
    stream = patch.run(0, 2, lambda: iter(dataset))
    next(stream)
    state = patch.run(0, 2, dataset.state_dict)
    for worker, workers, rank, world in ((0, 3, 0, 2), (1, 2, 0, 2), (0, 2, 1, 2), (0, 2, 0, 3)):
        other = IterableTorchRows(rows, rank, world)
        patch.run(worker, workers, lambda other=other: other.load_state_dict(state))
        with pytest.raises(ObjcliError, match="resume with the ranks and num_workers it was saved with"):
            patch.run(worker, workers, lambda other=other: iter(other))
    with pytest.raises(ObjcliError, match="not a state IterableTorchRows"):
        IterableTorchRows(rows).load_state_dict({"next_rows": {"0": 4}})
    # A main process whose workers read: its own position is not theirs.
    shared = IterableTorchRows(rows)
    loader = torch.utils.data.DataLoader(shared, batch_size=4, num_workers=2)
    next(iter(loader))
    with pytest.raises(ObjcliError, match="StatefulDataLoader"):
        shared.state_dict()
    # A state loaded in the main process, then forked into workers: refused there, not read by each.
    forked = copy.copy(IterableTorchRows(rows))
    forked.load_state_dict({**state, "worker": 0, "workers": 1})
    forked._loaded = (forked._loaded[0], -1)  # as the worker process sees it: loaded in another process
    with pytest.raises(ObjcliError, match="StatefulDataLoader.load_state_dict"):
        patch.run(0, 2, lambda: iter(forked))


@requires("torch", "torchdata")
def test_stateful_dataloader_stops_and_resumes_with_workers(output):
    from torchdata.stateful_dataloader import StatefulDataLoader

    from objcli.reading.torch_rows import IterableTorchRows

    rows = Rows(output)
    expected = Counter(_ids(rows))
    loader = StatefulDataLoader(IterableTorchRows(rows), batch_size=3, num_workers=2)
    seen = []
    for step, batch in enumerate(loader):
        seen += [tuple(r.tolist()) for r in batch["input_ids"]]
        if step == 4:
            state = loader.state_dict()
            break
    resumed = StatefulDataLoader(IterableTorchRows(rows), batch_size=3, num_workers=2)
    resumed.load_state_dict(state)
    seen += [tuple(r.tolist()) for b in resumed for r in b["input_ids"]]
    assert Counter(seen) == expected
    assert Counter(tuple(r.tolist()) for b in resumed for r in b["input_ids"]) == expected  # the next epoch


@pytest.mark.parametrize(
    "edit, refusal",
    [
        (lambda m: m["columns"][0].update(arrow_type=m["columns"][0]["arrow_type"].replace("uint16", "uint8")), "past"),
        (lambda m: m["row_plan"].update(vocabulary=32001), "is not its tokenizer's"),
        (lambda m: m["shards"][0].update(partition=1), "holds partition 0's rows, where the manifest says partition 1"),
        (lambda m: m["shards"][0].update(rows=m["shards"][0]["rows"] + 1), "rows, where the manifest says"),
        (lambda m: m["recipe"].update(seed=7), "not the one its config_sha256 was made from"),
        (lambda m: m.update(objective="clm"), "names column labels, which its rows do not have"),
    ],
)
def test_a_plans_manifest_is_checked_against_its_files(edit, refusal, llama_store, tmp_path):
    """A narrowed width, another vocabulary, another partition: refused by the reader and by verify, never
    rows wrapped or made from the wrong tokens."""
    from objcli.commands.verify import verify_output

    out = tmp_path / "plan"
    run_transform([llama_store], SAMPLE / "llama-style", out, objective="mlm", seq_len=64, output_format="plan")
    assert not verify_output(str(out)).problems
    manifest = json.loads((out / "manifest.json").read_text())
    edit(manifest)
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ObjcliError, match=refusal):
        Rows(out)[0]
    assert any(refusal.split(",")[0] in problem for problem in verify_output(str(out)).problems)


@requires("torch")
@pytest.mark.heavy
def test_spawned_workers_read_every_row(output):
    """Workers started by spawn (macOS's and Windows' default): the dataset pickled to them, every row
    an epoch, and the main process's state refused."""
    from objcli.reading.torch_rows import IterableTorchRows

    rows = Rows(output)
    dataset = IterableTorchRows(rows)
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2, multiprocessing_context="spawn")
    assert [sum(len(b["input_ids"]) for b in loader) for _ in range(2)] == [len(rows)] * 2
    with pytest.raises(ObjcliError, match="StatefulDataLoader"):
        dataset.state_dict()
