"""tiktoken rank files: told apart by content, split pattern and specials from a side file or the
published encoding with that many ranks, tokens exactly tiktoken's own."""

import base64
import json

import pytest
from conftest import read_output, run_transform

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
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in sorted(ranks.items(), key=lambda x: x[1])))
    side = {"pattern": CL100K_PATTERN, "special_tokens": {"<|endoftext|>": 400}, "eos": "<|endoftext|>"}
    (folder / "tokenizer.model.json").write_text(json.dumps(side))
    encoding = tiktoken.Encoding("tiny", pat_str=CL100K_PATTERN, mergeable_ranks=ranks,
                                 special_tokens={"<|endoftext|>": 400})
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
    (tmp_path / "short.tiktoken").write_text("".join(f"{base64.b64encode(t).decode()} {r}\n"
                                                     for r, t in enumerate(ranks[:300])))
    with pytest.raises(ObjcliError, match="matches no published encoding; give its split pattern"):
        open_tokenizer(tmp_path / "short.tiktoken")


def test_a_broken_rank_file_is_one_line(tmp_path):
    path = tmp_path / "broken.tiktoken"
    path.write_text("IQ== 0\nnot a rank line\n")
    with pytest.raises(ObjcliError, match="line 2 is not 'base64-token rank'"):
        open_tokenizer(path)


def test_export_writes_every_special_into_the_side_file(rank_file, small_corpus, tmp_path):
    from click.testing import CliRunner

    from objcli.cli import main

    path, _, _ = rank_file
    out = tmp_path / "mlm"
    args = ["transform", str(small_corpus / "prose.jsonl"), "-t", str(path), "-o", str(out), "--objective", "mlm",
            "--seq-len", "64", "-q"]
    assert CliRunner().invoke(main, args).exit_code == 0
    assert CliRunner().invoke(main, ["export-tokenizer", str(out), "-o", str(tmp_path / "tok")]).exit_code == 0
    exported = open_tokenizer(tmp_path / "tok" / "tokenizer.model")
    added = json.loads((out / "manifest.json").read_text())["special_tokens"]["added"]
    assert added and all(exported.model_id(piece) == token_id for piece, token_id in added.items())
    assert exported.vocab_size == 401 + len(added)
