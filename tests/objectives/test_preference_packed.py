"""Packed preference pairs train as the pairs do (issue 64, item 3): each pair's two sides adjacent in
one row, never split, a segment a side with positions restarting; a tiny causal LM's summed
log-probability of each side's completion over the packed rows (position_ids mark the sequences, as
transformers reads packed rows: attention stays within a segment) equals the same over the pair's
sides unpacked, as DPO's loss takes them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from optional import lazily, requires
from runs import read_output, run_transform
from trl_families import family_folder, preference_records, train_tokenizer

from objcli.kernels import IGNORE

pytestmark = requires("torch", "transformers")
torch = lazily("torch")
transformers = lazily("transformers")


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    root = tmp_path_factory.mktemp("packed-pairs")
    folder = family_folder(train_tokenizer(root), "qwen2_5", "qwen2_5", root / "tokenizer")
    data = root / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in preference_records("qwen2_5", 45, seed=9)))
    common = {"objective": "preference", "seq_len": 400}
    unpacked = run_transform([data], folder, root / "none", packing="none", **common)
    packed = run_transform([data], folder, root / "packed", packing="best-fit", **common)
    return folder, read_output(root / "none")[1], read_output(root / "packed")[1], unpacked, packed


def _sides_of_rows(rows: dict) -> list[tuple[tuple, int, int]]:
    """(ids, completion start, side) of every segment of every packed row."""
    found = []
    for ids, labels, segments, positions, sides in zip(
        rows["input_ids"], rows["labels"], rows["segment_ids"], rows["position_ids"], rows["side"]
    ):
        ids, labels, segments, positions = map(np.asarray, (ids, labels, segments, positions))
        assert segments.max() == 2 * (segments.max() // 2) and list(sides) == [0, 1] * (segments.max() // 2)
        for segment in range(1, segments.max() + 1):
            where = np.flatnonzero(segments == segment)
            assert (np.diff(where) == 1).all() and (positions[where] == np.arange(len(where))).all()
            supervised = np.flatnonzero(labels[where] != IGNORE)
            assert (labels[where][supervised] == ids[where][supervised]).all()
            found.append((tuple(ids[where]), int(supervised[0]), int(sides[segment - 1])))
            assert (np.diff(supervised) == 1).all() and supervised[-1] == len(where) - 1  # the completion, to the end
    return found


def test_packed_rows_hold_every_pair_whole_with_loss_on_completions(pairs):
    _, unpacked, packed, summary_none, summary_packed = pairs
    expected, too_long = [], 0
    for prompt, chosen, rejected in zip(unpacked["prompt_ids"], unpacked["chosen_ids"], unpacked["rejected_ids"]):
        if 2 * len(prompt) + len(chosen) + len(rejected) > 400:  # no row holds the pair whole: a counted skip
            too_long += 1
            continue
        expected += [(tuple(prompt) + tuple(chosen), len(prompt), 0), (tuple(prompt) + tuple(rejected), len(prompt), 1)]
    found = [(tuple(int(t) for t in ids), start, side) for ids, start, side in _sides_of_rows(packed)]
    assert sorted(found) == sorted(expected)  # every side once, whole, its loss exactly on its completion
    by_pair = {side: k for k, side in enumerate(found)}
    for k in range(0, len(found), 2):  # a pair's sides are adjacent: segments 2j-1 and 2j of one row
        assert found[k][2] == 0 and found[k + 1][2] == 1 and k + 1 == by_pair[found[k + 1]]
    totals = summary_packed.manifest["totals"]
    assert 0 < too_long == totals["skipped_by_reason"]["pair_too_long"] < len(unpacked["prompt_ids"]) // 2
    assert totals["documents_written"] == summary_none.manifest["totals"]["documents_written"] - too_long


def _completion_logps(model, ids, positions):
    """Every position's log-probabilities (float64) over a row: packed where positions restart."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids]), position_ids=torch.tensor([positions]), use_cache=False).logits[0]
    logps = torch.log_softmax(logits.double(), -1)
    return logps


def test_packed_log_probabilities_equal_the_unpacked_pairs(pairs):
    folder, unpacked, packed, _, _ = pairs
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer) + 1, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, attn_implementation="sdpa",
    )  # fmt: skip
    model = transformers.LlamaForCausalLM(config).double().eval()

    def side_logp(ids, start, positions=None, offset=0, logps=None):
        if logps is None:
            logps = _completion_logps(model, list(ids), list(range(len(ids))))
        targets = torch.tensor(ids[start:])
        return float(logps[offset + start - 1 : offset + len(ids) - 1].gather(1, targets[:, None]).sum())

    alone = {}
    for prompt, chosen, rejected in zip(unpacked["prompt_ids"], unpacked["chosen_ids"], unpacked["rejected_ids"]):
        for completion in (chosen, rejected):
            ids = list(prompt) + list(completion)
            alone[tuple(ids)] = side_logp(ids, len(prompt))
    together = {}
    for ids, labels, segments, positions in zip(
        packed["input_ids"], packed["labels"], packed["segment_ids"], packed["position_ids"]
    ):
        ids, labels, segments = list(ids), np.asarray(labels), np.asarray(segments)
        logps = _completion_logps(model, ids, list(positions))
        for segment in range(1, segments.max() + 1):
            where = np.flatnonzero(segments == segment)
            side = ids[where[0] : where[-1] + 1]
            start = int(np.flatnonzero(labels[where] != IGNORE)[0])
            together[tuple(side)] = side_logp(side, start, offset=int(where[0]), logps=logps)
    assert len(together) > 40 and together.keys() <= alone.keys()  # the pairs a row holds (the first test: which)
    assert max(abs(together[k] - alone[k]) for k in together) < 1e-9


def test_verify_finds_a_pair_broken_in_any_way(pairs, tmp_path):
    """``verify``'s pair check on the packed rows as written (no problem), then with one thing broken
    at a time: a label lost inside a completion, a prompt token changed on the rejected side, the
    sides swapped, a side's segment cut in two."""
    from objcli.commands.verify import verify_output
    from objcli.commands.verify_pairs import check_pair_sides
    from objcli.formats import Column

    _, _, packed, _, summary = pairs
    assert verify_output(Path(summary.output)).ok
    ids, labels, segments = (np.array(packed[name], dtype=np.int64) for name in ("input_ids", "labels", "segment_ids"))
    sides = [np.asarray(s) for s in packed["side"]]

    def check(ids=ids, labels=labels, segments=segments, sides=sides) -> list[str]:
        rows, width = ids.shape
        fixed = lambda a: Column(a.ravel(), np.arange(rows + 1, dtype=np.int64) * width)  # noqa: E731
        ragged = Column(np.concatenate(sides), np.concatenate([[0], np.cumsum([len(s) for s in sides])]))
        return check_pair_sides(fixed(ids), fixed(labels), fixed(segments), ragged)

    assert check() == []
    where = np.flatnonzero(labels[0] != IGNORE)[2]
    lost = labels.copy()
    lost[0, where] = IGNORE
    assert check(labels=lost) and "completion" in check(labels=lost)[0]
    second = np.flatnonzero(segments[0] == 2)[0]
    changed = ids.copy()
    changed[0, second] += 1
    assert "same prompt" in check(ids=changed)[0]
    swapped = [s[::-1] if k == 0 else s for k, s in enumerate(sides)]
    assert "chosen then a rejected" in check(sides=swapped)[0]
    cut = segments.copy()
    cut[0, second - 1] = 3  # the chosen side's last token given to another segment
    assert check(segments=cut)


def test_provenance_of_packed_pairs_names_each_sides_record(pairs, tmp_path):
    """--provenance on packed pairs: every segment (a side) has its span, the two sides of a pair the
    same record, and that record's completion for the side is the text its segment ends with."""
    import pyarrow.parquet as pq

    folder = pairs[0]
    data = Path(pairs[3].manifest["inputs"][0]["path"])
    out = tmp_path / "provenance"
    run_transform([data], folder, out, objective="preference", seq_len=400, packing="best-fit", provenance=True)
    _, rows = read_output(out)
    manifest = json.loads((out / "manifest.json").read_text())
    spans = pq.read_table(out / manifest["shards"][0]["files"][-1]).to_pylist()
    records = [json.loads(line) for line in data.read_text().splitlines()]
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    by_segment = {(s["row"], s["segment"]): s["record"] for s in spans}
    for row, (ids, segments, sides) in enumerate(zip(rows["input_ids"], rows["segment_ids"], rows["side"])):
        segments = np.asarray(segments)
        for segment in range(segments.max()):
            record, side = records[by_segment[(row, segment)]], sides[segment]
            assert by_segment[(row, segment - segment % 2)] == by_segment[(row, segment - segment % 2 + 1)]
            where = np.flatnonzero(segments == segment + 1)
            completion = record["chosen" if side == 0 else "rejected"]
            answer = completion if isinstance(completion, str) else completion[-1]["content"]
            assert answer.strip() in tokenizer.decode(np.asarray(ids)[where]), (row, segment)
