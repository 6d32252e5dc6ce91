"""A mixture written for Megatron-LM (issue 53): each source's documents once, in shards of their own,
and per split the blend file (``megatron.txt``, ``megatron-validation.txt``) whose weights give each
source its asked-for share of the tokens: Megatron-LM's own blended dataset samples it so."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from runs import SAMPLE, run_cli
from sources import code_paragraphs, run_web_and_code

from objcli.commands.verify import verify_output


@pytest.fixture(scope="module")
def mixture(tmp_path_factory):
    """web (JSON lines, ``text``) and code (Parquet, ``content``), 70/30, written for Megatron with a
    validation split, several partitions per source."""
    folder = tmp_path_factory.mktemp("megatron-mixture")
    pq.write_table(pa.table({"content": code_paragraphs()}), folder / "code.parquet")
    out = folder / "out"
    summary = run_web_and_code(
        out,
        SAMPLE / "prose.jsonl",
        folder / "code.parquet",
        "content",
        weights="web=0.7,code=0.3",
        output_format="megatron",
        split="validation=5%",
        partition_size="256KiB",
        shard_size="300KB",  # several prefixes a source (a run joins partitions' shards up to this)
    )
    return out, summary.manifest


def blend(path) -> dict[str, float]:
    words = path.read_text().split()
    return dict(zip(words[1::2], map(float, words[0::2])))


def source_of_prefix(manifest) -> dict[str, str]:
    sources = {p["index"]: p["source"] for p in manifest["partitions"]}
    return {s["files"][0].removesuffix(".bin"): sources[s["partition"]] for s in manifest["shards"]}


@pytest.mark.parametrize("split, name", [("train", "megatron.txt"), ("validation", "megatron-validation.txt")])
def test_each_split_blend_gives_each_source_its_share(mixture, split, name):
    out, manifest = mixture
    weights, sources = blend(out / name), source_of_prefix(manifest)
    assert set(weights) == {s["files"][0].removesuffix(".bin") for s in manifest["shards"] if s["split"] == split}
    per_source = {}
    for prefix, weight in weights.items():
        per_source[sources[prefix]] = per_source.get(sources[prefix], 0.0) + weight
    assert per_source == pytest.approx({"web": 0.7, "code": 0.3}, abs=1e-9)
    # Within a source, shards weigh as their tokens: a source is read evenly, whatever its shards.
    tokens = {s["files"][0].removesuffix(".bin"): s["tokens"] for s in manifest["shards"]}
    web = [p for p in weights if sources[p] == "web"]
    assert len(web) > 1 or split == "validation"  # a small split may fit one prefix a source
    ratios = [weights[p] / tokens[p] for p in web]
    assert max(ratios) == pytest.approx(min(ratios), rel=1e-9)


def test_every_document_is_written_once_and_verify_checks_the_blend(mixture, tmp_path):
    out, manifest = mixture
    t = manifest["totals"]
    assert t["documents_read"] == t["documents_written"] + t["documents_skipped"]
    assert "mixture_not_sampled" not in t["skipped_by_reason"]  # Megatron samples; objcli copies nothing
    assert {name: m["rate"] for name, m in manifest["mixture"].items()} == {"web": 1.0, "code": 1.0}
    assert verify_output(out).ok
    edited = tmp_path / "edited"
    edited.mkdir()
    for path in out.iterdir():
        (edited / path.name).symlink_to(path) if path.name != "megatron.txt" else None
    (edited / "megatron.txt").write_text((out / "megatron.txt").read_text().replace("0.", "0.0", 1))
    assert any("megatron.txt" in p for p in verify_output(edited).problems)


def test_megatron_lm_samples_the_asked_shares(mixture, monkeypatch):
    pytest.importorskip("megatron.core.datasets.helpers_cpp")
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.utils import get_blend_from_list

    out, manifest = mixture

    class Tokenizer:  # what GPTDataset asks of one: its EOD and pad ids, its vocabulary's size
        eod, pad, vocab_size = 2, 0, manifest["tokenizer"]["total_vocab_size"]
        unique_identifiers = {"class": "objcli-test"}

    monkeypatch.chdir(out)  # the blend's prefixes are relative to the output folder
    blends = [get_blend_from_list((out / n).read_text().split()) for n in ("megatron.txt", "megatron-validation.txt")]
    config = GPTDatasetConfig(
        random_seed=1234,
        sequence_length=64,
        blend_per_split=[*blends, None],
        tokenizer=Tokenizer(),
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
        path_to_cache=None,
    )
    train, validation, _ = BlendedMegatronDatasetBuilder(GPTDataset, [4000, 400, None], lambda: True, config).build()
    sources = source_of_prefix(manifest)
    for dataset in (train, validation):
        samples = np.bincount(np.asarray(dataset.dataset_index), minlength=len(dataset.datasets))
        web = sum(n for d, n in zip(dataset.datasets, samples) if sources[d.dataset.path_prefix] == "web")
        assert web / samples.sum() == pytest.approx(0.7, abs=2 / samples.sum())


@pytest.mark.parametrize(
    "args, message",
    [
        (["--max-epochs", "code=2"], "--max-epochs code=2: --format megatron copies no document"),
        (["--format", "tokens"], "--format tokens stores input_ids only"),
        (["--shuffle-rows"], "--shuffle-rows: --format megatron keeps each source's rows in shards of their own"),
    ],
)
def test_what_a_megatron_mixture_refuses(args, message, tmp_path):
    sources = ["--source", f"web={SAMPLE / 'prose.jsonl'}", "--source", f"code={SAMPLE / 'code.jsonl'}"]
    fmt = [] if "--format" in args else ["--format", "megatron"]
    result = run_cli(
        "transform",
        *sources,
        "--weights",
        "web=1,code=1",
        *fmt,
        *args,
        "-t",
        SAMPLE / "tokenizer.model",
        "-o",
        tmp_path / "o",
    )
    assert result.returncode == 1 and result.stderr.startswith(f"Error: {message}"), result.stderr


@pytest.mark.parametrize("command", ["merge", "reshard"])
def test_a_megatron_mixture_is_not_joined_or_recut(mixture, command, tmp_path):
    out, _ = mixture
    extra = ["--num-shards", "2"] if command == "reshard" else []
    result = run_cli(command, out, *extra, "-o", tmp_path / "o")
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert f"Error: {command}: {out} is a mixture for megatron" in result.stderr


def test_stats_names_each_source_of_a_megatron_mixture(mixture):
    """Issue 65: stats on a Megatron mixture showed no sources (no source column to count). Each
    source's rows and tokens come from its shards (the manifest's partitions say whose), and its share
    of training's samples from the blend, beside the share asked."""
    from objcli.commands.stats import compute_stats

    out, manifest = mixture
    stats = compute_stats(out)
    sources = {p["index"]: p["source"] for p in manifest["partitions"]}
    for name, asked in (("web", 0.7), ("code", 0.3)):
        shards = [s for s in manifest["shards"] if sources[s["partition"]] == name]
        figures = stats["mixture"][name]
        assert figures["tokens"] == sum(s["tokens"] for s in shards) > 0
        assert figures["rows"] == sum(s["rows"] for s in shards)
        assert figures["blend_share"] == pytest.approx(asked) and figures["asked_share"] == pytest.approx(asked)
    shown = run_cli("stats", out)
    assert shown.returncode == 0 and "source code" in shown.stdout and "the blend file gives it 30.0%" in shown.stdout
