"""Weighted sources (issue 14): ``--source`` and ``--weights`` give the output the mixture asked for,
by keyed selection and whole-document repeats, with each row's source in a column."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runs import folder_bytes, read_output, run_cli, run_transform

from objcli.commands.stats import compute_stats
from objcli.commands.verify import verify_output
from objcli.errors import ObjcliError
from objcli.order.mixture import MAX_LEVELS, MixtureDraws, copies, exact_cut, parse_weights, taken


@pytest.fixture(scope="module")
def sources(sample_dir, tmp_path_factory):
    """Two sources of many documents each (the real sample corpus: prose, and code cut into its
    functions' paragraphs), so a share of the output is a sum over hundreds of keyed draws."""
    folder = tmp_path_factory.mktemp("sources")
    prose = (sample_dir / "prose.jsonl").read_text(encoding="utf-8").splitlines()[:3000]
    code = [
        p
        for line in (sample_dir / "code.jsonl").read_text(encoding="utf-8").splitlines()
        for p in json.loads(line)["text"].split("\n\n")
        if p.strip()
    ]
    (folder / "prose.jsonl").write_text("\n".join(prose) + "\n", encoding="utf-8")
    (folder / "code.jsonl").write_text("".join(json.dumps({"text": p}) + "\n" for p in code), encoding="utf-8")
    assert len(code) > 1000
    return [f"prose={folder / 'prose.jsonl'}", f"code={folder / 'code.jsonl'}"]


@pytest.mark.parametrize("weights", ["prose=0.3,code=0.7", "prose=0.8,code=0.2"])
def test_the_output_holds_the_mixture_asked_for(weights, sources, sample_tokenizer, tmp_path):
    out = tmp_path / "out"
    summary = run_transform([], sample_tokenizer, out, source=sources, weights=weights, seq_len=128)
    t = summary.manifest["totals"]
    assert t["documents_read"] == t["documents_written"] + t["documents_skipped"]
    assert verify_output(out).ok
    asked = dict(part.split("=") for part in weights.split(","))
    stats = compute_stats(out)
    for name, share in asked.items():
        # Each source's tokens counted in the first pass and its documents taken to the token (issue 72,
        # item 5: estimated from the first MiB, a share missed by 2.7 points): within half a point.
        assert abs(stats["mixture"][name]["share"] - float(share)) < 0.005, stats["mixture"]
    # Every row says its source, and rows of a source hold only that source's documents.
    manifest, table = read_output(out)
    assert set(table["source"]) == {0, 1} and manifest["columns"][-1]["categories"] == ["prose", "code"]
    mixture = manifest["mixture"]
    upsampled = max(mixture, key=lambda n: mixture[n]["rate"])
    assert mixture[upsampled]["rate"] > 1 and mixture[upsampled]["documents_written"] > 0


def test_budgets_and_repeats(sources, sample_tokenizer, tmp_path):
    """Token budgets: rate = budget / the source's tokens; a rate of 2.5 repeats every document 2 or
    3 times, each repeat with draws of its own (MLM masks differ between copies)."""
    plain = run_transform(
        [],
        sample_tokenizer,
        tmp_path / "plain",
        source=sources,
        weights="prose=1M,code=1M",
        objective="mlm",
        seq_len=128,
    )
    mixture = plain.manifest["mixture"]
    for entry in mixture.values():
        # Counted, and taken to the token: whole copies, then documents by their keyed uniforms.
        assert np.floor(entry["rate"]) == np.floor(1e6 / entry["counted_tokens"])
        assert entry["documents_written"] > entry["documents_read"] / np.ceil(entry["rate"])  # copies were made
    _, table = read_output(tmp_path / "plain")
    rows = [tuple(r) for r in table["input_ids"]]
    assert len(set(rows)) > 0.95 * len(rows)  # copies of one document are masked apart


def test_copies_follow_the_documents_place_whatever_the_batches():
    """Each document's draw is keyed to its place (seed, source, partition, its number there): the same in
    batches of any size, apart for identical texts, and another for another source or partition."""
    chars = np.full(20_000, 12)
    whole = MixtureDraws(0, "web", 3).next(20_000)
    draws = MixtureDraws(0, "web", 3)
    assert np.array_equal(np.concatenate([draws.next(n) for n in (1, 999, 7_000, 12_000)]), whole)
    made = copies(whole, chars, 2.25, None)
    assert set(np.unique(made)) == {2, 3} and abs(made.mean() - 2.25) < 0.02
    assert not np.array_equal(whole, MixtureDraws(0, "code", 3).next(20_000))
    assert not np.array_equal(whole, MixtureDraws(0, "web", 4).next(20_000))


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 5_000) | st.integers(5_000, 400_000), min_size=1, max_size=300),
    fraction=st.floats(0, 1),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_cut_takes_the_tokens_asked_within_one_small_document(lengths, fraction, seed):
    """Whatever the lengths (a long tail, many equal ones): the documents taken never pass the tokens asked,
    and what is left is less than any document not taken that the run could tell fits (by its characters)."""
    tokens = np.array(lengths, np.int64)
    chars = tokens * 4
    uniform = np.random.default_rng(seed).random(len(tokens))
    wanted = fraction * tokens.sum()
    cut = exact_cut(uniform, chars, tokens, wanted)
    chosen = taken(uniform, chars, cut)
    got = tokens[chosen].sum()
    assert got <= wanted
    if len(cut) < MAX_LEVELS:
        assert not (tokens[~chosen] <= wanted - got).any()


def test_the_same_bytes_for_any_workers(sources, sample_tokenizer, tmp_path):
    outputs = []
    for workers in (1, 2):
        run_transform(
            [],
            sample_tokenizer,
            tmp_path / str(workers),
            workers=workers,
            source=sources,
            weights="prose=0.5,code=0.5",
            seq_len=128,
            partition_size="16KiB",
            shuffle_rows=True,
        )
        outputs.append(folder_bytes(tmp_path / str(workers)))
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize(
    "weights, message",
    [
        ("prose=0.5", "give every source (prose, code) either a share"),
        ("prose=0.5,code=1B", "give every source (prose, code) either a share"),
        ("prose=0.5,web=0.5", "must be SOURCE=SHARE (web=0.7) or SOURCE=TOKENS (code=2B)"),
        ("prose=-1,code=1", "must be SOURCE=SHARE"),
    ],
)
def test_bad_weights_are_one_line_errors(weights, message):
    with pytest.raises(ObjcliError, match=f"^--weights {weights}: .*{message}".replace("(", r"\(").replace(")", r"\)")):
        parse_weights(weights, ["prose", "code"])


def test_the_command_line_and_its_refusals(sources, sample_tokenizer, tmp_path):
    done = run_cli(
        "transform",
        "--source",
        sources[0],
        "--source",
        sources[1],
        "--weights",
        "prose=0.6,code=0.4",
        "-t",
        sample_tokenizer,
        "--seq-len",
        "128",
        "-o",
        tmp_path / "out",
        "-q",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["recipe"]["source"] == sources
    for extra, error in (
        (["--format", "tokens"], "Error: --format tokens stores input_ids only"),
        ([], "Error: --source and --weights go together"),
    ):
        weights = [] if not extra else ["--weights", "prose=0.6,code=0.4"]
        done = run_cli(
            "transform",
            "--source",
            sources[0],
            "--source",
            sources[1],
            *weights,
            *extra,
            "-t",
            sample_tokenizer,
            "-o",
            tmp_path / "bad",
        )
        assert done.returncode == 1 and done.stderr.startswith(error), done.stderr
    done = run_cli(
        "transform",
        sources[0].split("=")[1],
        "--source",
        sources[0],
        "--weights",
        "prose=1",
        "-t",
        sample_tokenizer,
        "-o",
        tmp_path / "bad",
    )
    assert done.stderr.startswith("Error: --source names every input of a mixture")


def test_a_file_in_two_sources_is_refused_naming_it_and_both(sources, sample_tokenizer, tmp_path):
    """Issue 30, item 2: the same file in two sources was read and written twice (124 documents for
    62); so was a folder of one source holding another source's file, or the same file reached
    through a symbolic link. Each is one line naming the file and both sources."""
    folder = sources[0].split("=", 1)[1].rsplit("/", 1)[0]
    (tmp_path / "link.jsonl").symlink_to(f"{folder}/prose.jsonl")
    for second in (
        f"web={folder}/prose.jsonl",
        f"web={folder}",
        f"web={folder}/*.jsonl",
        f"web={tmp_path / 'link.jsonl'}",
    ):
        done = run_cli(
            "transform",
            "--source",
            sources[0],
            "--source",
            second,
            "--weights",
            "prose=0.5,web=0.5",
            "-t",
            sample_tokenizer,
            "-o",
            tmp_path / "out",
            "-q",
        )
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert (
            done.stderr.startswith("Error: --source prose and --source web both hold ") and "prose.jsonl" in done.stderr
        )
        assert not (tmp_path / "out").exists()


def test_a_budget_needing_many_copies_warns_and_one_needing_thousands_is_refused(sources, sample_tokenizer, tmp_path):
    """Issue 30: a token budget needing thousands of copies of each document neither warned nor asked."""
    natural = run_transform(
        [], sample_tokenizer, tmp_path / "n", source=sources, weights="prose=1M,code=1M", seq_len=128
    )
    code_tokens = natural.manifest["mixture"]["code"]["counted_tokens"]
    warned = run_cli(
        "transform",
        "--source",
        sources[0],
        "--source",
        sources[1],
        "--weights",
        f"prose=100K,code={6 * code_tokens // 1000}K",
        "-t",
        sample_tokenizer,
        "--seq-len",
        "128",
        "-o",
        tmp_path / "w",
        "-q",
    )
    assert warned.returncode == 0 and "source code: every document is written about 6.0 times" in warned.stderr
    refused = run_cli(
        "transform",
        "--source",
        sources[0],
        "--source",
        sources[1],
        "--weights",
        f"prose=100K,code={2000 * code_tokens // 1000}K",
        "-t",
        sample_tokenizer,
        "--seq-len",
        "128",
        "-o",
        tmp_path / "r",
        "-q",
    )
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert refused.stderr.startswith("Error: --weights: source code holds about") and "2,000 copies" in refused.stderr


def test_a_bad_record_is_counted_once_whatever_the_passes(sources, sample_tokenizer, tmp_path):
    """Issue 53: a source read at rate 1.x takes a second pass, which found its bad records again and
    counted (and said) each twice. Now each record is counted once; read = written + skipped holds."""
    prose = open(sources[0].split("=", 1)[1]).read().splitlines(keepends=True)
    (tmp_path / "web.jsonl").write_text("".join(prose[:150]) + "{broken\n" + '{"text": ""}\n' + "".join(prose[150:300]))
    (tmp_path / "other.jsonl").write_text("".join(prose[300:600]))
    done = run_cli(
        "transform", "--source", f"web={tmp_path / 'web.jsonl'}", "--source", f"other={tmp_path / 'other.jsonl'}",
        "--weights", "web=0.85,other=0.15", "-t", sample_tokenizer, "--seq-len", "64", "-o", tmp_path / "o",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert 1 < manifest["mixture"]["web"]["rate"] < 2  # a second pass over web
    totals = manifest["totals"]
    assert totals["skipped_by_reason"]["bad_json"] == 1 and totals["skipped_by_reason"]["empty_text"] == 1
    assert totals["documents_read"] == totals["documents_written"] + totals["documents_skipped"]
    assert "skipped 1 record (bad_json)" in done.stderr


@pytest.mark.parametrize(
    "weights",
    [
        pytest.param("dup=0.2,tail=0.8", marks=pytest.mark.heavy),  # shares the default case's machinery
        pytest.param("dup=0.15,tail=0.85", marks=pytest.mark.heavy),
        "dup=0.7,tail=0.3",
    ],
)
def test_shares_hold_on_duplicates_and_a_long_tail(weights, sample_dir, sample_tokenizer, tmp_path):
    """A source of thousands of identical one-letter documents (drawn apart: each keyed to its place) beside
    one whose documents run from a line to 40,000 tokens (taken past the first that would pass the budget):
    every source within half a point of its share."""
    lines = (sample_dir / "prose.jsonl").read_text(encoding="utf-8").splitlines()
    texts = [json.loads(line)["text"] for line in lines]
    tail = [" ".join(texts[: 1 + (k * 37) % 200]) if k % 9 == 0 else texts[k % len(texts)][:200] for k in range(300)]
    (tmp_path / "dup.txt").write_text("a\n" * 20_000)
    (tmp_path / "tail.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in tail))
    sources = [f"dup={tmp_path / 'dup.txt'}", f"tail={tmp_path / 'tail.jsonl'}"]
    out = tmp_path / "out"
    run_transform([], sample_tokenizer, out, source=sources, weights=weights, seq_len=128, remainder="pad")
    stats = compute_stats(out)
    for name, share in (part.split("=") for part in weights.split(",")):
        assert abs(stats["mixture"][name]["share"] - float(share)) < 0.005, stats["mixture"]
