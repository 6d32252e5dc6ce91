"""``--row-tokens seq-len+1``: rows one token longer for trainers that take inputs and labels from one
row (Megatron, nanoGPT, LitData, Nanoset), for every next-token objective × packer it accepts (from
the registry); every other objective, and formats of whole documents, refuse it in one line."""

import numpy as np
import pytest
from runs import read_output, run_transform

from objcli.commands.verify import verify_output
from objcli.errors import ObjcliError
from objcli.formats import whole_document_formats
from objcli.objectives import REGISTRY

NEXT_TOKEN = [n for n in REGISTRY.names() if REGISTRY.named(n).next_token_rows]
OTHERS = [n for n in REGISTRY.names() if not REGISTRY.named(n).next_token_rows]
SEQ_LEN = 64


def _rows(summary_out):
    manifest, table = read_output(summary_out)
    return manifest, [np.array(r) for r in table["input_ids"]]


@pytest.mark.parametrize(
    "objective, packer",
    [(n, p) for n in NEXT_TOKEN for p in REGISTRY.named(n).packers(REGISTRY.named(n).options_type())],
)
def test_rows_are_one_token_longer(objective, packer, small_corpus, sample_tokenizer, tmp_path):
    runs = {}
    for row_tokens in ("seq-len", "seq-len+1"):
        out = tmp_path / row_tokens
        run_transform(
            [small_corpus],
            sample_tokenizer,
            out,
            objective=objective,
            packing=packer,
            seq_len=SEQ_LEN,
            row_tokens=row_tokens,
        )
        assert verify_output(out).ok
        runs[row_tokens] = _rows(out)
    (_, short), (manifest, long) = runs["seq-len"], runs["seq-len+1"]
    lengths = {len(r) for r in long}
    if packer == "none":
        assert max(lengths) == SEQ_LEN + 1 and max(len(r) for r in short) == SEQ_LEN
    else:
        assert lengths == {SEQ_LEN + 1}
    segment_ids = next(c for c in manifest["columns"] if c["role"] == "segment_ids")
    assert segment_ids["max_value"] == SEQ_LEN + 1
    if packer == "concat" and objective != "fim":  # fim's row step rewrites the rows it is given
        stacked = np.stack(long)
        assert np.array_equal(stacked[1:, 0], stacked[:-1, -1])  # consecutive rows share one token
        # The same stream: the shared tokens aside, the rows hold the plain run's tokens in order.
        plain = np.concatenate(short)
        joined = np.concatenate([stacked[0], *(r[1:] for r in stacked[1:])])
        n = min(len(plain), len(joined))
        assert np.array_equal(plain[:n], joined[:n]) and abs(len(plain) - len(joined)) < SEQ_LEN + 1


@pytest.mark.parametrize("objective", OTHERS)
def test_objectives_with_their_own_labels_refuse_it(objective, small_corpus, sample_tokenizer, tmp_path):
    with pytest.raises(ObjcliError, match=r"^--row-tokens seq-len\+1: applies to next-token objectives"):
        run_transform([small_corpus], sample_tokenizer, tmp_path / "out", objective=objective, row_tokens="seq-len+1")


@pytest.mark.parametrize("fmt", whole_document_formats())
def test_formats_of_whole_documents_refuse_it(fmt, small_corpus, sample_tokenizer, tmp_path):
    with pytest.raises(ObjcliError, match=r"holds whole documents and the trainer cuts its own windows"):
        run_transform([small_corpus], sample_tokenizer, tmp_path / "out", output_format=fmt, row_tokens="seq-len+1")
