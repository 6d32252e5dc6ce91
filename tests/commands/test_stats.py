"""objcli stats against counts computed here, straight from the shards."""

import json

from runs import cli, manifest_json, read_output, run_transform


def table_of(folder):
    return read_output(folder)[1]


def stats_json(folder):
    result = cli(["stats", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_clm_supervised_tokens_are_next_token_targets(small_corpus, sample_tokenizer, tmp_path):
    run_transform(
        [small_corpus], sample_tokenizer, tmp_path / "out", seq_len=256, packing="best-fit", text_unit="paragraph"
    )
    table, stats = table_of(tmp_path / "out"), stats_json(tmp_path / "out")
    segments = [[row.count(s) for s in range(1, max(row) + 1)] for row in table["segment_ids"]]
    assert stats["rows"] == len(table["input_ids"])
    assert stats["supervised_tokens"] == sum(n - 1 for row in segments for n in row)
    assert stats["padding_tokens"] == sum(row.count(0) for row in table["segment_ids"])
    assert stats["examples"] == sum(len(row) for row in segments)
    assert sum(stats["example_length_histogram"]["counts"]) == stats["examples"]


def test_mlm_and_span_corruption_supervision(small_corpus, sample_tokenizer, tmp_path):
    run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path / "mlm", objective="mlm", seq_len=128)
    table, stats = table_of(tmp_path / "mlm"), stats_json(tmp_path / "mlm")
    selected = sum(lab != -100 for row in table["labels"] for lab in row)
    assert stats["supervised_tokens"] == selected
    assert 0.12 < stats["supervised_fraction"] < 0.18  # about 15 %
    run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path / "t5", objective="t5", seq_len=512)
    stats = stats_json(tmp_path / "t5")
    assert stats["supervised_tokens"] == 114 * stats["rows"]  # T5: 114 targets per 512 inputs


def test_ul2_per_denoiser_counts_and_plot(small_corpus, sample_tokenizer, tmp_path):
    run_transform(
        [small_corpus / "prose.jsonl"],
        sample_tokenizer,
        tmp_path / "ul2",
        objective="ul2",
        seq_len=128,
        mixture="ul2-3",
    )
    table = table_of(tmp_path / "ul2")
    png = tmp_path / "stats.png"
    result = cli(["stats", str(tmp_path / "ul2"), "--plot", str(png)])
    assert result.exit_code == 0 and "denoiser R-3-0.15" in result.output
    stats = stats_json(tmp_path / "ul2")
    names = [d["name"] for d in manifest_json(tmp_path / "ul2")["config"]["objective_options"]["denoisers"]]
    for index, name in enumerate(names):
        members = [i for i, d in enumerate(table["denoiser"]) if d == index]
        assert stats["categories"][name]["rows"] == len(members)
        assert stats["categories"][name]["supervised_tokens"] == sum(len(table["labels"][i]) for i in members)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    import matplotlib.pyplot as plt

    height, width, _ = plt.imread(png).shape
    assert (width, height) == (1100, 400)


def test_a_mixtures_plot_draws_each_sources_share_beside_the_asked_one(sample_dir, sample_tokenizer, tmp_path):
    """Issue 72, item 6: stats --plot drew lengths but no per-source shares for a mixture."""
    import matplotlib.pyplot as plt

    sources = [f"prose={sample_dir / 'prose.jsonl'}", f"code={sample_dir / 'code.jsonl'}"]
    run_transform([], sample_tokenizer, tmp_path / "mix", source=sources, weights="prose=0.7,code=0.3", seq_len=256)
    png = tmp_path / "mix.png"
    result = cli(["stats", str(tmp_path / "mix"), "--plot", str(png)])
    assert result.exit_code == 0 and "(asked 70.0%)" in result.output
    height, width, _ = plt.imread(png).shape
    assert (width, height) == (1650, 400)  # a third panel: the shares
