"""Engines (issue 25): every engine × tokenizer the tests cover writes the reference library's tokens on
every document of a multilingual corpus; the pre-release `tokenizers` 1.0 (run in processes of its
own, beside the stable release) writes the same bytes; a parity failure falls back with a warning."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tomllib
from bpe_files import llama3_ranks, rank_file_to_tokenizer_json, shipped_ranks, trained_byte_level, write_rank_file
from hypothesis import given, settings
from hypothesis import strategies as st
from multilingual import documents
from runs import ROOT, SAMPLE, prerelease_env, read_output, run_cli, run_transform

from objcli.errors import ObjcliError
from objcli.tokenizers import LONG_TEXT_CHARS, open_tokenizer
from objcli.tokenizers.bpe_spec import BPESpec, Unsupported
from objcli.tokenizers.engine_probe import choose_engine, probe_texts
from objcli.tokenizers.engines import QuicktokEngine, check_merges_are_ranks, is_prerelease
from objcli.tokenizers.tiktoken_bpe import LLAMA3_PATTERN, _llama3_specials

tokenizers = pytest.importorskip("tokenizers")
tiktoken = pytest.importorskip("tiktoken")
pytest.importorskip("quicktok")
pytest.importorskip("gigatoken")


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    return documents(random_count=250, source_count=15, most=20_000)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """The tokenizer files the engines are tested on: Llama 3's 128k ranks as a rank file and as a
    tokenizer.json (converted as transformers converts it), and a GPT-2-style byte-level BPE trained
    here with the stable library."""
    folder = tmp_path_factory.mktemp("engines")
    ranks = llama3_ranks()
    paths = {
        "llama3.json": rank_file_to_tokenizer_json(
            ranks, LLAMA3_PATTERN, _llama3_specials(128_000), folder / "llama3" / "tokenizer.json"
        ),
        "llama3.tiktoken": write_rank_file(ranks, folder / "llama3.tiktoken"),
        # OpenAI's published encodings, recognised by their rank counts (patterns as tiktoken has them)
        "cl100k.tiktoken": write_rank_file(shipped_ranks("cl100k"), folder / "cl100k_base.tiktoken"),
        "o200k.tiktoken": write_rank_file(shipped_ranks("o200k"), folder / "o200k_base.tiktoken"),
    }
    texts = [json.loads(line)["text"] for line in (SAMPLE / "prose.jsonl").open()]
    paths["gpt2.json"] = trained_byte_level(texts, folder / "gpt2" / "tokenizer.json")
    return paths


def reference_ids(path: Path, texts: list[str]) -> list[list[int]]:
    """The reference library's own encoding, special-token text kept plain as objcli keeps it."""
    if path.suffix == ".json":
        library = tokenizers.Tokenizer.from_file(str(path))
        library.encode_special_tokens = True
        return [e.ids for e in library.encode_batch_fast(texts, add_special_tokens=False)]
    return open_tokenizer(path).encoding.encode_ordinary_batch(texts)


# The readable python engine on the whole multilingual corpus takes 3-7 s a file: gpt2.json's in
# the default run, the 128k files' under `slow` (the probe checks python against the stable
# library on every run anyway).
def _marks(name: str, engine: str) -> list:
    """The pure-Python engine past gpt2 is slow; the stable tokenizers engine (each file's reference, which
    the probe runs anyway) and gpt2's pure-Python run are heavy: make test-extras."""
    if engine == "python" and name != "gpt2.json":
        return [pytest.mark.slow]
    return [pytest.mark.heavy] if engine == "tokenizers" or engine == "python" else []


CASES = [
    pytest.param(name, engine, marks=_marks(name, engine))
    for name, engines in (
        ("llama3.json", ("tokenizers", "gigatoken", "python")),
        ("gpt2.json", ("tokenizers", "gigatoken", "python")),
        ("llama3.tiktoken", ("quicktok", "tiktoken", "python")),
        ("cl100k.tiktoken", ("quicktok", "tiktoken")),
        ("o200k.tiktoken", ("quicktok", "tiktoken")),
    )
    for engine in engines
]


@pytest.mark.parametrize(("name", "engine"), CASES)
def test_every_engine_writes_the_reference_tokens_on_every_document(files, corpus, name, engine):
    tokenizer = open_tokenizer(files[name])
    assert engine in tokenizer.engine_order()
    tokenizer.use_engine(tokenizer.make_engine(engine))
    tokens, offsets = tokenizer.encode(corpus, 2)
    expected = reference_ids(files[name], corpus)
    differing = [i for i in range(len(corpus)) if tokens[offsets[i] : offsets[i + 1]].tolist() != expected[i]]
    assert differing == [], f"{len(differing)} documents differ, first {corpus[differing[0]][:80]!r}"
    assert max(map(len, corpus)) > LONG_TEXT_CHARS  # _pydecimal.py: encoded in pieces


@pytest.mark.heavy
def test_long_texts_are_cut_where_the_files_own_pattern_starts_a_piece(files):
    """Issue 25's example: Llama 3's pattern joins a punctuation run with the line breaks after it, so
    `'))` + `\\n` at a cut before the line break gave other tokens than the library's `'))\\n`."""
    line = "        self.assertEqual(str(Decimal('10E+5')),\n        Decimal"
    text = (line * (LONG_TEXT_CHARS // len(line) + 1))[: LONG_TEXT_CHARS + 5_000] + "('10E+5'))\n  x"
    for name in ("llama3.json", "llama3.tiktoken", "gpt2.json"):
        tokenizer = open_tokenizer(files[name])
        pieces = list(tokenizer.exact_pieces(text, 20_000))
        assert len(pieces) > 10 and "".join(pieces) == text
        tokens, offsets = tokenizer.encode([text, "short"])
        assert tokens[: offsets[1]].tolist() == reference_ids(files[name], [text])[0]


def test_a_file_that_joins_across_pieces_is_encoded_whole(tmp_path, files):
    """NFC joins a letter with a combining mark after it: such a file is never cut."""
    document = json.loads(files["gpt2.json"].read_text())
    document["normalizer"] = {"type": "NFC"}
    (tmp_path / "tokenizer.json").write_text(json.dumps(document))
    tokenizer = open_tokenizer(tmp_path / "tokenizer.json")
    text = "e\u0301 " * (LONG_TEXT_CHARS // 2)
    assert tokenizer.cut_pattern is None and list(tokenizer.exact_pieces(text, 1000)) == [text]
    tokens, offsets = tokenizer.encode([text])
    assert tokens.tolist() == reference_ids(tmp_path / "tokenizer.json", [text])[0]


def test_auto_takes_the_fastest_engine_that_passes_the_probe(files, corpus):
    ranks = open_tokenizer(files["llama3.tiktoken"])
    choice = choose_engine(ranks, "auto", corpus[:20])
    assert choice.engine.name == "quicktok" and choice.probe.startswith("identical to tiktoken")
    json_file = open_tokenizer(files["llama3.json"])
    # quicktok is refused for Llama 3's tokenizer.json (two merges make one token in an order that rank
    # BPE does not follow); gigatoken takes it, probed against the stable library beside it.
    with pytest.raises(Unsupported, match="order rank BPE does not follow"):
        json_file.make_engine("quicktok")
    choice = choose_engine(json_file, "auto", corpus[:20])
    assert choice.engine.name == "gigatoken" and choice.probe.startswith("identical to tokenizers 0.")


def test_gigatoken_keeps_text_that_spells_a_special_token_as_text(files):
    """gigatoken matches special-token texts as the tokens on every call; objcli keeps them as text
    (the engine is built without them), as the reference library does with encode_special_tokens."""
    tokenizer = open_tokenizer(files["llama3.json"])
    tokenizer.use_engine(tokenizer.make_engine("gigatoken"))
    texts = ["a<|begin_of_text|>b", "x <|end_of_text|> y<|eot_id|>", "<|reserved_special_token_7|>"]
    tokens, offsets = tokenizer.encode(texts)
    got = [tokens[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))]
    assert got == reference_ids(files["llama3.json"], texts) and max(tokens) < 128_000


def test_a_difference_falls_back_to_the_reference_with_a_warning(files, monkeypatch, tmp_path):
    """The probe compares every text; one token off in one text is a fallback naming that text."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no verdict kept by another test
    original = QuicktokEngine.encode_batch

    def off_by_one(self, texts, threads):
        tokens, offsets = original(self, texts, threads)
        tokens = tokens.copy()
        for i, text in enumerate(texts):
            if "Ærøskøbing" in text and offsets[i + 1] > offsets[i]:
                tokens[offsets[i]] += 1
        return tokens, offsets

    monkeypatch.setattr(QuicktokEngine, "encode_batch", off_by_one)
    warnings = []
    for requested in ("auto", "quicktok"):
        tokenizer = open_tokenizer(files["llama3.tiktoken"])
        choice = choose_engine(tokenizer, requested, [], warnings.append)
        assert choice.engine.name == "tiktoken"
        assert re.search(
            r"engine quicktok 0\.4\.0 encodes .+ \(\d[\d,]* characters, sha256 [0-9a-f]{12}\) "
            r"differently from tiktoken",
            warnings[-1],
        )
    assert len(warnings) == 2


def _probes(monkeypatch, tokenizer_type) -> list[str]:
    """Counts the independent references built for a probe (what a kept verdict saves)."""
    built = []
    original = tokenizer_type.probe_reference

    def counted(self, engine):
        built.append(engine.name)
        return original(self, engine)

    monkeypatch.setattr(tokenizer_type, "probe_reference", counted)
    return built


def test_a_passing_probe_is_kept_per_tokenizer_engine_and_version(files, corpus, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    tokenizer = open_tokenizer(files["llama3.tiktoken"])
    built = _probes(monkeypatch, type(tokenizer))
    first = choose_engine(tokenizer, "auto", corpus[:20])
    assert first.engine.name == "quicktok" and built == ["quicktok"]
    again = choose_engine(open_tokenizer(files["llama3.tiktoken"]), "auto", corpus[20:40])
    assert (again.engine.name, again.probe) == ("quicktok", first.probe) and built == ["quicktok"]  # not probed
    # The same words whether probed on another sample or kept: the manifest does not depend on the cache.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "elsewhere"))
    assert choose_engine(open_tokenizer(files["llama3.tiktoken"]), "auto", corpus[40:45]).probe == first.probe
    assert built == ["quicktok"] * 2
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    # Another objcli version, a changed file, a damaged entry: the probe runs again.
    monkeypatch.setattr("objcli.__version__", "0.0.0-other")
    choose_engine(open_tokenizer(files["llama3.tiktoken"]), "auto", [])
    assert built == ["quicktok"] * 3
    for entry in (tmp_path / "objcli" / "probe-verdicts").iterdir():
        entry.write_text("{not json")
    choose_engine(open_tokenizer(files["llama3.tiktoken"]), "auto", [])
    assert built == ["quicktok"] * 4


def test_a_failed_probe_is_never_kept(files, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    original = QuicktokEngine.encode_batch

    def off_by_one(self, texts, threads):
        tokens, offsets = original(self, texts, threads)
        return tokens + 1, offsets

    monkeypatch.setattr(QuicktokEngine, "encode_batch", off_by_one)
    assert choose_engine(open_tokenizer(files["llama3.tiktoken"]), "auto", [], lambda _: None).engine.name == "tiktoken"
    assert not (tmp_path / "objcli" / "probe-verdicts").exists()


@pytest.mark.parametrize(
    ("name", "engine", "message"),
    [
        ("gpt2.json", "quicktok", "no scanner for this split pattern"),
        ("gpt2.json", "sentencepiece", "encoded by tokenizers, quicktok, gigatoken or python"),
        ("llama3.tiktoken", "tokenizers", "encoded by tiktoken, quicktok or python"),
    ],
)
def test_an_engine_that_cannot_take_the_file_is_a_one_line_error(files, name, engine, message):
    with pytest.raises(ObjcliError, match=f"--engine {engine}: .*{message}"):
        choose_engine(open_tokenizer(files[name]), engine, [])


def test_the_manifest_records_the_engine_and_the_recipe_replays_it(files, small_corpus, tmp_path):
    inputs = [small_corpus / "prose.jsonl"]
    run_transform(inputs, files["llama3.tiktoken"], tmp_path / "a", seq_len=256, workers=2)
    manifest, rows = read_output(tmp_path / "a")
    assert manifest["tokenizer"]["engine"]["name"] == "quicktok" and manifest["recipe"]["engine"] == "quicktok"
    assert "engine" not in manifest["config"]  # not part of the fingerprint: every engine writes these bytes
    run_transform(inputs, files["llama3.tiktoken"], tmp_path / "b", seq_len=256, workers=2, engine="reference")
    manifest_b, rows_b = read_output(tmp_path / "b")
    assert manifest_b["tokenizer"]["engine"]["name"] == "tiktoken" and rows_b == rows
    assert manifest_b["config_sha256"] == manifest["config_sha256"]
    replay = subprocess.run(
        [
            sys.executable,
            "-m",
            "objcli",
            "transform",
            "--recipe",
            str(tmp_path / "a" / "manifest.json"),
            "-o",
            str(tmp_path / "c"),
            "--quiet",
        ],
        capture_output=True,
        text=True,
    )
    assert replay.returncode == 0, replay.stderr
    assert json.loads((tmp_path / "c" / "manifest.json").read_text())["tokenizer"]["engine"]["name"] == "quicktok"


def test_the_probe_holds_every_script_and_the_models_special_texts():
    texts = probe_texts(["<|eot_id|>"], ["first batch " * 10, "x" * 10**6])
    whole = texts[0]
    for sample in (
        "中文",
        "日本語",
        "한국어",
        "हिन्दी",
        "العربية",
        "עברית",
        "Съешь",
        "👩‍👩‍👧‍👦",
        "a\u0301",
        "\u3000",
        "\u2028",
        "\r\n",
        "123456789012",
        "Donaudampfschifffahrts",
    ):
        assert sample in whole, sample
    assert any("<|eot_id|>" in t for t in texts) and "first batch " * 10 in texts
    assert sum(map(len, texts[-2:])) <= 256 * 1024 + 120  # the run's batch, capped


def spec(vocab: list[bytes], merges: list[tuple[bytes, bytes]]) -> BPESpec:
    return BPESpec(
        vocab={t: i for i, t in enumerate(vocab)},
        patterns=["x"],
        merges={m: r for r, m in enumerate(merges)},
        ignore_merges=True,
    )


BYTES = [bytes([b]) for b in range(256)]


def test_merges_are_ranks_only_when_rank_bpe_gives_their_tokens():
    a, b = b"a", b"b"
    check_merges_are_ranks(spec([*BYTES, a + b, a + b + a], [(a, b), (a + b, a)]))  # one way to make each token
    with pytest.raises(Unsupported, match="no merge joins"):  # "aba" is also a + "ba"... once "ba" is a token
        check_merges_are_ranks(spec([*BYTES, a + b, b + a, a + b + a], [(a, b), (b, a), (a + b, a)]))
    with pytest.raises(Unsupported, match="not in the order"):
        check_merges_are_ranks(spec([*BYTES, a + b, b + a], [(b, a), (a, b)]))
    with pytest.raises(Unsupported, match="order rank BPE does not follow"):  # [aa, a, aa]: leftmost vs lowest
        aa = a + a
        check_merges_are_ranks(spec([*BYTES, aa, aa + a], [(a, a), (a, aa), (aa, a)]))
    assert is_prerelease("1.0.0-rc.3") and is_prerelease("1.0.0rc3") and not is_prerelease("0.23.3")


def test_the_prerelease_the_docs_name_is_the_one_the_makefile_tests_and_no_extra_installs_it():
    """tokenizers 1.0 replaces the stable release transformers needs: no extra may bring it."""
    pin = re.search(r"PRERELEASE_TOKENIZERS := (\S+)", (ROOT / "Makefile").read_text()).group(1)
    assert f"pip install '{pin}'" in (ROOT / "objcli" / "docs" / "inputs.md").read_text()
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert not [r for rs in extras.values() for r in rs if r.startswith("tokenizers") and "rc" in r]


@pytest.mark.heavy
def test_the_prerelease_encodes_as_the_stable_release(files, corpus, tmp_path):
    """tokenizers 1.0's own batched encode equals 0.x's on every document, for both files."""
    (tmp_path / "corpus.json").write_text(json.dumps(corpus))
    code = """
import json, sys, numpy as np, tokenizers
assert tokenizers.__version__.startswith("1."), tokenizers.__version__
texts = json.load(open(sys.argv[1]))
for path in sys.argv[3:]:
    library = tokenizers.Tokenizer.from_file(path)
    ids = [e.ids_array for e in library.encode_batch(texts, add_special_tokens=False, encode_special_tokens=True)]
    np.save(f"{sys.argv[2]}/{len(sys.argv)}-{path.split('/')[-2]}.npy", np.array(ids, dtype=object), allow_pickle=True)
"""
    names = ["llama3.json", "gpt2.json"]
    run = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "corpus.json"), str(tmp_path), *(str(files[n]) for n in names)],
        env=prerelease_env(),
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    for name in names:
        got = np.load(tmp_path / f"{len(names) + 3}-{files[name].parent.name}.npy", allow_pickle=True)
        expected = reference_ids(files[name], corpus)
        assert [g.tolist() for g in got] == expected


@pytest.mark.parametrize("name", ["llama3.json", "gpt2.json"])
def test_objcli_on_the_prerelease_writes_the_stable_releases_bytes(files, small_corpus, tmp_path, name):
    inputs = [small_corpus / "prose.jsonl", small_corpus / "code.jsonl"]
    run_transform(inputs, files[name], tmp_path / "stable", seq_len=256, workers=2)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "objcli",
            "transform",
            *map(str, inputs),
            "-t",
            str(files[name]),
            "--seq-len",
            "256",
            "--workers",
            "2",
            "-o",
            str(tmp_path / "fast"),
            "--quiet",
        ],
        env=prerelease_env(),
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    manifest, rows = read_output(tmp_path / "fast")
    engine = manifest["tokenizer"]["engine"]
    assert engine["name"] == "tokenizers" and is_prerelease(engine["version"])
    assert engine["probe"].startswith("identical to python")
    stable_manifest, stable_rows = read_output(tmp_path / "stable")
    assert rows == stable_rows and manifest["config_sha256"] == stable_manifest["config_sha256"]
    for shard in manifest["shards"]:
        assert (tmp_path / "fast" / shard["files"][0]).read_bytes() == (
            tmp_path / "stable" / shard["files"][0]
        ).read_bytes()


@pytest.mark.heavy
def test_a_special_allocated_past_the_vocabulary_is_never_silent(files, small_corpus, tmp_path):
    """Issue 29: a tokenizer.json converted from Llama 3's rank file without its specials wrote every
    document with a new id 128000 (</s>, one past the vocabulary), said only in the manifest."""
    document = json.loads(files["llama3.json"].read_text())
    document["added_tokens"] = []
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "tokenizer.json").write_text(json.dumps(document))
    # One worker: the warnings are the main process's, and each pool worker would load the 128k vocabulary again.
    common = ["transform", small_corpus / "prose.jsonl", "--seq-len", "64", "-q", "--workers", "1"]
    run = run_cli(*common, "-t", tmp_path / "bare", "-o", tmp_path / "out")
    assert run.returncode == 0, run.stderr
    warning = [line for line in run.stderr.splitlines() if "warning" in line]
    assert len(warning) == 1 and "vocabulary (128,000 ids) has no eos '</s>' as id 128000" in warning[0]
    assert "(--eos-token)" in warning[0] and "'objcli export-tokenizer OUT -o DIR'" in warning[0]
    own = run_cli(*common, "-t", files["llama3.json"], "-o", tmp_path / "own")
    assert own.returncode == 0 and "warning" not in own.stderr  # the model's own <|end_of_text|>
    sentinels = run_cli(*common, "-t", files["llama3.json"], "--objective", "t5", "-o", tmp_path / "t5")
    assert "has no 100 T5 sentinels <extra_id_N> as ids 128256-128355" in sentinels.stderr


@settings(max_examples=300, deadline=None)
@given(data=st.data(), by_rank=st.booleans())
def test_the_python_engines_heap_merges_as_the_pair_by_pair_loop(data, by_rank):
    """The readable reference's merge keeps a heap (n log n); it must merge exactly as the loop that
    rescans every pair: lowest priority first, leftmost on a tie, for Hugging Face merges (pair ->
    order) and tiktoken ranks (join -> rank), on pieces where ties and overlapping pairs abound."""
    from reference import bpe_merge_reference

    from objcli.tokenizers.python_bpe import PythonBPE

    alphabet = [b"a", b"b", b"c"]
    joins = data.draw(
        st.lists(st.lists(st.sampled_from(alphabet), min_size=2, max_size=4).map(b"".join), max_size=12, unique=True)
    )
    vocab = {t: i for i, t in enumerate([*alphabet, *joins])}
    if by_rank:
        merges = None
    else:
        merges = {}
        for token in joins:  # each join's split points, in a drawn order
            for cut in range(1, len(token)):
                if token[:cut] in vocab and token[cut:] in vocab and data.draw(st.booleans()):
                    merges.setdefault((token[:cut], token[cut:]), len(merges))
    engine = PythonBPE(BPESpec(vocab=vocab, patterns=["x"], merges=merges, ignore_merges=False))
    piece = data.draw(st.lists(st.sampled_from(alphabet), min_size=0, max_size=40))
    whole = b"".join(piece)
    expected = [whole] if by_rank and whole in vocab else bpe_merge_reference(piece, engine._priority)  # tiktoken
    assert engine._merge(whole) == [vocab[p] for p in expected]


def test_the_python_engine_merges_a_long_word_in_a_number_of_steps_linear_in_its_length():
    """A 20,000-letter word (a DNA sequence, a base64 blob: one piece to the split pattern) in a run's
    first batch made the parity probe's pair-by-pair loop look up some 10^8 pairs: minutes of
    start-up. The heap looks up a few pairs per merge."""
    from objcli.tokenizers.python_bpe import PythonBPE

    vocab = {t: i for i, t in enumerate([b"a", b"c", b"g", b"t", b"ac", b"gt", b"acgt", b"acgtacgt"])}
    engine = PythonBPE(BPESpec(vocab=vocab, patterns=["x"], merges=None, ignore_merges=True))
    looked_up = []
    priority = engine._priority
    engine._priority = lambda left, right: looked_up.append(1) or priority(left, right)
    word = b"acgt" * 5000
    assert engine._merge(word) == [vocab[b"acgtacgt"]] * 2500
    assert len(looked_up) < 10 * len(word)


def test_gigatokens_file_is_kept_by_sha256_and_a_damaged_copy_is_made_again(monkeypatch, tmp_path):
    """The tokenizer.json without its special tokens (what gigatoken reads) is kept in the user's cache:
    a second engine reads it from there, and an entry edited since is made again, never read."""
    from objcli.tokenizers.gigatoken_engine import GigatokenEngine, without_special_tokens

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = SAMPLE / "llama-style" / "tokenizer.json"
    texts = ["a text that spells <|begin_of_text|> as text", "and another one"]
    first = GigatokenEngine(path).encode_batch(texts, 1)
    (entry,) = (tmp_path / "cache" / "objcli" / "gigatoken").iterdir()
    body = entry.read_bytes().split(b"\n", 1)[1]
    assert body == without_special_tokens(path.read_bytes()) and json.loads(body)["added_tokens"] == []
    entry.write_bytes(entry.read_bytes().replace(b'"added_tokens": []', b'"added_tokens": [7]'))
    again = GigatokenEngine(path).encode_batch(texts, 1)
    assert entry.read_bytes().split(b"\n", 1)[1] == body  # made again from the file
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
