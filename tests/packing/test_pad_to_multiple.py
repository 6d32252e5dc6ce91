"""``--pad-to-multiple N`` (issue 84, item 3): each packed sequence padded to a multiple of N for context
parallelism (Transformer Engine's THD layout), as Megatron-Bridge's ``pad_seq_to_mult`` pads it, with the
sequences' real and padded bounds; the padding never learned."""

from __future__ import annotations

import numpy as np
import pytest
import reference
from chat_data import build_tokenizer, conversations, write_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st
from runs import SAMPLE, read_output, run_transform

from objcli.commands.verify import verify_output
from objcli.commands.verify_padding import check_sequence_padding
from objcli.errors import ObjcliError
from objcli.formats import Column
from objcli.kernels import IGNORE
from objcli.packing import PackSettings
from objcli.packing.base import SequencePadding
from objcli.packing.best_fit import BestFitPacker
from objcli.rows import ColumnSpec, Ragged, RowBatch
from objcli.tokenizers import open_tokenizer

COLUMNS = (
    ColumnSpec("input_ids", "ragged", 0, 999, "ids"),
    ColumnSpec("labels", "ragged", IGNORE, 999, "labels", role="labels"),
)


@given(
    st.lists(st.integers(1, 40), min_size=1, max_size=30),
    st.sampled_from([2, 4, 8]),
    st.sampled_from([0, 1]),
    st.integers(0, 2**16),
)
@settings(max_examples=60, deadline=None)
def test_the_packer_places_padded_sequences_as_the_reference_loop(lengths, multiple, shift, seed):
    rng = np.random.default_rng(seed)
    capacity = 48 + shift
    limit = (capacity - shift) // multiple * multiple
    lengths = [min(n, limit) for n in lengths]
    examples = [[(int(t), int(t) if rng.random() < 0.5 else IGNORE) for t in rng.integers(1, 999, n)] for n in lengths]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    batch = RowBatch(
        {
            "input_ids": Ragged(np.array([t for e in examples for t, _ in e], np.int32), offsets),
            "labels": Ragged(np.array([lab for e in examples for _, lab in e], np.int32), offsets),
        },
        tokens=np.array(lengths),
        padding=np.zeros(len(lengths), np.int64),
        documents=np.ones(len(lengths), np.int64),
    )
    padding = SequencePadding(multiple, shift, 7, limit)
    packer = BestFitPacker(PackSettings(capacity, COLUMNS, pad_id=0, sequence_padding=padding))
    rows = packer.finish() if packer.process(batch) is None else None
    expected = reference.padded_best_fit_rows(examples, capacity, multiple, shift, 7, 0)
    got = rows.columns
    bounds = {n: np.split(got[n].values, got[n].offsets[1:-1]) for n in ("cu_seqlens", "cu_seqlens_padded")}
    for k, (tokens, labels, segments, positions, real, padded) in enumerate(expected):
        assert got["input_ids"][k].tolist() == tokens and got["labels"][k].tolist() == labels
        assert got["segment_ids"][k].tolist() == segments and got["position_ids"][k].tolist() == positions
        assert bounds["cu_seqlens"][k].tolist() == real and bounds["cu_seqlens_padded"][k].tolist() == padded
    assert len(got["input_ids"]) == len(expected)
    assert rows.tokens.sum() == sum(lengths) and (rows.tokens + rows.padding == capacity).all()


@pytest.fixture(scope="module")
def chat(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pad-chat")
    tokenizer = build_tokenizer("chatml-generation", folder / "model")
    write_jsonl(
        [{"messages": r["messages"]} for r in conversations(80, "chatml-generation", seed=5)], folder / "c.jsonl"
    )
    run_transform([folder / "c.jsonl"], tokenizer, folder / "rows", objective="chat", seq_len=512, packing="none")
    _, rows = read_output(folder / "rows")
    return folder, tokenizer, rows


@pytest.mark.parametrize("multiple", [8, pytest.param(64, marks=pytest.mark.heavy)])
def test_arrow_rows_hold_each_conversation_padded_to_the_multiple(chat, tmp_path, multiple):
    folder, tokenizer, unpacked = chat
    run = run_transform([folder / "c.jsonl"], tokenizer, tmp_path / "out", objective="chat", seq_len=512,
                        pad_to_multiple=multiple)  # fmt: skip
    _, rows = read_output(tmp_path / "out")
    pad = run.manifest["special_tokens"]["ids"]["pad"]
    found = []
    for ids, labels, segments, positions, real, padded in zip(
        *(rows[n] for n in ("input_ids", "labels", "segment_ids", "position_ids", "cu_seqlens", "cu_seqlens_padded"))
    ):
        ids, labels, segments, positions = map(np.asarray, (ids, labels, segments, positions))
        for s, (a, b) in enumerate(zip(padded[:-1], padded[1:]), start=1):
            n = real[s] - real[s - 1]
            if s > segments.max():  # the row's trailing padding: no tokens, segment 0
                assert n == 0 and (segments[a:b] == 0).all()
                continue
            assert (
                (b - a) % multiple == 0 and (segments[a:b] == s).all() and positions[a:b].tolist() == list(range(b - a))
            )
            assert (ids[a + n : b] == pad).all() and (labels[a + n : b] == IGNORE).all()
            found.append((tuple(ids[a : a + n]), tuple(labels[a : a + n])))
    expected = sorted((tuple(i), tuple(lab)) for i, lab in zip(unpacked["input_ids"], unpacked["labels"]))
    assert sorted(found) == expected and len(found) == 80
    assert verify_output(tmp_path / "out").ok


def test_verify_finds_padding_that_is_learned_or_bounds_that_lie(chat, tmp_path):
    folder, tokenizer, _ = chat
    run_transform([folder / "c.jsonl"], tokenizer, tmp_path / "out", objective="chat", seq_len=512, pad_to_multiple=8)
    _, rows = read_output(tmp_path / "out")

    def column(name, values=None):
        data = [np.asarray(r) for r in rows[name]]
        flat = np.concatenate(data) if values is None else values
        return Column(flat, np.concatenate([[0], np.cumsum([len(r) for r in data])]))

    segments, real, padded, labels = (column(n) for n in ("segment_ids", "cu_seqlens", "cu_seqlens_padded", "labels"))
    assert check_sequence_padding(8, segments, real, padded, labels) == []
    learned = labels.values.copy()
    first_pad = int(np.flatnonzero(np.asarray(rows["input_ids"][0]) == np.asarray(rows["input_ids"][0])[-1])[0])
    end = rows["cu_seqlens"][0][1]
    learned[end] = 5  # the first sequence's first padding token, learned
    if end < rows["cu_seqlens_padded"][0][1]:
        assert (
            "-100 on a sequence's padding"
            in check_sequence_padding(8, segments, real, padded, column("labels", learned))[0]
        )
    assert first_pad >= 0
    moved = padded.values.copy()
    moved[1] += 1
    assert (
        "where each segment starts" in check_sequence_padding(8, segments, real, Column(moved, padded.offsets), None)[0]
    )
    assert "multiple of 4" not in " ".join(check_sequence_padding(4, segments, real, padded, labels))  # 8s are 4s
    assert "multiple of 16" in " ".join(check_sequence_padding(16, segments, real, padded, labels))


def test_the_released_bridge_reads_padded_npy_as_its_own_pad_seq_to_mult(chat, tmp_path):
    """Megatron-Bridge 0.3.1's own preparation (``pre_pad_dataset``, from the wheel) pads each conversation to
    ceil(n / 8) * 8 + 1 tokens of EOS: objcli's sequences are those, and its own collate (pad_seq_to_mult=8)
    gives every sequence a multiple of 8 inputs, real lengths in cu_seqlens_unpadded, and no loss on padding."""
    pytest.importorskip("torch")
    from released_readers import bridge_pre_pad, released_dataset

    folder, tokenizer, unpacked = chat
    run = run_transform([folder / "c.jsonl"], tokenizer, tmp_path / "npy", objective="chat", seq_len=512,
                        output_format="nemo-packed-npy", pad_to_multiple=8)  # fmt: skip
    eos = open_tokenizer(tokenizer).model_role_id("eos")  # the model's own, what the Bridge's tokenizer calls eod
    assert eos is not None and run.manifest["recipe"]["pad-to-multiple"] == 8
    path = tmp_path / "npy" / "part-00000-of-00001.npy"
    metadata = path.with_name(path.stem + "_metadata.jsonl")
    dataset = released_dataset(
        "megatron-bridge 0.3.1", path, eos, 512, metadata, pad_to_max_length=True, pad_seq_to_mult=8
    )
    items = [dataset[i] for i in range(len(dataset.indexed_dataset))]
    sequences = sorted(
        tuple(item["input_ids"][a:b])
        for item in items
        for a, b in zip(item["seq_boundaries"][:-1], item["seq_boundaries"][1:])
    )
    assert sequences == sorted(tuple(bridge_pre_pad(list(ids), 8, 512, eos)) for ids in unpacked["input_ids"])
    real = sum(len(ids) for ids in unpacked["input_ids"])  # the padding the files hold, counted as such
    assert run.manifest["totals"]["padding_tokens"] == sum(map(len, sequences)) - real > 0
    batch = dataset.collate_fn(items)
    real_lengths = sorted(len(ids) for ids in unpacked["input_ids"])
    found = []
    for k in range(len(items)):
        padded = [x for x in batch["cu_seqlens"][k].tolist() if x >= 0]
        unpadded = batch["cu_seqlens_unpadded"][k].tolist()
        spans = len(items[k]["seq_boundaries"]) - 1
        assert all((b - a) % 8 == 0 for a, b in zip(padded[:spans], padded[1 : spans + 1]))
        found += [b - a for a, b in zip(unpadded[:spans], unpadded[1 : spans + 1])]
        mask, tokens = batch["loss_mask"][k].numpy(), batch["tokens"][k].numpy()
        assert not mask[tokens == eos].any()
    assert sorted(found) == real_lengths  # the collate's real ends: each conversation's tokens, every one an input
    assert verify_output(tmp_path / "npy").ok


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"objective": "chat", "packing": "none"}, "takes --packing best-fit, not none"),
        ({"objective": "clm", "packing": "best-fit"}, "clm's rows have none"),
        ({"objective": "chat", "seq_len": 8, "pad_to_multiple": 16}, "--seq-len 8 holds no sequence"),
        ({"objective": "chat", "seq_len": 16, "output_format": "nemo-packed"}, "plus the token the reader shifts"),
    ],
)
def test_pad_to_multiple_where_it_means_nothing_is_refused(tmp_path, options, said):
    options = {"pad_to_multiple": 16, **options}
    with pytest.raises(ObjcliError, match=said.replace("+", r"\+")):
        run_transform([SAMPLE / "prose.jsonl"], SAMPLE / "tokenizer.model", tmp_path / "out", **options)


def test_trls_padding_free_collator_gives_every_sequence_a_multiple(chat, tmp_path):
    """TRL's own collator (padding_free=True, as its SFTTrainer runs packed rows), over the rows with each
    segment's length as formats.md's recipe gives them: every sequence of its flattened batch (cu_seq_lens)
    a multiple of 8 (its pad_to_multiple_of pads only the batch's end), and the tokens it learns the
    conversations' own."""
    pytest.importorskip("trl")
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    folder, tokenizer, unpacked = chat
    run = run_transform([folder / "c.jsonl"], tokenizer, tmp_path / "out", objective="chat", seq_len=512,
                        pad_to_multiple=8)  # fmt: skip
    _, rows = read_output(tmp_path / "out")
    pad = run.manifest["special_tokens"]["ids"]["pad"]
    examples = []
    for ids, labels, segments in zip(rows["input_ids"], rows["labels"], rows["segment_ids"]):
        starts = np.flatnonzero(np.diff(np.asarray(segments), prepend=-1))  # the recipe's with_seq_lengths
        lengths = np.diff(np.append(starts, len(segments))).tolist()
        examples.append({"input_ids": ids, "labels": labels, "seq_lengths": lengths})
    batch = DataCollatorForLanguageModeling(pad_token_id=pad, padding_free=True, pad_to_multiple_of=8)(examples)
    bounds = batch["cu_seq_lens_q"].numpy()
    assert (np.diff(bounds) % 8 == 0).all() and bounds[-1] == 512 * len(examples)
    learned = batch["labels"][0].numpy()
    expected = [t for lab in unpacked["labels"] for t in lab if t != IGNORE]  # in packed order: compared as counts
    assert sorted(learned[learned != IGNORE].tolist()) == sorted(expected)
