"""Special-token resolution and batched encoding with the real sample model."""

import json

import numpy as np
import pytest
import sentencepiece as spm

from objcli.errors import ObjcliError
from objcli.tokenizers import LONG_TEXT_CHARS, open_tokenizer


def test_model_roles_come_from_the_model(sample_tokenizer):
    tok = open_tokenizer(sample_tokenizer)
    assert (tok.resolve("bos"), tok.resolve("eos"), tok.resolve("pad")) == (1, 2, 3)
    assert tok.special.added == {}
    assert tok.total_vocab_size == tok.vocab_size == 8000


def test_missing_specials_are_allocated_after_the_vocabulary_in_request_order(sample_tokenizer):
    tok = open_tokenizer(sample_tokenizer)
    assert tok.resolve("mask", "[MASK]") == 8000
    assert tok.resolve("cls", "[CLS]") == 8001
    assert tok.resolve("mask", "[MASK]") == 8000  # resolving twice allocates once
    assert tok.special.added == {"[MASK]": 8000, "[CLS]": 8001}
    assert tok.total_vocab_size == 8002
    assert tok.piece(8001) == "[CLS]" and tok.is_special(8001)


def test_model_without_pad_gets_one_allocated(tmp_path, small_corpus):
    model = tmp_path / "nopad.model"
    text = (small_corpus / "reference.txt").read_text().splitlines()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text), model_prefix=str(tmp_path / "nopad"), vocab_size=500, pad_id=-1, minloglevel=2
    )
    tok = open_tokenizer(model)
    assert tok.resolve("pad") == 500 and tok.special.added == {"<pad>": 500}


def test_text_that_spells_a_special_token_stays_text(sample_tokenizer):
    tok = open_tokenizer(sample_tokenizer)
    tokens, offsets = tok.encode(["an </s> and <s> and <pad> in the text"])
    assert not np.isin(tokens, [1, 2, 3]).any()
    assert tok.decode(tokens) == "an </s> and <s> and <pad> in the text"


def test_batched_encode_equals_one_call_per_document(sample_tokenizer, small_corpus):
    texts = [line for line in (small_corpus / "reference.txt").read_text().split("\n\n") if line.strip()][:200]
    tok = open_tokenizer(sample_tokenizer)
    sp = spm.SentencePieceProcessor(model_file=sample_tokenizer)
    for threads in (1, 2):
        tokens, offsets = tok.encode(texts, num_threads=threads)
        assert tokens.dtype == np.int32 and offsets.dtype == np.int64
        assert [tokens[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))] == [
            sp.encode(t) for t in texts
        ]


def test_joined_buffers_equal_the_public_encode(sample_tokenizer, small_corpus):
    """The private buffer encode (joined once) is taken on SentencePiece 0.2 and gives the public
    call's tokens; without it the public call is used."""
    texts = ["", "x", *(small_corpus / "reference.txt").read_text().split("\n")[:300]]
    tok = open_tokenizer(sample_tokenizer)
    assert (tok.engine._buffers is not None) == spm.__version__.startswith("0.2.")
    sp = spm.SentencePieceProcessor(model_file=sample_tokenizer)
    expected = [sp.encode(t) for t in texts]
    for buffers in (tok.engine._buffers, None):
        tok.engine._buffers = buffers
        tokens, offsets = tok.encode(texts)
        assert [tokens[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))] == expected


def test_decode_shows_specials_by_name(sample_tokenizer):
    tok = open_tokenizer(sample_tokenizer)
    ids = tok.encode(["Hello"])[0].tolist() + [2, 3]
    assert tok.decode(np.array(ids)) == "Hello</s><pad>"


def test_not_a_model(tmp_path):
    (tmp_path / "x.model").write_text("nope")
    with pytest.raises(ObjcliError, match="neither a SentencePiece model nor a tokenizer.json"):
        open_tokenizer(tmp_path / "x.model")


def _assert_same_or_tied(tokenizer, got: list[int], whole: list[int]) -> None:
    """``got`` is ``whole``, except where the two segment the same stretch of text differently and
    ours scores at least as well. SentencePiece's Viterbi sums float32 scores from the start of
    its input; a few hundred thousand characters in, their rounding (about 0.01) decides between
    ties and near-ties, so the whole-text encoding, not the pieces, is the one that drifts."""
    processor = tokenizer.processor
    piece_length = np.array([len(p) for p in tokenizer.pieces()])

    def boundaries(ids):
        return np.concatenate([[0], np.cumsum(piece_length[ids])])

    ours, theirs = boundaries(got), boundaries(whole)
    assert ours[-1] == theirs[-1]
    shared = np.intersect1d(ours, theirs)
    a_at, b_at = np.searchsorted(ours, shared), np.searchsorted(theirs, shared)
    got, whole = np.asarray(got), np.asarray(whole)
    # Between two shared boundaries, one token each and the same one: identical there.
    same = (np.diff(a_at) == 1) & (np.diff(b_at) == 1)
    same[same] = got[a_at[:-1][same]] == whole[b_at[:-1][same]]
    differences = 0
    for span in np.flatnonzero(~same):
        a = got[a_at[span] : a_at[span + 1]].tolist()
        b = whole[b_at[span] : b_at[span + 1]].tolist()
        differences += 1
        assert "".join(map(processor.id_to_piece, a)) == "".join(map(processor.id_to_piece, b))
        ours_score, whole_score = sum(map(processor.get_score, a)), sum(map(processor.get_score, b))
        assert whole_score - 1e-4 <= ours_score <= whole_score + 0.05
    assert differences <= len(whole) // 1000


@pytest.mark.parametrize("model", ["tokenizer.model", "code.model"])
def test_long_texts_are_encoded_in_pieces_with_the_same_tokens(sample_dir, model):
    """Text (dummy prefix, whitespace collapsed) and code (text kept exactly) presets alike."""
    tokenizer = open_tokenizer(sample_dir / model)
    prose = (sample_dir / "reference.txt").read_text(encoding="utf-8")
    code = "\n".join(json.loads(line)["text"] for line in (sample_dir / "code.jsonl").open(encoding="utf-8"))
    for text in (prose, code):
        # Small pieces, so the test makes thousands of cuts and meets every kind of place.
        pieces = tokenizer.split_text(text, 2_000)
        assert len(pieces) > 100 and "".join(pieces) == text
        tokens, _ = tokenizer._encode_texts(pieces, 1)
        _assert_same_or_tied(tokenizer, tokens.tolist(), tokenizer.processor.encode(text))
    long_text = prose * (LONG_TEXT_CHARS // len(prose) + 2)
    tokens, offsets = tokenizer.encode(["short one", long_text, "another"])
    _assert_same_or_tied(tokenizer, tokens[offsets[1] : offsets[2]].tolist(), tokenizer.processor.encode(long_text))
    assert np.diff(offsets)[[0, 2]].tolist() == [len(tokenizer.processor.encode(t)) for t in ("short one", "another")]


def test_decode_ranges_equals_decoding_each_item(sample_tokenizer):
    """Items of a ragged batch, a slice of it included (offsets not starting at 0), decode as each
    item alone does."""
    check_decode_ranges(open_tokenizer(sample_tokenizer))


def check_decode_ranges(tok):
    texts = ["def f(x):\n    return x", "", "naïve café", "  two  spaces"]
    tokens, offsets = tok.encode(texts)
    expected = [tok.decode_batch([tokens[a:b].tolist()])[0] for a, b in zip(offsets[:-1], offsets[1:])]
    assert tok.decode_ranges(tokens, offsets) == expected
    assert tok.decode_ranges(tokens, offsets[1:]) == expected[1:]
    assert tok.decode_ranges(tokens, offsets[:1]) == []
