"""Multi-token prediction: clm's rows plus, per token, how many heads have a target in its segment."""

import numpy as np
import pyarrow as pa
import reference
from hypothesis import given
from hypothesis import strategies as st
from runs import manifest_json, run_transform

from objcli.commands.stats import compute_stats
from objcli.commands.verify import verify_output
from objcli.commands.verify_roles import _check_target_depth
from objcli.formats import Column
from objcli.kernels.mtp import heads_with_target
from objcli.packing import PACKERS


def _flat(rows):
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    values = np.array([v for r in rows for v in r], dtype=np.int32)
    return values, offsets


def test_worked_example():
    """Segments 1 1 1 2 2 then padding, K = 2: head 1 has 2 + 1 targets, head 2 has 1 + 0."""
    values, offsets = _flat([[1, 1, 1, 2, 2, 0], [3, 3]])
    assert heads_with_target(values, offsets, 2).tolist() == [2, 1, 0, 1, 0, 0, 1, 0]


@given(
    st.lists(
        st.lists(st.integers(0, 3), max_size=12).map(sorted).map(lambda r: [v for v in r if v] + [0] * r.count(0)),
        max_size=6,
    ),
    st.integers(1, 5),
)
def test_kernel_matches_the_reference_loop(rows, heads):
    values, offsets = _flat(rows)
    expected = [v for row in reference.heads_with_target(rows, heads) for v in row]
    assert heads_with_target(values, offsets, heads).tolist() == expected
    depth = Column(heads_with_target(values, offsets, heads), offsets)
    assert _check_target_depth(depth, Column(values, offsets), heads) == []
    if len(values) and expected[0] > 0:  # verify's recurrence catches a wrong value
        broken = depth.values.copy()
        broken[0] -= 1
        assert _check_target_depth(Column(broken, offsets), Column(values, offsets), heads)


def _arrow(folder):
    return pa.concat_tables(pa.ipc.open_stream(str(p)).read_all() for p in sorted(folder.glob("part-*.arrow")))


def test_rows_are_clms_and_each_head_has_n_minus_k_targets(small_corpus, sample_tokenizer, tmp_path):
    from objcli.objectives import REGISTRY
    from objcli.objectives.mtp import MtpOptions

    for packer in REGISTRY.named("mtp").packers(MtpOptions()):
        assert packer in PACKERS
        options = {"seq_len": 96, "packing": packer}
        run_transform([small_corpus], sample_tokenizer, tmp_path / f"clm-{packer}", objective="clm", **options)
        run_transform(
            [small_corpus], sample_tokenizer, tmp_path / f"mtp-{packer}", objective="mtp", mtp_heads=4, **options
        )
        clm, mtp = _arrow(tmp_path / f"clm-{packer}"), _arrow(tmp_path / f"mtp-{packer}")
        for name in clm.column_names:
            assert mtp.column(name).equals(clm.column(name)), (packer, name)
        assert verify_output(tmp_path / f"mtp-{packer}").ok
        segments = [np.asarray(r) for r in clm.column("segment_ids").to_pylist()]
        lengths = np.concatenate([np.bincount(r[r > 0])[1:] for r in segments])
        lengths = lengths[lengths > 0]
        stats = compute_stats(tmp_path / f"mtp-{packer}")
        assert stats["targets_per_head"] == [int(np.maximum(lengths - k, 0).sum()) for k in range(1, 5)]
        assert manifest_json(tmp_path / f"mtp-{packer}")["columns"][-1]["role"] == "target_depth"
