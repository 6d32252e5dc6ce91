"""The red team's post-training defects (issue 69): values kept as records hold them, numbers past
double range, pairs identical once EOS is added, null data sources, and refusals that name what fits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from optional import lazily, requires
from runs import run_cli, run_transform
from trl_families import family_folder, train_tokenizer

from objcli.errors import ObjcliError
from objcli.formats import FORMATS

pytestmark = requires("datasets")
datasets = lazily("datasets")
VALUE_FORMATS = [name for name, f in FORMATS.items() if f.stores_values]  # the registry: every row format of values


@pytest.fixture(scope="module")
def chatml(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("chatml")
    return family_folder(train_tokenizer(root), "qwen2_5", "qwen2_5", root / "tokenizer")


@pytest.fixture(scope="module")
def no_template(chatml, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("plain")
    (folder / "tokenizer.json").write_bytes((chatml / "tokenizer.json").read_bytes())
    config = json.loads((chatml / "tokenizer_config.json").read_text())
    del config["chat_template"]
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def _write(path: Path, records: list, raw: dict[int, str] | None = None) -> Path:
    lines = [json.dumps(r) for r in records]
    for k, text in (raw or {}).items():
        lines[k] = text
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _rows(folder: Path) -> list[dict]:
    """The rows as a trainer's loader gives them: ``load_from_disk`` for a saved dataset, else the card's features."""
    if (folder / "state.json").exists():
        return datasets.load_from_disk(str(folder)).to_list()
    # A cache of its own: datasets' cache can serve another folder's rows for a same-named shard.
    cache = folder.parent / f".hf-cache-{folder.name}"
    return datasets.load_dataset(str(folder), split="train", cache_dir=str(cache)).to_list()


SEARCH_R1 = {
    "prompt": [{"role": "user", "content": "who wrote it?"}],
    "data_source": "nq",
    "ability": "fact-reasoning",
    "reward_model": {"ground_truth": {"target": ["Austen", "Jane Austen"]}, "style": "rule"},
    "extra_info": {"split": "train", "index": 7, "tools_kwargs": {"search": {"top_k": 3}}, "flag": True},
}


@pytest.mark.parametrize("fmt", VALUE_FORMATS)
def test_prompt_values_are_kept_as_the_record_holds_them(fmt, chatml, tmp_path):
    """verl reward functions index ground_truth["target"]; extra_info keeps the record's own fields (its own
    index kept, counted); true stays a boolean; a record naming data_source null takes --data-source."""
    other = {"prompt": "and then?", "data_source": None, "answer_key_field": 1, "reward_model": {"ground_truth": None}}
    data = _write(tmp_path / "p.jsonl", [SEARCH_R1, other])
    summary = run_transform([data], chatml, tmp_path / "out", objective="prompts", output_format=fmt, data_source="fb")
    first, second = _rows(tmp_path / "out")
    assert first["reward_model"] == SEARCH_R1["reward_model"]
    assert first["extra_info"] == {**SEARCH_R1["extra_info"], "prompt_tokens": first["extra_info"]["prompt_tokens"]}
    assert first["extra_info"]["flag"] is True and first["ability"] == "fact-reasoning"
    assert second["data_source"] == "fb" and second["reward_model"] == {"ground_truth": None, "style": "rule"}
    assert second["extra_info"]["index"] == 1 and second["extra_info"]["tools_kwargs"] is None
    assert summary.manifest["totals"]["extra_info_kept"] == 1


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text("abxyz_", min_size=1, max_size=3), inner, min_size=1, max_size=3)
    ),
    max_leaves=8,
)


def _reference(records: list[dict]) -> list[dict] | None:
    """The rows ``datasets`` itself makes of the same values (``Dataset.from_list``: its own type
    inference), None where it finds no common type. pyarrow's inference from Python objects turns a bool
    it meets after a number into that number (``[0.0, False]``: doubles) and a number after a bool into an
    error: a type that depends on the order values come in is none (objcli refuses a bool beside a number
    at one place, in any order)."""
    kinds: dict[str, set[str]] = {}
    for record in records:
        _kinds_at("", record, kinds)
    if any({"bool", "number"} <= seen for seen in kinds.values()):
        return None
    try:
        return datasets.Dataset.from_list(records).to_list()
    except (TypeError, ValueError, ArithmeticError, Exception):  # noqa: BLE001 - pyarrow's ArrowInvalid
        return None


def _kinds_at(where: str, value, kinds: dict[str, set[str]]) -> None:
    """Whether a bool or a number stands at each place (a field's path, ``[]`` for a list's items)."""
    if isinstance(value, dict):
        for key, item in value.items():
            _kinds_at(f"{where}.{key}", item, kinds)
    elif isinstance(value, list):
        for item in value:
            _kinds_at(f"{where}[]", item, kinds)
    elif isinstance(value, (bool, int, float)):
        kinds.setdefault(where, set()).add("bool" if isinstance(value, bool) else "number")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(st.dictionaries(st.text("cdq", min_size=1, max_size=2), JSON, max_size=3), min_size=1, max_size=3)
)
def test_any_json_values_come_back_as_datasets_types_them_through_every_row_format(values, chatml, tmp_path_factory):
    """A property: extra_info of any JSON values and depth, through every value format and back, equals
    what ``datasets`` makes of the same records; where no column type holds them all, one line."""
    records = [{"prompt": f"q{k}", "data_source": "s", "extra_info": v} for k, v in enumerate(values)]
    expected = _reference([{"extra_info": {"index": k, "prompt_tokens": 0, **v}} for k, v in enumerate(values)])
    folder = tmp_path_factory.mktemp("values")
    data = _write(folder / "p.jsonl", records)
    for fmt in VALUE_FORMATS:
        out = folder / fmt
        try:
            summary = run_transform([data], chatml, out, objective="prompts", output_format=fmt)
        except ObjcliError as error:  # records that disagree: one line
            assert expected is None and "\n" not in str(error) and "one type" in str(error)
            continue
        if summary.manifest["totals"]["documents_skipped"]:  # a list mixing types within a record: counted
            assert expected is None and set(summary.manifest["totals"]["skipped_by_reason"]) == {"bad_value"}
            continue
        rows = [{"extra_info": {**r["extra_info"], "prompt_tokens": 0}} for r in _rows(out)]
        assert rows == expected, fmt


def test_a_number_past_double_range_never_costs_a_record(chatml, tmp_path):
    """1e400 in a field no objective reads: chat, tokenize --chat, preference and prompts read the record."""
    turn = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    chat = _write(
        tmp_path / "c.jsonl", [{"messages": turn}, {}], {1: json.dumps({"messages": turn})[:-1] + ', "s": 1e400}'}
    )
    pairs = _write(tmp_path / "p.jsonl", [{}], {0: '{"prompt": "p", "chosen": " b", "rejected": " a", "extra": 1e400}'})
    prompts = _write(tmp_path / "q.jsonl", [{}], {0: '{"prompt": "p", "data_source": "s", "score": -1e400}'})
    for data, objective in ((chat, "chat"), (pairs, "preference"), (prompts, "prompts")):
        summary = run_transform([data], chatml, tmp_path / objective, objective=objective, output_format="parquet")
        assert summary.manifest["totals"]["documents_skipped"] == 0, objective
    stored = run_cli("tokenize", "--chat", chat, "-t", chatml / "tokenizer.json", "-o", tmp_path / "store")
    assert stored.returncode == 0 and "2 stored" in stored.stderr


def test_pairs_identical_once_eos_is_added_and_mixed_layouts_are_counted_as_such(chatml, tmp_path):
    messages = [{"role": "assistant", "content": "a"}]
    records = [
        {"prompt": "p", "chosen": " a<|im_end|>", "rejected": " a"},  # the same once EOS ends each
        {"prompt": [{"role": "user", "content": "q"}], "chosen": "a string", "rejected": messages},
        {"prompt": "p", "chosen": " b", "rejected": " a"},
    ]
    summary = run_transform([_write(tmp_path / "p.jsonl", records)], chatml, tmp_path / "out", objective="preference")
    assert summary.manifest["totals"]["skipped_by_reason"] == {"identical_pair": 1, "mixed_layout": 1}
    assert summary.manifest["totals"]["documents_written"] == 1


def test_refusals_name_what_fits(chatml, no_template, tmp_path):
    prompts = _write(tmp_path / "q.jsonl", [{"prompt": "p", "data_source": "s"}])
    refused = run_cli("transform", prompts, "-t", chatml / "tokenizer.json", "--objective", "prompts", "--format",
                      "megatron", "-o", tmp_path / "m")  # fmt: skip
    assert refused.returncode == 1 and "choose --format arrow, hf or parquet\n" in refused.stderr
    assert "npy" not in refused.stderr  # npy holds no value column
    # A pair store given to clm: said as a pair store, not as --sentences.
    pairs = _write(tmp_path / "p.jsonl", [{"prompt": "p", "chosen": " b", "rejected": " a"}])
    assert (
        run_cli("tokenize", "--preference", pairs, "-t", chatml / "tokenizer.json", "-o", tmp_path / "s").returncode
        == 0
    )
    clm = run_cli("transform", tmp_path / "s", "-t", chatml / "tokenizer.json", "-o", tmp_path / "c")
    assert clm.returncode == 1 and "--preference" in clm.stderr and "--sentences" not in clm.stderr
    for command in ("verify", "stats", "inspect"):
        result = run_cli(command, pairs)
        assert result.returncode == 1 and result.stderr.startswith(f"Error: {pairs}: a file, not an output folder")
    # No chat template: conversational pairs say so, naming no option preference refuses.
    conversational = [{"prompt": [{"role": "user", "content": "q"}], "chosen": [{"role": "assistant", "content": "a"}],
                       "rejected": [{"role": "assistant", "content": "b"}]}]  # fmt: skip
    data = _write(tmp_path / "conv.jsonl", conversational)
    result = run_cli(
        "transform", data, "-t", no_template / "tokenizer.json", "--objective", "preference", "-o", tmp_path / "n"
    )
    assert result.returncode == 1 and "--chat-template" in result.stderr and "--messages-key" not in result.stderr
    result = run_cli(
        "transform", prompts, "-t", no_template / "tokenizer.json", "--objective", "prompts", "-o", tmp_path / "r"
    )
    assert (
        result.returncode == 1 and "--objective prompts:" in result.stderr and "--objective chat" not in result.stderr
    )


def test_inspect_shows_a_reward_pairs_margin(chatml, tmp_path):
    data = _write(tmp_path / "r.jsonl", [{"prompt": "p", "chosen": " b", "rejected": " a", "margin": 2.5}])
    run_transform([data], chatml, tmp_path / "out", objective="reward", margin=True)
    shown = run_cli("inspect", tmp_path / "out", "--no-color")
    assert shown.returncode == 0 and "margin 2.5" in shown.stdout


def test_values_of_every_type_go_through_reshard_merge_and_verify_and_an_append_never_mixes_types(chatml, tmp_path):
    from objcli.commands.verify import verify_output

    data = _write(tmp_path / "p.jsonl", [SEARCH_R1, {"prompt": "two", "data_source": "s", "extra_info": {"n": None}}])
    run_transform([data], chatml, tmp_path / "a", objective="prompts", output_format="parquet", shard_size="1")
    original = _rows(tmp_path / "a")
    assert verify_output(tmp_path / "a").ok  # a list inside a record: Parquet names its items "element"
    assert run_cli("reshard", tmp_path / "a", "--shard-size", "1GB").returncode == 0
    run_transform([data], chatml, tmp_path / "b", objective="prompts", output_format="parquet", seed=7)
    assert run_cli("merge", tmp_path / "a", tmp_path / "b", "-o", tmp_path / "m").returncode == 0
    assert _rows(tmp_path / "a") == original and _rows(tmp_path / "m") == original * 2
    assert verify_output(tmp_path / "a").ok and verify_output(tmp_path / "m").ok
    more = _write(tmp_path / "more.jsonl", [{"prompt": "new", "data_source": "s", "extra_info": {"other": 1}}])
    appended = run_cli("transform", more, "-o", tmp_path / "a", "--append")  # the output's configuration
    assert appended.returncode == 1 and "--append: with the new inputs, column extra_info is" in appended.stderr
    assert _rows(tmp_path / "a") == original and verify_output(tmp_path / "a").ok
