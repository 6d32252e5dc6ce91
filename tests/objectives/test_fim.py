"""Fill-in-the-middle: the assembly kernel against a reference, reconstruction of the original
text from real shards (PSM and both SPM orders, non-ASCII text), rates, and fim-rate 0 = clm."""

import json

import numpy as np
import pytest
import reference
import sentencepiece as spm
from hypothesis import given
from hypothesis import strategies as st
from runs import SAMPLE, read_output, run_transform

from objcli.kernels.fim import NONE, PSM, SPM, assemble, first_units
from objcli.kernels.ragged import gather_ranges, lengths_to_offsets

CODE_MODEL = str(SAMPLE / "code.model")
pieces_strategy = st.lists(
    st.tuples(
        st.lists(st.integers(0, 50), max_size=6),
        st.lists(st.integers(0, 50), max_size=6),
        st.lists(st.integers(0, 50), max_size=6),
        st.sampled_from([NONE, PSM, SPM]),
    ),
    max_size=12,
)


def test_gather_ranges_worked_example():
    assert gather_ranges(np.array([10, 11, 12, 13]), np.array([2, 0]), np.array([2, 1])).tolist() == [12, 13, 10]


@given(pieces_strategy, st.sampled_from(["starcoder", "naive"]), st.booleans())
def test_assemble_matches_reference(documents, order, every_document):
    """Units as the objective tokenizes them (plain texts, or every document's, then each
    transformed document's three pieces), laid out against the reference."""
    docs = [p + m + s for p, m, s, _ in documents]
    modes = np.array([mode for *_, mode in documents], dtype=np.int64)
    whole = [d for d, mode in zip(docs, modes) if every_document or mode == NONE]
    units = whole + [piece for p, m, s, mode in documents if mode != NONE for piece in (p, m, s)]
    unit_tokens = np.array([t for unit in units for t in unit], dtype=np.int32)
    unit_offsets = lengths_to_offsets(np.array([len(unit) for unit in units], dtype=np.int64))
    first = first_units(modes, every_document)
    tokens, offsets = assemble(unit_tokens, unit_offsets, modes, first, np.array([97, 98, 99]), order)
    got = [tokens[offsets[i] : offsets[i + 1]].tolist() for i in range(len(docs))]
    expected = [
        d if mode == NONE else reference.fim_document(p, m, s, mode, order, 97, 98, 99)
        for d, (p, m, s, mode) in zip(docs, documents)
    ]
    assert got == expected


def test_first_units_worked_example():
    modes = np.array([PSM, NONE, SPM, NONE])
    assert first_units(modes, every_document=False).tolist() == [2, 0, 5, 1]
    assert first_units(modes, every_document=True).tolist() == [4, 1, 7, 3]


def stream_documents(folder):
    """Concatenate every row and split at EOS: the documents as written (the last may be cut)."""
    manifest, table = read_output(folder)
    stream = [t for row in table["input_ids"] for t in row]
    documents, current = [], []
    for token in stream:
        if token == 2:
            documents.append(current)
            current = []
        else:
            current.append(token)
    return manifest, table, documents


def rebuild(tokens, ids, sp):
    """Original text of a FIM document: drop the sentinels, put the pieces back in order."""
    pre, suf, mid = ids
    if pre not in tokens:
        return sp.decode(tokens), "none"
    if tokens[0] == suf:  # naive SPM: <SUF> suffix <PRE> prefix <MID> middle
        suffix = tokens[1 : tokens.index(pre)]
        prefix = tokens[tokens.index(pre) + 1 : tokens.index(mid)]
        middle = tokens[tokens.index(mid) + 1 :]
        return sp.decode(prefix) + sp.decode(middle) + sp.decode(suffix), "spm"
    if tokens[1] == suf:  # StarCoder SPM: <PRE> <SUF> suffix <MID> prefix middle (prefix + middle contiguous)
        suffix = tokens[2 : tokens.index(mid)]
        return sp.decode(tokens[tokens.index(mid) + 1 :]) + sp.decode(suffix), "spm"
    prefix = tokens[1 : tokens.index(suf)]
    suffix = tokens[tokens.index(suf) + 1 : tokens.index(mid)]
    middle = tokens[tokens.index(mid) + 1 :]
    return sp.decode(prefix) + sp.decode(middle) + sp.decode(suffix), "psm"


@pytest.mark.parametrize("order", ["starcoder", "naive"])
def test_pieces_reorder_back_to_the_original_text(tmp_path, order):
    texts = [
        "def f(x):\n    return x + 1\n",
        "naïve café ☕ — 東京 🚀 e\u0301\u0301 done",
        "  indented\n\ttab\n",
        "print('hello')\n" * 5,
        "x",
    ] * 40
    corpus = tmp_path / "code.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    summary = run_transform(
        [corpus], CODE_MODEL, tmp_path / "out", objective="fim", seq_len=64, spm_order=order, seed=4
    )
    manifest, _, documents = stream_documents(tmp_path / "out")
    sentinels = manifest["special_tokens"]["ids"]
    ids = (sentinels["fim_prefix"], sentinels["fim_suffix"], sentinels["fim_middle"])
    sp = spm.SentencePieceProcessor(model_file=CODE_MODEL)
    seen = set()
    for tokens, text in zip(documents, texts):
        rebuilt, mode = rebuild(tokens, ids, sp)
        assert rebuilt == text
        for sentinel in ids:
            assert tokens.count(sentinel) == (0 if mode == "none" else 1)
        seen.add(mode)
    assert seen == {"none", "psm", "spm"}
    assert summary.totals["fim_units_not_round_trip"] == 0


def test_rates_within_three_sigma(small_corpus, tmp_path):
    summary = run_transform(
        [small_corpus / "prose.jsonl"],
        CODE_MODEL,
        tmp_path / "out",
        objective="fim",
        seq_len=512,
        fim_rate=0.3,
        fim_spm_rate=0.7,
    )
    t = summary.totals
    n = t["fim none"] + t["fim psm"] + t["fim spm"]
    transformed = t["fim psm"] + t["fim spm"]
    assert n == 120
    assert abs(transformed / n - 0.3) < 3 * np.sqrt(0.3 * 0.7 / n)
    assert abs(t["fim spm"] / transformed - 0.7) < 3 * np.sqrt(0.21 / transformed)


def test_fim_rate_zero_is_plain_clm(small_corpus, tmp_path):
    files = [small_corpus / "code.jsonl"]
    run_transform(files, CODE_MODEL, tmp_path / "clm", seq_len=256)
    run_transform(files, CODE_MODEL, tmp_path / "fim", objective="fim", seq_len=256, fim_rate=0.0)
    _, clm, _ = stream_documents(tmp_path / "clm")
    _, fim, _ = stream_documents(tmp_path / "fim")
    for column in ("input_ids", "segment_ids", "position_ids"):
        assert fim[column] == clm[column]
    assert {m for row in fim["fim_modes"] for m in row} == {0}


def test_fim_modes_per_segment(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"def f{i}(): return {i}\n"}) + "\n" for i in range(300)))
    run_transform([corpus], CODE_MODEL, tmp_path / "out", objective="fim", seq_len=128)
    manifest, table, _ = stream_documents(tmp_path / "out")
    pre = manifest["special_tokens"]["ids"]["fim_prefix"]
    suf = manifest["special_tokens"]["ids"]["fim_suffix"]
    for ids, segments, modes in zip(table["input_ids"], table["segment_ids"], table["fim_modes"]):
        assert len(modes) == max(segments)
        for segment, mode in enumerate(modes, 1):
            tokens = [t for t, s in zip(ids, segments) if s == segment]
            if segment > 1 and segment < max(segments):  # whole documents: the mode is visible
                assert (pre in tokens or suf in tokens) == (mode != 0)


def test_context_level_rows_keep_seq_len(small_corpus, tmp_path):
    summary = run_transform(
        [small_corpus / "code.jsonl"],
        CODE_MODEL,
        tmp_path / "out",
        objective="fim",
        seq_len=256,
        fim_level="context",
        fim_rate=0.9,
    )
    _, table, _ = stream_documents(tmp_path / "out")
    assert {len(r) for r in table["input_ids"]} == {256}
    assert summary.totals["fim psm"] + summary.totals["fim spm"] > 0
    # Segments cut at a row boundary can start mid-word and re-encode differently: those stay
    # plain CLM and are counted; whole documents round-trip with the code model.
    t = summary.totals
    assert t["fim_segments_not_round_trip"] <= 0.05 * (t["fim none"] + t["fim psm"] + t["fim spm"])


def test_file_level_split_token(tmp_path):
    corpus = tmp_path / "repo.jsonl"
    files = ["def a():\n    pass\n", "class B:\n    x = 1\n", "print(3)\n"]
    corpus.write_text(json.dumps({"text": "<file_sep>".join(files)}) + "\n")
    run_transform(
        [corpus], CODE_MODEL, tmp_path / "out", objective="fim", seq_len=8, fim_rate=1.0, fim_split_token="<file_sep>"
    )
    manifest, table, documents = stream_documents(tmp_path / "out")
    sep = manifest["special_tokens"]["ids"]["fim_split"]
    stream = [t for row in table["input_ids"] for t in row]
    ids = manifest["special_tokens"]["ids"]
    assert stream.count(sep) == 2  # fragments joined by the separator token
    assert stream.count(ids["fim_prefix"]) + stream.count(ids["fim_suffix"]) >= 3  # every fragment transformed


def test_fim_from_a_store_encodes_with_the_engine_a_text_run_chooses(tmp_path):
    """Issue 72, item 3: context-level FIM from a store re-encodes its pieces, and took the reference
    engine (2.7x slower than from text); it now chooses as a text run does, with the same bytes."""
    pytest.importorskip("gigatoken")
    from runs import run_cli, shard_files

    bpe = SAMPLE / "llama-style" / "tokenizer.json"
    assert run_cli("tokenize", SAMPLE / "prose.jsonl", "-t", bpe, "-o", tmp_path / "store").returncode == 0
    options = {"objective": "fim", "fim_level": "context", "seq_len": 256}
    text = run_transform([SAMPLE / "prose.jsonl"], bpe, tmp_path / "text", **options)
    derived = run_transform([tmp_path / "store"], bpe, tmp_path / "derived", **options)
    engine = derived.manifest["tokenizer"]["engine"]["name"]
    assert engine == text.manifest["tokenizer"]["engine"]["name"] != "tokenizers"
    assert shard_files(tmp_path / "derived") == shard_files(tmp_path / "text")
