"""tiktoken rank files: told apart by content, split pattern and specials from a side file or the
published encoding with that many ranks, tokens exactly tiktoken's own."""

import base64
import json

import pytest
from runs import cli, read_output, run_transform

from objcli.errors import ObjcliError
from objcli.tokenizers import open_tokenizer

tiktoken = pytest.importorskip("tiktoken")


@pytest.fixture(scope="module")
def rank_file(small_corpus, tmp_path_factory):
    """A 400-token BPE trained here with tiktoken's own trainer on the sample prose, saved as Llama 3
    names its rank file (tokenizer.model), with a side file for the pattern and the specials."""
    from tiktoken._educational import bpe_train

    from objcli.tokenizers.tiktoken_bpe import CL100K_PATTERN

    texts = [json.loads(line)["text"] for line in (small_corpus / "prose.jsonl").read_text().splitlines()]
    ranks = bpe_train("".join(texts)[:20_000], 400, CL100K_PATTERN, visualise=None)
    folder = tmp_path_factory.mktemp("tiktoken")
    path = folder / "tokenizer.model"
    path.write_text(
        "".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in sorted(ranks.items(), key=lambda x: x[1]))
    )
    side = {"pattern": CL100K_PATTERN, "special_tokens": {"<|endoftext|>": 400}, "eos": "<|endoftext|>"}
    (folder / "tokenizer.model.json").write_text(json.dumps(side))
    encoding = tiktoken.Encoding(
        "tiny", pat_str=CL100K_PATTERN, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 400}
    )
    return path, encoding, texts


def test_rows_hold_tiktokens_own_tokens(rank_file, small_corpus, tmp_path):
    path, encoding, texts = rank_file
    tokenizer = open_tokenizer(path)
    assert tokenizer.kind == "tiktoken" and tokenizer.vocab_size == 401
    run_transform([small_corpus / "prose.jsonl"], str(path), tmp_path / "out", packing="none", seq_len=1 << 20)
    manifest, table = read_output(tmp_path / "out")
    assert manifest["special_tokens"]["ids"]["eos"] == 400
    expected = [[*encoding.encode_ordinary(t), 400] for t in texts]
    assert table["input_ids"] == expected
    spelled = tokenizer.encode(["a <|endoftext|> in the text"])[0].tolist()
    assert 400 not in spelled  # text that spells a special stays text


def test_a_published_encoding_is_recognised_by_its_rank_count(tmp_path):
    """cl100k_base's 100,256 ranks get its pattern and specials (<|endoftext|> 100257) with no side file."""
    ranks = [bytes([i]) for i in range(256)] + [f"t{i:06d}".encode() for i in range(100_256 - 256)]
    path = tmp_path / "cl100k_base.tiktoken"
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for r, t in enumerate(ranks)))
    tokenizer = open_tokenizer(path)
    assert tokenizer.vocab_size == 100_277 and tokenizer.resolve("eos") == 100_257
    assert tokenizer.ordinary_ids().max() == 100_255  # the gap and the specials never replace a token
    (tmp_path / "short.tiktoken").write_text(
        "".join(f"{base64.b64encode(t).decode()} {r}\n" for r, t in enumerate(ranks[:300]))
    )
    with pytest.raises(ObjcliError, match="matches no published encoding; give its split pattern"):
        open_tokenizer(tmp_path / "short.tiktoken")


def test_a_broken_rank_file_is_one_line(tmp_path):
    path = tmp_path / "broken.tiktoken"
    path.write_text("IQ== 0\nnot a rank line\n")
    with pytest.raises(ObjcliError, match="line 2 is not 'base64-token rank'"):
        open_tokenizer(path)


def test_export_writes_every_special_into_the_side_file(rank_file, small_corpus, tmp_path):

    path, _, _ = rank_file
    out = tmp_path / "mlm"
    args = [
        "transform",
        str(small_corpus / "prose.jsonl"),
        "-t",
        str(path),
        "-o",
        str(out),
        "--objective",
        "mlm",
        "--seq-len",
        "64",
        "-q",
    ]
    assert cli(args).exit_code == 0
    assert cli(["export-tokenizer", str(out), "-o", str(tmp_path / "tok")]).exit_code == 0
    exported = open_tokenizer(tmp_path / "tok" / "tokenizer.model")
    added = json.loads((out / "manifest.json").read_text())["special_tokens"]["added"]
    assert added and all(exported.model_id(piece) == token_id for piece, token_id in added.items())
    assert exported.vocab_size == 401 + len(added)


def _rank_lines(ranks) -> str:
    return "".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks)


BYTE_RANKS = [(bytes([b]), b) for b in range(256)]
GOOD_SIDE = {"pattern": r"\S+|\s+", "special_tokens": {"<|eos|>": 300}, "bos": None, "eos": "<|eos|>"}


@pytest.mark.parametrize(
    ("side", "message"),
    [
        # every field with each wrong type or value (issue 30: a Rust panic, tracebacks, or accepted silently)
        *[({**GOOD_SIDE, "pattern": p}, "'pattern' must be a non-empty string") for p in ("", None, 5, ["x"], True)],
        *[({**GOOD_SIDE, "pattern": p}, "not a valid regular expression") for p in ("(", "[a-", "x{2,1}")],
        *[({**GOOD_SIDE, "special_tokens": v}, "'special_tokens' must be an object") for v in ([], "x", 5, True)],
        *[
            ({**GOOD_SIDE, "special_tokens": {"<|eos|>": v}}, "give a non-empty text an integer id")
            for v in (-1, 2**31, 2**64, "300", 3.5, True, None)
        ],
        ({**GOOD_SIDE, "special_tokens": {"": 300}, "eos": None}, "give a non-empty text an integer id"),
        ({**GOOD_SIDE, "special_tokens": {"<|eos|>": 5}}, "which the rank file gives a token"),
        ({**GOOD_SIDE, "special_tokens": {"<|eos|>": 300, "<|x|>": 300}}, "two specials share an id"),
        *[({**GOOD_SIDE, "eos": v}, "'eos' is .* not one of its special_tokens") for v in ("<|other|>", 300, [])],
        ({**GOOD_SIDE, "bos": "<s>"}, "'bos' is '<s>', which is not one of its special_tokens"),
        ([GOOD_SIDE], "holds list, not an object"),
    ],
)
def test_a_bad_side_file_is_one_line(tmp_path, side, message):
    path = tmp_path / "tok.tiktoken"
    path.write_text(_rank_lines(BYTE_RANKS))
    path.with_name(path.name + ".json").write_text(json.dumps(side))
    with pytest.raises(ObjcliError, match=message):
        open_tokenizer(path)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (_rank_lines(BYTE_RANKS) + "YWI= 256\nYWI= 257\n", "line 258 repeats token b'ab' 256"),
        (_rank_lines(BYTE_RANKS) + "YWI= 256\nYWJj 256\n", "line 258 repeats rank 256"),
        (_rank_lines(BYTE_RANKS[1:]), r"no rank for the byte b'\\x00' \(1 of 256"),
        (_rank_lines(BYTE_RANKS) + "YWI= -1\n", "has rank -1"),
        (_rank_lines(BYTE_RANKS) + f"YWI= {2**31}\n", "ranks are 0 to 2,147,483,647"),
        (_rank_lines(BYTE_RANKS) + "YW", "line 257 is not 'base64-token rank'"),  # cut mid-line
        (_rank_lines(BYTE_RANKS) + "YW 300\n", "line 257 is not 'base64-token rank'"),  # truncated base64
    ],
)
def test_a_bad_rank_file_is_one_line(tmp_path, lines, message):
    path = tmp_path / "tok.tiktoken"
    path.write_text(lines)
    path.with_name(path.name + ".json").write_text(json.dumps(GOOD_SIDE))
    with pytest.raises(ObjcliError, match=message):
        open_tokenizer(path)


def test_a_pattern_only_python_accepts_is_one_line(tmp_path):
    """Recursion compiles in Python's regex module but not in tiktoken's engine."""
    path = tmp_path / "tok.tiktoken"
    path.write_text(_rank_lines(BYTE_RANKS))
    path.with_name(path.name + ".json").write_text(json.dumps({**GOOD_SIDE, "pattern": "a(?R)?b"}))
    with pytest.raises(ObjcliError, match="tiktoken refuses it: Parsing error at position 5.*fix the pattern"):
        open_tokenizer(path)


def test_a_good_side_file_is_read(tmp_path):
    path = tmp_path / "tok.tiktoken"
    path.write_text(_rank_lines(BYTE_RANKS))
    path.with_name(path.name + ".json").write_text(json.dumps(GOOD_SIDE))
    tokenizer = open_tokenizer(path)
    assert tokenizer.resolve("eos") == 300 and tokenizer.encode(["ab <|eos|>"])[0].tolist() == list(b"ab <|eos|>")


def test_chat_spans_from_token_bytes_are_the_characters_each_token_touches(rank_file):
    """The chat fast path (the run's engine, character spans counted from each token's bytes)
    against tiktoken's own tokens and a loop over their bytes: a token spans every character it
    holds a byte of, as the tokenizers library reports (tiktoken's decode_with_offsets gives a
    character's first byte an empty span). Most non-ASCII bytes are tokens of their own in this
    400-token file, so characters are cut in two; specials and empty texts too."""
    path, encoding, texts = rank_file
    tokenizer = open_tokenizer(path)
    batch = [*texts[:40], "naïve café — 日本語 😀<|endoftext|>ß", "<|endoftext|>", "", "é", "😀😀 x"]
    tokens, offsets, starts, ends = tokenizer.encode_chat(batch, lambda parts: tokenizer.encode(parts))
    joined = 0  # spans are positions in the batch's texts joined end to end
    for k, text in enumerate(batch):
        ids = encoding.encode(text, allowed_special="all")
        char_of_byte = [i for i, c in enumerate(text) for _ in c.encode("utf-8")]
        spans, position = [], 0
        for token in ids:
            size = len(encoding.decode_single_token_bytes(token))
            spans.append((joined + char_of_byte[position], joined + char_of_byte[position + size - 1] + 1))
            position += size
        row = slice(offsets[k], offsets[k + 1])
        assert tokens[row].tolist() == ids and list(zip(starts[row].tolist(), ends[row].tolist())) == spans
        joined += len(text)
