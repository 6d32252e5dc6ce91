"""Hostile input and hostile output locations: a clean one-line error or counted skips, never a
traceback, and documents read = written + skipped in every run that finishes."""

import bz2
import gzip
import json
import os
import random
import resource
import signal
import subprocess
import threading
from pathlib import Path

import pytest
import zstandard
from runs import cli, manifest_json, run_cli, run_transform

from objcli.commands.verify import verify_output
from objcli.errors import ObjcliError
from objcli.storage.manifest import read_manifest

SPECIAL_TEXT = "</s> <s> <pad> <unk> [MASK] [CLS] [SEP] <extra_id_0> <|endoftext|> <fim_prefix>"
OBJECTIVES = ["clm", "mlm", "span-corruption", "nsp", "bart", "fim", "ul2", "prefix-lm"]


LINE_KINDS = 14  # kinds 11-13 are good lines


def _line(rng: random.Random, kinds: set) -> bytes:
    """One line of a hostile JSON-lines file."""
    text = rng.choice(["A short document.", "Two sentences here. And another one!", SPECIAL_TEXT, "x" * 3000])
    good = json.dumps({"text": text}).encode()
    kind = rng.randrange(LINE_KINDS)
    kinds.add(min(kind, 11))
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))  # random bytes
    if kind == 1:
        return good[: rng.randrange(1, len(good))]  # truncated JSON
    if kind == 2:
        return b'{"text": "bad \xff\xfe utf-8"}'  # invalid UTF-8 inside a string
    if kind == 3:
        depth = rng.choice([10, 1000, 100_000])
        return b'{"text": ' + b"[" * depth + b"]" * depth + b"}"  # deeply nested
    if kind == 4:
        return good.replace(b"d", b"\x00", 1)  # a raw NUL byte
    if kind == 5:
        return json.dumps({"text": rng.choice([5, 2.5, ["a", "b"], None, {"x": 1}, True])}).encode()  # not a string
    if kind == 6:
        return json.dumps({"other": "no text field"}).encode()
    if kind == 7:
        return json.dumps(rng.choice([[1, 2], "string", 7, None])).encode()  # JSON, not an object
    if kind == 8:
        return json.dumps({"text": "word " * rng.randrange(10_000, 60_000)}).encode()  # a huge line
    if kind == 9:
        return json.dumps({"text": ""}).encode()
    if kind == 10:
        return b"\r"  # a CR-only line
    return good


ENCODINGS = ["utf-8", "utf-8", "utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32", "utf-32-be"]


def _hostile_file(rng: random.Random, folder: Path, name: str, kinds: set) -> Path:
    body = b"\n".join(_line(rng, kinds) for _ in range(rng.randrange(0, 40)))
    if rng.random() < 0.2:
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 5000)))  # a file of noise
    encoding = rng.choice(ENCODINGS)  # with a byte-order mark (utf-8-sig, utf-16, utf-32) or without
    kinds.add(encoding)
    if encoding != "utf-8":
        body = body.decode("utf-8", "replace").encode(encoding)
    suffix = rng.choice([".jsonl", ".txt", ".jsonl", ".json"])
    compression = rng.choice([None, None, "gz", "zst", "bz2"])
    if compression == "gz":
        body = gzip.compress(body)
    elif compression == "zst":
        body = zstandard.ZstdCompressor().compress(body)
    elif compression == "bz2":
        body = bz2.compress(body)
    if compression and rng.random() < 0.3:
        body = body[: rng.randrange(0, len(body) + 1)]  # truncated compressed data
    path = folder / (name + suffix + (f".{compression}" if compression else ""))
    path.write_bytes(body)
    return path


def _hostile_specs(rng: random.Random, tmp_path: Path, inputs: Path, kinds: set, tokenizer: str) -> list[str]:
    """The inputs as named on the command line: the folder, maybe with a file of it named again,
    a pipe, and an earlier objcli output nested inside the folder."""
    specs = [str(inputs)]
    if rng.random() < 0.25:
        kinds.add("duplicate path")
        specs += [str(sorted(inputs.iterdir())[0]), str(inputs / "*")]
    if rng.random() < 0.2:
        kinds.add("nested output")
        earlier = cli(
            [
                "transform",
                str(inputs / "*"),
                "-t",
                tokenizer,
                "-o",
                str(inputs / "earlier"),
                "--seq-len",
                "32",
                "--workers",
                "1",
                "-q",
            ],
        )
        assert "Traceback" not in earlier.output
    if rng.random() < 0.2:
        kinds.add("fifo")
        fifo = tmp_path / "pipe"
        os.mkfifo(fifo)
        body = _hostile_file(rng, tmp_path, "piped", kinds).read_bytes()
        threading.Thread(target=_feed_fifo, args=(fifo, body), daemon=True).start()
        specs.append(str(fifo))
    return specs


def _feed_fifo(fifo: Path, body: bytes) -> None:
    try:
        fifo.write_bytes(body)
    except BrokenPipeError:
        pass  # the run failed on an earlier input and closed the pipe


def _run_case(seed: int, tmp_path: Path, sample_tokenizer: str, kinds: set | None = None) -> None:
    rng = random.Random(seed)
    inputs = tmp_path / "in"
    inputs.mkdir()
    kinds = kinds if kinds is not None else set()
    for i in range(rng.randrange(1, 4)):
        _hostile_file(rng, inputs, f"f{i}", kinds)
    specs = _hostile_specs(rng, tmp_path, inputs, kinds, sample_tokenizer)
    objective = rng.choice(OBJECTIVES)
    out = tmp_path / "out"
    args = [
        "transform",
        *specs,
        "-t",
        sample_tokenizer,
        "-o",
        str(out),
        "--objective",
        objective,
        "--seq-len",
        "32",
        "--workers",
        "1",
        "-q",
    ]
    result = cli(args)
    if (tmp_path / "pipe").exists():  # free the feeding thread if the run stopped before reading it
        os.close(os.open(tmp_path / "pipe", os.O_RDONLY | os.O_NONBLOCK))
    context = f"seed {seed}, objective {objective}: {result.output[-500:]}"
    assert result.exception is None or isinstance(result.exception, SystemExit), context
    assert "Traceback" not in result.output, context
    if result.exit_code != 0:
        assert result.exit_code == 1, context
        assert result.output.splitlines()[-1].startswith("Error: "), context
        with pytest.raises(ObjcliError):
            read_manifest(out)  # no manifest claims completion
        return
    totals = manifest_json(out)["totals"]
    assert totals["documents_read"] == totals["documents_written"] + totals["documents_skipped"], context
    assert verify_output(out).ok, context


FAST_SEEDS = range(25)
KINDS_DRAWN: set = set()
SEEDS_RUN: set = set()  # the fast seeds this process ran (pytest-xdist shares them among its workers)


@pytest.mark.parametrize("seed", FAST_SEEDS)
def test_fuzz_hostile_inputs(seed, tmp_path, sample_tokenizer):
    _run_case(seed, tmp_path, sample_tokenizer, KINDS_DRAWN)
    SEEDS_RUN.add(seed)


def test_the_fast_fuzz_draws_every_kind_of_line(tmp_path, sample_tokenizer):
    """The fast seeds are not a lucky subset: between them they draw every kind of hostile line."""
    for seed in sorted(set(FAST_SEEDS) - SEEDS_RUN):  # run alone, or another worker ran them: draw them here
        (tmp_path / str(seed)).mkdir()
        _run_case(seed, tmp_path / str(seed), sample_tokenizer, KINDS_DRAWN)
    assert KINDS_DRAWN == {*range(12), *ENCODINGS, "duplicate path", "nested output", "fifo"}


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(25, 400))
def test_fuzz_hostile_inputs_long(seed, tmp_path, sample_tokenizer):
    _run_case(seed, tmp_path, sample_tokenizer)


def test_a_file_that_vanishes_mid_run_is_one_clear_error(small_corpus, sample_tokenizer, tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        (inputs / name).write_bytes((small_corpus / "prose.jsonl").read_bytes())
    vanished = []

    def delete_the_second_file(progress):
        if not vanished:
            (inputs / "b.jsonl").unlink()
            vanished.append(True)

    from objcli.config import TransformConfig
    from objcli.objectives import REGISTRY
    from objcli.transform import transform

    config = TransformConfig(
        (str(inputs),),
        sample_tokenizer,
        "clm",
        REGISTRY.named("clm").options_type(),
        str(tmp_path / "out"),
        seq_len=32,
        shard_size="1000",
        batch_size="16KiB",
    )
    with pytest.raises(ObjcliError) as error:
        transform(config, workers=1, progress=delete_the_second_file)
    assert str(error.value) == (
        f"{inputs / 'b.jsonl'}: No such file or directory ({inputs / 'b.jsonl'}); "
        "check that the input is still there and readable"
    )
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_shard_names_never_come_from_the_input(sample_tokenizer, tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "evil..%2f..%2f;rm -rf *.jsonl").write_text(json.dumps({"text": "A name that tries to escape."}) + "\n")
    run_transform([inputs], sample_tokenizer, tmp_path / "out", seq_len=4, remainder="pad")
    written = sorted(p.name for p in (tmp_path / "out").iterdir() if p.name != ".objcli-lock")
    assert written == ["README.md", "manifest.json", "part-00000-of-00001.arrow"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out"]


def _mount_tmpfs(where: Path, options: str) -> bool:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True)
    return done.returncode == 0


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "size=256k"):
        pytest.skip("mounting a tmpfs needs root with CAP_SYS_ADMIN; the file-size-limit test covers write errors")
    yield disk
    subprocess.run(["umount", str(disk)], check=True)


def test_a_full_disk_is_one_clear_error_and_no_manifest(small_disk, small_corpus, sample_tokenizer):
    out = small_disk / "out"
    done = run_cli(
        "transform", small_corpus, "-t", sample_tokenizer, "-o", out, "--seq-len", "64", "--workers", "1", "-q"
    )
    assert done.returncode == 1
    assert done.stderr == (
        f"Error: output {out}: no space left on the device; free some space and rerun the same command "
        "(finished partitions are kept)\n"
    )
    assert not (out / "manifest.json").exists()
    assert not list((out / ".objcli-tmp").glob("*.tmp"))  # the failed partition's partial file is gone


def _limit_file_size():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))


def test_a_write_error_is_one_clear_error_and_no_manifest(small_corpus, sample_tokenizer, tmp_path):
    out = tmp_path / "out"
    done = run_cli(
        "transform",
        small_corpus,
        "-t",
        sample_tokenizer,
        "-o",
        out,
        "--seq-len",
        "64",
        "--workers",
        "1",
        "-q",
        preexec_fn=_limit_file_size,
    )
    assert done.returncode == 1
    assert done.stderr == (
        f"Error: output {out}: a file would pass the file-size limit (ulimit -f); raise the limit or pass a smaller "
        "--shard-size, then rerun the same command\n"
    )
    assert not (out / "manifest.json").exists()


def test_an_unwritable_output_folder_is_one_clear_error(small_corpus, sample_tokenizer, tmp_path):
    readonly = tmp_path / "readonly"
    if os.geteuid() == 0:
        if not _mount_tmpfs(readonly, "ro,size=64k"):
            pytest.skip("as root, only a read-only mount makes a folder unwritable, and mounting is not permitted")
    else:
        readonly.mkdir()
        readonly.chmod(0o555)
    try:
        for out, message in (
            (readonly, f"Error: output {readonly}: folder is not writable; choose another with -o\n"),
            (
                readonly / "out",
                f"Error: output {readonly / 'out'}: not writable "
                f"({'Read-only file system' if os.geteuid() == 0 else 'Permission denied'}); "
                "choose another folder with -o\n",
            ),
        ):
            done = run_cli("transform", small_corpus, "-t", sample_tokenizer, "-o", out, "-q")
            assert done.returncode == 1
            assert done.stderr == message
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(readonly)], check=True)
        else:
            readonly.chmod(0o755)


def test_an_output_path_that_is_a_file_is_one_clear_error(small_corpus, sample_tokenizer, tmp_path):
    (tmp_path / "taken").write_text("not a folder")
    result = cli(["transform", str(small_corpus), "-t", sample_tokenizer, "-o", str(tmp_path / "taken")])
    assert result.exit_code == 1
    assert result.output.splitlines()[-1].startswith(f"Error: output {tmp_path / 'taken'}: ")
