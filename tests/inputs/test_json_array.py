"""A ``.json`` file holding one array (``inputs/json_array.py``): every element gets the verdict the
same record gets as a JSON line, whatever value it holds and however deep, on standard input as in a
file, with memory bounded by the batch; damage to the array itself is one counted skip."""

import json
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runs import SAMPLE, manifest_json, run_cli

from objcli.inputs.json_array import ArrayScanner, ElementLocator, array_blocks
from objcli.inputs.records import RecordLog

SPM = SAMPLE / "tokenizer.model"
TEXT = {"text": "a record with some words in it " * 4}


def _both(tmp_path, raw_elements: list[str], stdin: bool = False) -> dict:
    """Run the elements as a JSON array and as JSON lines: (totals, rows) of each, and the stderr."""
    array = "[" + ",\n ".join(raw_elements) + "]"
    (tmp_path / "a.json").write_text(array, encoding="utf-8", errors="surrogatepass")
    (tmp_path / "a.jsonl").write_text("".join(e + "\n" for e in raw_elements), encoding="utf-8")
    results = {}
    for name in ("a.json", "a.jsonl"):
        source = "-" if stdin and name == "a.json" else tmp_path / name
        done = run_cli(
            "transform",
            source,
            "-t",
            SPM,
            "--seq-len",
            "32",
            "-o",
            tmp_path / f"out-{name}",
            "--packing",
            "none",
            input=array if source == "-" else None,
        )
        assert "Traceback" not in done.stderr, done.stderr
        totals = manifest_json(tmp_path / f"out-{name}")["totals"] if done.returncode == 0 else None
        results[name] = (done.returncode, totals and (totals["documents_read"], totals["skipped_by_reason"]))
    return results


def test_a_lone_surrogate_is_the_same_counted_skip_as_in_json_lines(tmp_path):
    elements = [json.dumps(TEXT), '{"text": "broken \\ud800 here"}', json.dumps(TEXT)]
    results = _both(tmp_path, elements)
    assert results["a.json"] == results["a.jsonl"] == (0, (3, {"bad_json": 1}))


@pytest.mark.parametrize("stdin", [False, True])
def test_an_integer_past_64_bits_drops_nothing_on_standard_input_or_in_a_file(tmp_path, stdin):
    elements = [json.dumps(TEXT), '{"id": 123456789012345678901234567890, "text": "big id here"}', json.dumps(TEXT)]
    results = _both(tmp_path, elements, stdin=stdin)
    assert results["a.json"] == results["a.jsonl"] == (0, (3, {}))


def test_a_big_integer_and_a_lone_surrogate_in_one_array(tmp_path):
    elements = ['{"id": 1' + "0" * 30 + ', "text": "x y z"}', '{"text": "\\udfff"}', json.dumps(TEXT)]
    results = _both(tmp_path, elements, stdin=True)
    assert results["a.json"] == results["a.jsonl"] == (0, (3, {"bad_json": 1}))


def test_an_element_nested_a_thousand_deep_is_a_counted_skip(tmp_path):
    deep = '{"text": "deep", "n": ' + "[" * 1000 + "]" * 1000 + "}"
    results = _both(tmp_path, [json.dumps(TEXT), deep, json.dumps(TEXT)])
    assert results["a.json"] == results["a.jsonl"] == (0, (3, {"bad_json": 1}))


@pytest.mark.parametrize("depth", [20_000, 100_000])
def test_nesting_costs_memory_bounded_by_the_batch(depth):
    """The issue saw 20,000 levels take 1 GB and 100,000 be killed: the scan holds a chunk's arrays."""
    import io

    batch = 1 << 20
    data = ("[" + json.dumps(TEXT) + ', {"n": ' + "[" * depth + "]" * depth + "}]").encode()
    log = RecordLog(strict=False)
    tracemalloc.start()
    blocks = list(array_blocks(io.BytesIO(data), batch, log, ElementLocator("deep.json")))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak <= 2 * batch + 2 * len(data), peak
    lines = [line for _, block in blocks for line in block.split(b"\n") if line.strip()]
    assert len(lines) == 2 and json.loads(lines[0]) == TEXT and not log.skipped


def test_damage_to_the_array_is_one_skip_at_the_element_where_it_breaks():
    import io

    cases = {
        b'[{"text": "a"},,{"text": "b"}]': (1, "an empty element"),
        b'[{"text": "a"}, {"text": "b"},]': (2, "an empty element"),
        b'[{"text": "a"}] trailing': (1, "data after the end"),
        b'[{"text": "a"}, {"text": "b': (1, "ends inside the array"),
    }
    for data, (element, why) in cases.items():
        log = RecordLog(strict=False)
        blocks = list(array_blocks(io.BytesIO(data), 1 << 20, log, ElementLocator("f.json")))
        lines = [line for _, block in blocks for line in block.split(b"\n") if line.strip()]
        assert len(lines) == element and log.skipped == {"bad_json": 1}, (data, lines, log.skipped)
        assert f"f.json element {element + 1}" in log.first_example["bad_json"] and why in log.first_example["bad_json"]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**80), 2**80) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=12,
)
ELEMENTS = st.lists(
    st.one_of(
        JSON_VALUES,
        st.builds(lambda t, v: {"text": t, "v": v}, st.text(alphabet='ab "\\\n,[]{}é', max_size=20), JSON_VALUES),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(elements=ELEMENTS, chunk=st.integers(1, 64), indent=st.sampled_from([None, 1]))
def test_the_scan_gives_each_element_as_written_whatever_the_chunks(elements, chunk, indent):
    """Chunks of any size (a string, an escape or a nesting cut anywhere) give the same lines."""
    scanner, pieces = ArrayScanner(), []
    data = json.dumps(elements, indent=indent).encode()
    for start in range(0, len(data), chunk):
        lines, broken = scanner.feed(data[start : start + chunk])
        assert broken is None
        pieces.append(lines)
    assert scanner.finish() is None
    lines = [line for line in b"".join(pieces).split(b"\n") if line.strip()]
    assert [json.loads(line) for line in lines] == elements
