"""A newcomer's first hour (issue 37): the walls a first user hit, each tested as that user met it."""

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
import tomllib
from hypothesis import given, settings
from hypothesis import strategies as st
from runs import ROOT, SAMPLE, folder_bytes, manifest_json, run_cli, run_transform

from objcli.errors import EXTRA_OF_MODULE, missing_module
from objcli.run.summary import Summary

LLAMA_STYLE = SAMPLE / "llama-style"


def _held(folder) -> dict[str, bytes]:
    """What a folder holds, less the lock file every command leaves (empty, and reused)."""
    return {k: v for k, v in folder_bytes(folder).items() if k != ".objcli-lock"}


def _rows(folder) -> list[list[int]]:
    manifest = manifest_json(folder)
    tables = [
        pa.ipc.open_stream(pa.memory_map(str(Path(folder) / s["files"][0]))).read_all() for s in manifest["shards"]
    ]
    return [row for t in tables for row in t.column("input_ids").to_pylist()]


# ---- 1. a missing optional module names its extra; every extra installs what it imports ----


def test_every_module_named_for_an_extra_is_in_that_extra():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for module, extra in EXTRA_OF_MODULE.items():
        names = {
            d.split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip().replace("-", "_") for d in extras[extra]
        }
        assert (
            module in names
            or module.replace("_v1", "-v1").replace("-", "_") in names
            or (module == "dask" and "distributed" in names)
            or (module == "quicktok_v1" and "quicktok_v1" in names)
        ), (module, extra, names)


def test_a_missing_module_in_a_partition_is_one_line_naming_its_extra(tmp_path):
    """A document past the cut threshold needs regex (the tokenizer's own split pattern) where the engine
    takes texts in pieces (the stable tokenizers: fast engines take them whole); without it the run
    says which extra to install, never 'rerun'."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "regex.py").write_text("raise ModuleNotFoundError(\"No module named 'regex'\", name='regex')\n")
    texts = [json.loads(line)["text"] for line in (SAMPLE / "code.jsonl").read_text().splitlines()]
    (tmp_path / "long.jsonl").write_text(json.dumps({"text": "\n".join(texts)}) + "\n")
    env = {"PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])}
    args = ("-t", LLAMA_STYLE, "--engine", "reference", "-o", tmp_path / "out")
    result = run_cli("transform", tmp_path / "long.jsonl", *args, env=env)
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "pip install 'objcli[hf]'" in result.stderr and "rerun" not in result.stderr and "'regex'" in result.stderr


def test_missing_module_is_none_for_other_errors():
    assert missing_module(ValueError("x")) is None
    assert "objcli[s3]" in str(missing_module(ModuleNotFoundError("no s3fs", name="s3fs")))
    assert "pip install foo" in str(missing_module(ModuleNotFoundError("no foo", name="foo.bar")))


# ---- 4. a .json file holding an array of records ----

records = st.lists(
    st.one_of(
        st.fixed_dictionaries({"text": st.text(alphabet="abc xyzé\n", min_size=0, max_size=40)}),
        st.fixed_dictionaries({"other": st.integers()}),
        st.integers(),
        st.text(max_size=5),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=25, deadline=None)
@given(records)
def test_a_json_array_is_read_as_its_records_with_json_lines_accounting(tmp_path_factory, items):
    folder = tmp_path_factory.mktemp("array")
    (folder / "a.json").write_text(json.dumps(items, indent=1))
    (folder / "a.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    outs = {}
    for name in ("a.json", "a.jsonl"):
        try:
            summary = run_transform(
                [folder / name], SAMPLE / "tokenizer.model", folder / f"out-{name}", seq_len=8, packing="none"
            )
        except Exception as error:  # every record bad: the same refusal for both
            outs[name] = type(error).__name__
            continue
        t = summary.manifest["totals"]
        assert t["documents_read"] == t["documents_written"] + t["documents_skipped"] == len(items)
        outs[name] = (t["skipped_by_reason"], _rows(folder / f"out-{name}"))
    assert outs["a.json"] == outs["a.jsonl"]


def test_a_json_array_names_bad_elements_and_a_broken_array_is_a_counted_skip(tmp_path):
    good = [{"text": f"record number {i} " * 20} for i in range(5)]
    (tmp_path / "ok.json").write_text(json.dumps([good[0], 7, good[1]]))
    result = run_cli(
        "transform", tmp_path / "ok.json", "-t", SAMPLE / "tokenizer.model", "-o", tmp_path / "o1", "--packing", "none"
    )
    assert result.returncode == 0 and "ok.json element 2: the record is JSON but not an object" in result.stderr
    (tmp_path / "broken.json").write_text(json.dumps(good)[:-40])  # cut inside the fourth record
    result = run_cli(
        "transform",
        tmp_path / "broken.json",
        "-t",
        SAMPLE / "tokenizer.model",
        "-o",
        tmp_path / "o2",
        "--packing",
        "none",
    )
    assert result.returncode == 0, result.stderr
    totals = manifest_json(tmp_path / "o2")["totals"]
    assert totals["skipped_by_reason"] == {"bad_json": 1} and totals["documents_written"] == 4
    assert "broken.json element 5: broken JSON in the array" in result.stderr


def test_a_json_array_on_standard_input_and_in_a_gzip_file(tmp_path):
    import gzip

    items = [{"text": f"document {i} " * 30} for i in range(30)]
    (tmp_path / "a.json.gz").write_bytes(gzip.compress(json.dumps(items).encode()))
    stdin = run_cli(
        "transform",
        "-",
        "-t",
        SAMPLE / "tokenizer.model",
        "-o",
        tmp_path / "s",
        "--seq-len",
        "64",
        input=json.dumps(items),
    )
    packed = run_cli(
        "transform", tmp_path / "a.json.gz", "-t", SAMPLE / "tokenizer.model", "-o", tmp_path / "g", "--seq-len", "64"
    )
    assert stdin.returncode == 0 and packed.returncode == 0, stdin.stderr + packed.stderr
    assert (
        _rows(tmp_path / "s") == _rows(tmp_path / "g")
        and manifest_json(tmp_path / "g")["totals"]["documents_written"] == 30
    )


def test_a_large_json_array_is_never_split_into_byte_ranges(tmp_path):
    items = [{"text": f"document {i} " * 50} for i in range(2000)]
    (tmp_path / "big.json").write_text(json.dumps(items))
    summary = run_transform(
        [tmp_path / "big.json"], SAMPLE / "tokenizer.model", tmp_path / "o", seq_len=128, partition_size="64KiB"
    )
    assert len(summary.manifest["partitions"]) == 1 and summary.totals["documents_read"] == 2000


# ---- 5. --pad-token ----


def test_pad_token_names_an_existing_piece_and_export_writes_it(tmp_path):
    out = tmp_path / "o"
    allocated = run_cli(
        "transform", SAMPLE / "prose.jsonl", "-t", LLAMA_STYLE, "--packing", "best-fit", "--seq-len", "256", "-o", out
    )
    assert allocated.returncode == 0 and "no pad '<pad>' as id 8192" in allocated.stderr
    assert "--pad-token" in allocated.stderr
    result = run_cli(
        "transform",
        SAMPLE / "prose.jsonl",
        "-t",
        LLAMA_STYLE,
        "--packing",
        "best-fit",
        "--seq-len",
        "256",
        "--pad-token",
        "<|reserved_special_token_0|>",
        "-o",
        out,
        "--overwrite",
    )
    assert result.returncode == 0 and "8192" not in result.stderr, result.stderr
    manifest = manifest_json(out)
    assert manifest["special_tokens"]["ids"]["pad"] == 2 and manifest["special_tokens"]["added"] == {}
    assert manifest["recipe"]["pad-token"] == "<|reserved_special_token_0|>"
    rows = pa.ipc.open_stream(pa.memory_map(str(out / manifest["shards"][0]["files"][0]))).read_all()
    padded = [
        t
        for ids, segs in zip(rows["input_ids"].to_pylist(), rows["segment_ids"].to_pylist())
        for t, s in zip(ids, segs)
        if s == 0
    ]
    assert padded and set(padded) == {2}
    assert run_cli("export-tokenizer", out, "-o", tmp_path / "tok").returncode == 0
    config = json.loads((tmp_path / "tok" / "tokenizer_config.json").read_text())
    assert config["pad_token"] == "<|reserved_special_token_0|>" and config["eos_token"] == "<|end_of_text|>"
    unknown = run_cli(
        "transform", SAMPLE / "prose.jsonl", "-t", LLAMA_STYLE, "--pad-token", "<nope>", "-o", tmp_path / "x"
    )
    assert unknown.returncode == 1 and "--pad-token '<nope>': not a piece" in unknown.stderr


# ---- 6. --format hf --split: DatasetDict.save_to_disk's layout ----


def test_hf_with_splits_loads_as_a_dataset_dict_and_survives_reshard_and_overwrite(tmp_path):
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "o"
    result = run_cli(
        "transform",
        SAMPLE / "prose.jsonl",
        "-t",
        SAMPLE / "tokenizer.model",
        "--format",
        "hf",
        "--split",
        "validation=10%,test=20",
        "--seq-len",
        "128",
        "-o",
        out,
    )
    assert result.returncode == 0, result.stderr
    manifest = manifest_json(out)
    loaded = datasets.load_from_disk(str(out))
    assert isinstance(loaded, datasets.DatasetDict) and list(loaded) == list(manifest["splits"])
    assert {k: v.num_rows for k, v in loaded.items()} == {k: s["rows"] for k, s in manifest["splits"].items()}
    assert loaded["validation"][0]["input_ids"] == _split_rows(out, "validation")[0]
    assert run_cli("verify", out).returncode == 0
    assert run_cli("reshard", out, "--num-shards", "3").returncode == 0
    assert {k: v.num_rows for k, v in datasets.load_from_disk(str(out)).items()} == {
        k: s["rows"] for k, s in manifest["splits"].items()
    }
    assert (
        run_cli(
            "transform",
            SAMPLE / "prose.jsonl",
            "-t",
            SAMPLE / "tokenizer.model",
            "--format",
            "hf",
            "--seq-len",
            "128",
            "-o",
            out,
            "--overwrite",
        ).returncode
        == 0
    )
    assert not (out / "validation").exists() and not (out / "dataset_dict.json").exists()
    assert isinstance(datasets.load_from_disk(str(out)), datasets.Dataset)


def _split_rows(folder, split):
    manifest = manifest_json(folder)
    tables = [
        pa.ipc.open_stream(pa.memory_map(str(folder / s["files"][0]))).read_all()
        for s in manifest["shards"]
        if s["split"] == split
    ]
    return [r for t in tables for r in t.column("input_ids").to_pylist()]


# ---- 7. reshard --num-shards ----


@pytest.mark.parametrize("fmt", ["arrow", "parquet", "npy"])
def test_reshard_to_a_number_of_shards_balances_rows_within_one(fmt, tmp_path):
    out = tmp_path / "o"
    run_transform(
        [SAMPLE / "prose.jsonl"], SAMPLE / "tokenizer.model", out, seq_len=100, output_format=fmt, split="validation=7%"
    )
    before = manifest_json(out)
    result = run_cli("reshard", out, "--num-shards", "5", "-o", tmp_path / "r")
    assert result.returncode == 0, result.stderr
    after = manifest_json(tmp_path / "r")
    for split, totals in before["splits"].items():
        counts = [s["rows"] for s in after["shards"] if s["split"] == split]
        assert len(counts) == 5 and sum(counts) == totals["rows"] and max(counts) - min(counts) <= 1
    assert run_cli("verify", tmp_path / "r").returncode == 0
    both = run_cli("reshard", out, "--num-shards", "2", "--shard-size", "10")
    assert both.returncode == 1 and "one of the two" in both.stderr


# ---- 9. the summary says the row length and the cuts; labelled lines on a terminal ----


def test_the_summary_says_the_row_length_and_cut_documents(tmp_path):
    (tmp_path / "long.jsonl").write_text(json.dumps({"text": "word " * 30_000}) + "\n")
    summary = run_transform(
        [tmp_path / "long.jsonl"], SAMPLE / "tokenizer.model", tmp_path / "o", max_document_chars=50_000
    )
    line = summary.line()
    assert "(--seq-len 2048)" in line and "1 over --max-document-chars 50,000 cut into pieces" in line
    assert "\n" not in line
    lines = summary.lines().splitlines()
    assert lines[0] == "objcli: done" and len(lines) >= 4
    labels = [row.split()[0] for row in lines[1:]]
    assert labels[:3] == ["documents", "rows", "output"]
    assert "".join(lines[1:]).count("--seq-len 2048") == 1


def test_the_summary_on_a_terminal_is_labelled_lines(tmp_path):
    import pty
    import subprocess
    import sys

    parent, child = pty.openpty()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "objcli",
            "transform",
            str(SAMPLE / "prose.jsonl"),
            "-t",
            str(SAMPLE / "tokenizer.model"),
            "-o",
            str(tmp_path / "o"),
            "-q",
        ],
        stderr=child,
        stdout=subprocess.DEVNULL,
    )
    os.close(child)
    output = b""
    while True:
        try:
            chunk = os.read(parent, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    assert process.wait() == 0
    text = output.decode().replace("\r", "")
    assert "objcli: done\n  documents" in text and "\n  rows " in text


def test_the_summary_of_a_complete_run_is_one_line_either_way():
    summary = Summary({"totals": {"documents_read": 1, "rows": 2, "shards": 1}}, 0.1, "o", already_complete=True)
    assert summary.line() == summary.lines() and "nothing to do" in summary.line()


# ---- 11. one rule for foreign files in an output folder ----


def test_a_foreign_file_is_kept_by_every_command_and_an_output_needs_overwrite(tmp_path):
    source = tmp_path / "source"
    run_transform([SAMPLE / "prose.jsonl"], SAMPLE / "tokenizer.model", source, seq_len=256)
    for command in (
        ["transform", SAMPLE / "prose.jsonl", "-t", SAMPLE / "tokenizer.model", "--seq-len", "256"],
        ["merge", source],
        ["reshard", source, "--num-shards", "2"],
        ["export-tokenizer", source],
    ):
        out = tmp_path / command[0]
        out.mkdir()
        (out / "notes.txt").write_text("mine")
        first = run_cli(*command, "-o", out)
        assert first.returncode == 0, (command, first.stderr)
        assert (out / "notes.txt").read_text() == "mine"
        if command[0] == "export-tokenizer":
            continue
        kept = _held(out)
        # Another output's files there: refused without --overwrite, which replaces them and keeps notes.
        other = run_cli("transform", SAMPLE / "reference.txt", "-t", SAMPLE / "tokenizer.model", "-o", out)
        assert other.returncode == 1 and "--overwrite" in other.stderr and _held(out) == kept
        if command[0] in ("merge", "reshard"):
            again = run_cli(*command, "-o", out)
            assert again.returncode == 1 and "--overwrite" in again.stderr
            assert run_cli(*command, "-o", out, "--overwrite").returncode == 0
        assert (out / "notes.txt").read_text() == "mine"


def test_a_datasets_save_in_the_output_is_refused_by_every_command(tmp_path):
    datasets = pytest.importorskip("datasets")
    source = tmp_path / "source"
    run_transform([SAMPLE / "prose.jsonl"], SAMPLE / "tokenizer.model", source, seq_len=256)
    for command in (
        ["transform", SAMPLE / "prose.jsonl", "-t", SAMPLE / "tokenizer.model"],
        ["merge", source],
        ["reshard", source, "--num-shards", "2"],
    ):
        out = tmp_path / f"saved-{command[0]}"
        datasets.Dataset.from_dict({"a": [1, 2]}).save_to_disk(str(out))
        held = _held(out)
        result = run_cli(*command, "-o", out)
        assert result.returncode == 1 and "--overwrite" in result.stderr and _held(out) == held, result.stderr


# ---- 2. the demo installs what the README's tour uses; 3. the fast engines are said ----


def test_make_demo_installs_what_the_tour_imports():
    """The README's tour reads the shards with datasets: the install that make demo does brings it."""
    makefile = (ROOT / "Makefile").read_text()
    core = makefile[makefile.index("$(VENV)/.installed-core:") : makefile.index("touch $@")]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    installed = {e for e in extras if f"[{e}]" in core or f",{e}]" in core or f"[{e}," in core}
    readme = (ROOT / "README.md").read_text()
    assert "import datasets" in readme and any(d.startswith("datasets") for e in installed for d in extras[e])


def without_fast_engines(folder: Path) -> dict:
    """An environment where objcli[fast]'s engines are not installed: modules of their names that
    refuse to import, first on the path."""
    for name in ("gigatoken", "quicktok"):
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed here')\n")
    return {"PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}


def test_a_slower_engine_for_want_of_objcli_fast_is_said_once_for_each_tokenizer(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), **without_fast_engines(tmp_path / "hidden")}
    args = ("transform", SAMPLE / "prose.jsonl", "--seq-len", "256", "-o", tmp_path / "o")
    first = run_cli(*args, "-t", LLAMA_STYLE, env=env)
    assert first.returncode == 0 and first.stderr.count("pip install 'objcli[fast]'") == 1, first.stderr
    assert manifest_json(tmp_path / "o")["tokenizer"]["engine"]["name"] == "tokenizers"
    again = run_cli(*args, "-t", LLAMA_STYLE, "--overwrite", env=env)
    assert again.returncode == 0 and "objcli[fast]" not in again.stderr
    other = tmp_path / "other-model"
    other.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (other / name).write_text((LLAMA_STYLE / name).read_text() + "\n")  # the same model, another file
    another = run_cli(*args, "-t", other, "--overwrite", env=env)
    assert another.returncode == 0 and another.stderr.count("pip install 'objcli[fast]'") == 1, another.stderr
    reference = run_cli(
        *args,
        "-t",
        LLAMA_STYLE,
        "--overwrite",
        "--engine",
        "reference",
        env={**env, "XDG_CACHE_HOME": str(tmp_path / "c2")},
    )
    assert "objcli[fast]" not in reference.stderr  # asked for by name: nothing to say
    installed = run_cli(*args, "-t", LLAMA_STYLE, "--overwrite", env={"XDG_CACHE_HOME": str(tmp_path / "c3")})
    assert installed.returncode == 0 and "objcli[fast]" not in installed.stderr  # the fast engine encodes
    assert manifest_json(tmp_path / "o")["tokenizer"]["engine"]["name"] in ("gigatoken", "quicktok")


def test_a_tokenizer_folder_inside_the_corpus_is_not_read_as_data(tmp_path):
    """sample_data/ holds a tokenizer.json beside the corpus, as many corpus folders do: a folder walk
    leaves a model's JSON files out (said in one warning); named as an input, the file is read."""
    import shutil

    (tmp_path / "corpus").mkdir()
    shutil.copy(SAMPLE / "prose.jsonl", tmp_path / "corpus" / "prose.jsonl")
    shutil.copytree(LLAMA_STYLE, tmp_path / "corpus" / "tok")
    walked = run_cli("transform", tmp_path / "corpus", "-t", SAMPLE / "tokenizer.model", "-o", tmp_path / "o")
    assert walked.returncode == 0 and "skipped 2 tokenizer or model file(s)" in walked.stderr, walked.stderr
    manifest = manifest_json(tmp_path / "o")
    assert [Path(i["path"]).name for i in manifest["inputs"]] == ["prose.jsonl"]
    assert manifest["totals"]["documents_skipped"] == manifest["totals"]["skipped_by_reason"].get(
        "remainder_dropped", 0
    )
    named = run_cli(
        "transform",
        tmp_path / "corpus" / "tok" / "tokenizer_config.json",
        "-t",
        SAMPLE / "tokenizer.model",
        "-o",
        tmp_path / "n",
        "--text-key",
        "bos_token",
        "--packing",
        "none",
    )
    assert named.returncode == 0 and manifest_json(tmp_path / "n")["totals"]["documents_written"] == 1


def test_an_identical_rerun_says_nothing_to_do_without_the_runs_warnings(tmp_path):
    """Issue 53: the pad warning came before "nothing to do" on a rerun that writes nothing."""
    args = ["transform", SAMPLE / "prose.jsonl", "-t", LLAMA_STYLE, "--packing", "best-fit", "--seq-len", "256"]
    first = run_cli(*args, "-o", tmp_path / "o")
    assert first.returncode == 0 and "no pad '<pad>'" in first.stderr
    again = run_cli(*args, "-o", tmp_path / "o")
    assert again.returncode == 0 and "nothing to do" in again.stderr and "no pad" not in again.stderr
