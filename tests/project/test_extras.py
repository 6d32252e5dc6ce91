"""Every extra installs what its features import: for the core install and for each extra in
pyproject.toml, a fresh virtual environment with objcli and that extra alone (as a user installs
it) runs the feature the extra exists for. A module missing there is one line naming the extra.

Slow (a virtual environment each, from the package index or pip's cache): ``make test-all`` and
``.ci/run`` run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from paths import CHAT_TEMPLATES
from runs import ROOT, SAMPLE

pytestmark = pytest.mark.slow

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# Extras for the project's own tests and benchmarks, not features a user installs.
DEVELOPMENT = {"test", "bench"}
USER_EXTRAS = sorted(set(PYPROJECT["project"]["optional-dependencies"]) - DEVELOPMENT)
LLAMA_STYLE = SAMPLE / "llama-style"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """objcli built once per test process, as a wheel, for every environment below: from a copy of the
    project, since a build writes into the tree it builds (two test processes building the checkout
    at once would share its build folder)."""
    import shutil

    folder, source = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "objcli", source / "objcli", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(folder), str(source)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return next(folder.glob("objcli-*.whl"))


# What a user installs first for an extra: PyTorch for their hardware (here its CPU build, on disk).
FIRST = {"train": ["torch==2.13.0"]}


def make_venv(folder: Path, wheel: Path, extra: str | None, first: list[str] | None = None) -> Path:
    """A fresh environment with objcli and ``extra``; ``first`` installed before them (pip then keeps
    what already satisfies objcli's requirements)."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    target = f"{wheel}[{extra}]" if extra else str(wheel)
    first = first or [p for e in (extra or "").split(",") for p in FIRST.get(e, [])]
    for packages in (first, [target]):
        if not packages:
            continue
        result = subprocess.run(
            [str(folder / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr[-3000:]
    return folder / "bin"


def objcli(bin_folder: Path, *args, env=None, cwd=None) -> subprocess.CompletedProcess:
    environment = {**os.environ, **(env or {})}
    environment.pop("PYTHONPATH", None)  # nothing of the test environment leaks in
    return subprocess.run(
        [str(bin_folder / "objcli"), *map(str, args)],
        capture_output=True,
        text=True,
        env=environment,
        cwd=cwd,
        timeout=300,
    )


def long_documents(folder: Path) -> Path:
    """JSON lines with a document past the cut threshold (200,000 characters): cut by the tokenizer's
    own split pattern, which needs the regex module."""
    from objcli.tokenizers import LONG_TEXT_CHARS

    texts = [json.loads(line)["text"] for line in (SAMPLE / "code.jsonl").read_text().splitlines()]
    long_text = "\n".join(texts)
    assert len(long_text) > LONG_TEXT_CHARS
    path = folder / "code.jsonl"
    path.write_text(json.dumps({"text": long_text}) + "\n" + json.dumps({"text": texts[0]}) + "\n")
    return path


def manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def one_error_line(result) -> str:
    assert result.returncode != 0 and result.stderr.count("\n") == 1 and result.stderr.startswith("Error: "), (
        result.stderr
    )
    assert "Traceback" not in result.stderr
    return result.stderr


# ---- what each extra is for ----


def check_core(bin_folder, tmp):
    out = tmp / "core-out"
    result = objcli(bin_folder, "transform", SAMPLE / "prose.jsonl", "-t", SAMPLE / "tokenizer.model", "-o", out, "-q")
    assert result.returncode == 0, result.stderr
    assert manifest(out)["tokenizer"]["engine"]["name"] == "sentencepiece"
    refused = objcli(bin_folder, "transform", SAMPLE / "prose.jsonl", "-t", LLAMA_STYLE, "-o", tmp / "no-hf")
    assert "pip install 'objcli[hf]'" in one_error_line(refused)
    # Rows on read in the core install: a store, an MLM plan over it (its masking made on read), the reader.
    store, plan = tmp / "store", tmp / "plan"
    assert (
        objcli(bin_folder, "tokenize", SAMPLE / "prose.jsonl", "-t", SAMPLE / "tokenizer.model", "-o", store).returncode
        == 0
    )
    made = objcli(
        bin_folder, "transform", store, "--objective", "mlm", "--seq-len", "64", "--format", "plan", "-o", plan
    )
    assert made.returncode == 0, made.stderr
    assert objcli(bin_folder, "verify", plan).returncode == 0
    read = subprocess.run(
        [
            str(bin_folder / "python"),
            "-c",
            "import sys; from objcli.reading import Rows; r = Rows(sys.argv[1]); "
            "print(len(r), r[len(r) - 1]['labels'].dtype)",
            str(plan),
        ],
        capture_output=True,
        text=True,
    )
    assert read.returncode == 0 and read.stdout.split() == [str(manifest(plan)["totals"]["rows"]), "int16"], read.stderr


def check_hf(bin_folder, tmp):
    out, cache = tmp / "hf-out", tmp / "cache"
    first = objcli(
        bin_folder, "transform", long_documents(tmp), "-t", LLAMA_STYLE, "-o", out, env={"XDG_CACHE_HOME": str(cache)}
    )
    assert first.returncode == 0, first.stderr
    written = manifest(out)
    assert written["tokenizer"]["engine"]["name"] == "tokenizers" and written["totals"]["rows"] > 0
    # The stable library is exact but not the fastest: the user is told once, and not again.
    assert first.stderr.count("pip install 'objcli[fast]'") == 1, first.stderr
    again = objcli(
        bin_folder,
        "transform",
        long_documents(tmp),
        "-t",
        LLAMA_STYLE,
        "-o",
        out,
        "--overwrite",
        env={"XDG_CACHE_HOME": str(cache)},
    )
    assert again.returncode == 0 and "objcli[fast]" not in again.stderr, again.stderr


def check_fast(bin_folder, tmp):
    """The quickstart's Llama-style run, with the fast engine chosen and recorded, no notice."""
    out = tmp / "fast-out"
    result = objcli(
        bin_folder,
        "transform",
        long_documents(tmp),
        "-t",
        LLAMA_STYLE,
        "--seq-len",
        "1024",
        "--format",
        "hf",
        "-o",
        out,
        env={"XDG_CACHE_HOME": str(tmp / "cache")},
    )
    assert result.returncode == 0, result.stderr
    engine = manifest(out)["tokenizer"]["engine"]
    assert engine["name"] in ("gigatoken", "quicktok") and engine["probe"].startswith("identical to tokenizers 0.")
    assert "objcli[fast]" not in result.stderr


def check_tiktoken(bin_folder, tmp):
    from bpe_files import write_rank_file

    from objcli.tokenizers.bpe_spec import FROM_BYTE_CHARS

    document = json.loads((LLAMA_STYLE / "tokenizer.json").read_text())
    specials = {t["content"]: t["id"] for t in document["added_tokens"]}
    ranks = {
        piece.translate(FROM_BYTE_CHARS).encode("latin-1"): rank
        for piece, rank in document["model"]["vocab"].items()
        if piece not in specials
    }
    rank_file = write_rank_file(ranks, tmp / "tt" / "sample.tiktoken")
    pattern = document["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    side = {"pattern": pattern, "special_tokens": specials, "bos": "<|begin_of_text|>", "eos": "<|end_of_text|>"}
    rank_file.with_name(rank_file.name + ".json").write_text(json.dumps(side))
    out = tmp / "tiktoken-out"
    result = objcli(bin_folder, "transform", SAMPLE / "prose.jsonl", "-t", rank_file, "-o", out, "-q")
    assert result.returncode == 0, result.stderr
    assert manifest(out)["tokenizer"]["kind"] == "tiktoken" and manifest(out)["totals"]["rows"] > 0


def check_s3(bin_folder, tmp):
    import logging

    import s3fs
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        env = {
            "AWS_ACCESS_KEY_ID": "objcli-test",
            "AWS_SECRET_ACCESS_KEY": "objcli-test-secret",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": f"http://{host}:{port}",
            "AWS_CONFIG_FILE": "/nonexistent",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
        }
        client = s3fs.S3FileSystem(
            key=env["AWS_ACCESS_KEY_ID"],
            secret=env["AWS_SECRET_ACCESS_KEY"],
            client_kwargs={"endpoint_url": env["AWS_ENDPOINT_URL"]},
        )
        client.mkdir("extras")
        client.put(str(SAMPLE / "prose.jsonl"), "extras/in/prose.jsonl")
        result = objcli(
            bin_folder,
            "transform",
            "s3://extras/in/prose.jsonl",
            "-t",
            SAMPLE / "tokenizer.model",
            "-o",
            "s3://extras/out",
            "-q",
            env=env,
        )
        assert result.returncode == 0, result.stderr
        client.invalidate_cache()
        assert json.loads(client.cat("extras/out/manifest.json"))["totals"]["rows"] > 0
    finally:
        server.stop()


def check_gcs(bin_folder, tmp):
    """gcsfs is there: a gs:// input reaches the (absent) service and fails as a service does, in one
    line, not as a missing module."""
    env = {"STORAGE_EMULATOR_HOST": "http://127.0.0.1:9", "GCSFS_DEFAULT_PROJECT": "objcli"}
    result = objcli(
        bin_folder,
        "transform",
        "gs://bucket/prose.jsonl",
        "-t",
        SAMPLE / "tokenizer.model",
        "-o",
        tmp / "gcs-out",
        env=env,
    )
    line = one_error_line(result)
    assert "gs://bucket" in line and "pip install" not in line


def check_dask(bin_folder, tmp):
    out = tmp / "dask-out"
    result = objcli(
        bin_folder,
        "transform",
        SAMPLE / "prose.jsonl",
        "-t",
        SAMPLE / "tokenizer.model",
        "-o",
        out,
        "--executor",
        "dask",
        "--workers",
        "2",
        "--partition-size",
        "256KiB",
        "-q",
    )
    assert result.returncode == 0, result.stderr
    assert len(manifest(out)["partitions"]) > 1


def check_plot(bin_folder, tmp):
    out = tmp / "plot-out"
    assert (
        objcli(
            bin_folder, "transform", SAMPLE / "prose.jsonl", "-t", SAMPLE / "tokenizer.model", "-o", out, "-q"
        ).returncode
        == 0
    )
    result = objcli(bin_folder, "stats", out, "--plot", tmp / "stats.png")
    assert result.returncode == 0, result.stderr
    assert (tmp / "stats.png").read_bytes().startswith(b"\x89PNG")


def check_datasets(bin_folder, tmp):
    """The README's tour: an hf output read back by datasets, splits as a DatasetDict."""
    out = tmp / "datasets-out"
    result = objcli(
        bin_folder,
        "transform",
        SAMPLE / "prose.jsonl",
        "-t",
        SAMPLE / "tokenizer.model",
        "-o",
        out,
        "--format",
        "hf",
        "--split",
        "validation=10%",
        "-q",
    )
    assert result.returncode == 0, result.stderr
    read = subprocess.run(
        [
            str(bin_folder / "python"),
            "-c",
            "import datasets, sys; d = datasets.load_from_disk("
            "sys.argv[1]); print(sorted(d), sum(d.num_rows.values()))",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == ["['train',", "'validation']", str(manifest(out)["totals"]["rows"])]


def check_train(bin_folder, tmp):
    """The trainers' recipes run as the page shows them: the objcli command, then the script."""
    from recipes import recipe, recipe_folder

    folder = recipe_folder(tmp / "recipe")
    for name in ("clm", "seq2seq", "plan"):
        commands, script = recipe(name)
        for args in commands:
            result = objcli(bin_folder, *args, cwd=folder)
            assert result.returncode == 0, result.stderr
        (folder / f"{name}.py").write_text(script)
        run = subprocess.run(
            [str(bin_folder / "python"), f"{name}.py"],
            capture_output=True,
            text=True,
            timeout=900,
            cwd=folder,
            env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": ""},
        )
        assert run.returncode == 0, run.stderr[-3000:]
        assert "'train_loss'" in run.stdout + run.stderr, run.stdout[-2000:]  # the trainer's own end-of-training log
    check_resume(bin_folder, tmp)


def check_resume(bin_folder, tmp):
    """The resume recipe from the train extra alone (torch and torchdata): stopped, then resumed in a new
    process, every row of the plan trained on once."""
    from recipes import recipe, recipe_folder

    folder = recipe_folder(tmp / "resume")
    commands, script = recipe("resume")
    for args in commands:
        assert objcli(bin_folder, *args, cwd=folder).returncode == 0
    (folder / "resume.py").write_text(script)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": "", "RANK": "0", "WORLD_SIZE": "1"}
    for _ in range(2):
        run = subprocess.run([str(bin_folder / "python"), "resume.py"], capture_output=True, text=True,
                             timeout=900, cwd=folder, env=env)  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
    rows = (folder / "rows-rank0.jsonl").read_text().splitlines()
    assert len(rows) == manifest(folder / "plan")["totals"]["rows"] and len(set(rows)) > 0.9 * len(rows)


def check_fast_beside_the_trainers(bin_folder, tmp):
    """objcli[fast] and the trainers in one environment: transformers and TRL import (the fast
    engines do not replace the stable tokenizers they need), the fast engine encodes, the recipes run."""
    imported = subprocess.run(
        [str(bin_folder / "python"), "-c", "import tokenizers, transformers, trl; print(tokenizers.__version__)"],
        capture_output=True,
        text=True,
    )
    assert imported.returncode == 0 and not imported.stdout.startswith("1."), imported.stderr[-2000:]
    check_fast(bin_folder, tmp)
    check_train(bin_folder, tmp)


VISION_TEMPLATES = CHAT_TEMPLATES / "vision"


def check_vision(bin_folder, tmp):
    """Pillow (and aiohttp) alone: a conversation showing an image, with a SentencePiece model holding
    Qwen2-VL's tokens and a processor folder as released, gives a row with the image and its 50 tokens
    (a 280x140 image: a 20x10 grid of patches, merged 2x2)."""
    script = f"""
import json, sys
from pathlib import Path
import sentencepiece as spm
from PIL import Image
tmp = Path(sys.argv[1])
words = "the river runs to the sea why is the sky blue describe this image".split()
(tmp / "words.txt").write_text("\\n".join(" ".join(words[i:] + words[:i]) for i in range(len(words))) * 20)
specials = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
spm.SentencePieceTrainer.train(input=str(tmp / "words.txt"), model_prefix=str(tmp / "vl"), vocab_size=40,
                               user_defined_symbols=specials, minloglevel=2)
processor = tmp / "processor"
processor.mkdir()
config = {{"processor_class": "Qwen2VLProcessor", "patch_size": 14, "merge_size": 2, "min_pixels": 3136,
          "max_pixels": 12845056}}
(processor / "preprocessor_config.json").write_text(json.dumps(config))
(processor / "chat_template.jinja").write_text({(VISION_TEMPLATES / "qwen2_vl.jinja").read_text()!r})
Image.new("RGB", (280, 140)).save(tmp / "a.png")
image = {{"type": "image", "image": str(tmp / "a.png")}}
record = {{"messages": [{{"role": "user", "content": [image, {{"type": "text", "text": "describe this image"}}]}},
                        {{"role": "assistant", "content": "the sky"}}]}}
(tmp / "vqa.jsonl").write_text(json.dumps(record) + "\\n")
"""
    made = subprocess.run([str(bin_folder / "python"), "-c", script, str(tmp)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    out = tmp / "vision-out"
    args = ("transform", tmp / "vqa.jsonl", "-t", tmp / "vl.model", "--objective", "chat", "--processor")
    result = objcli(bin_folder, *args, tmp / "processor", "--format", "parquet", "-o", out, "-q")
    assert result.returncode == 0, result.stderr
    import pyarrow.parquet as pq

    row = pq.read_table(next(out.glob("*.parquet"))).to_pylist()[0]
    assert row["images"] == [str(tmp / "a.png")] and [e - s for s, e in row["image_spans"]] == [50]


FEATURES = {
    None: check_core,
    "hf": check_hf,
    "fast": check_fast,
    "tiktoken": check_tiktoken,
    "s3": check_s3,
    "gcs": check_gcs,
    "dask": check_dask,
    "plot": check_plot,
    "datasets": check_datasets,
    "train": check_train,
    "vision": check_vision,
}


def test_the_fast_engines_live_beside_the_trainers(wheel, tmp_path):
    bin_folder = make_venv(tmp_path / "venv", wheel, "fast,train")
    check_fast_beside_the_trainers(bin_folder, tmp_path)


def test_every_extra_has_a_feature_test():
    assert set(FEATURES) - {None} == set(USER_EXTRAS)


@pytest.mark.parametrize("extra", [None, *USER_EXTRAS], ids=lambda e: e or "core")
def test_an_extra_alone_runs_its_feature(extra, wheel, tmp_path):
    bin_folder = make_venv(tmp_path / "venv", wheel, extra)
    FEATURES[extra](bin_folder, tmp_path)
