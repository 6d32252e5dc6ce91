"""``--objective chat``: input ids and assistant masks exactly as ``transformers``' apply_chat_template
gives them, on five chat formats with tokenizers trained here; loss modes, prompt/completion
records, overlong conversations, packing, bad records, and every tokenizer kind."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from chat_data import FAMILIES, TEMPLATES, TURN_END, build_tokenizer, conversations, write_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st
from optional import lazily, requires
from reference import assistant_mask_reference, overlap_mask_reference
from runs import read_output, run_cli, run_transform, without_warnings

from objcli.commands.verify import verify_output
from objcli.errors import ObjcliError
from objcli.kernels import IGNORE
from objcli.kernels.chat import mark_ranges, overlapping_tokens, span_tokens

pytestmark = requires("transformers")
transformers = lazily("transformers")


@pytest.fixture(scope="module")
def tokenizers_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("chat-tokenizers")
    return {family: build_tokenizer(family, root / family) for family in FAMILIES}


def _transformers_outputs(folder, records, with_mask):
    """What transformers gives for each record, or None where its template raises."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    outputs = []
    for record in records:
        try:
            outputs.append(
                tokenizer.apply_chat_template(
                    record["messages"], tokenize=True, return_dict=True, return_assistant_tokens_mask=with_mask
                )
            )
        except Exception as error:  # noqa: BLE001 (jinja2's TemplateError and what templates raise)
            assert "alternate" in str(error) or "not supported" in str(error) or "System role" in str(error), error
            outputs.append(None)
    return tokenizer, outputs


def _rows(out):
    manifest, rows = read_output(out)
    return manifest, [np.array(r) for r in rows["input_ids"]], [np.array(r) for r in rows["labels"]]


@pytest.mark.parametrize("span", ["turn", "content"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_input_ids_and_masks_equal_transformers(family, span, tokenizers_dir, tmp_path):
    records = conversations(1000, family, seed=11)
    data = write_jsonl(records, tmp_path / "chat.jsonl")
    has_markers = (
        "{% generation" in (TEMPLATES / FAMILIES[family][0]).read_text()
        or "generation %}" in (TEMPLATES / FAMILIES[family][0]).read_text()
    )
    if has_markers and span == "content":
        return  # markers decide, whatever --assistant-span says
    hf, expected = _transformers_outputs(tokenizers_dir[family].parent, records, has_markers)
    summary = run_transform(
        [data],
        tokenizers_dir[family],
        tmp_path / "out",
        objective="chat",
        packing="none",
        seq_len=1 << 16,
        assistant_span=span,
    )
    manifest, ids, labels = _rows(tmp_path / "out")
    skipped = manifest["totals"]["skipped_by_reason"]
    assert skipped.get("template_error", 0) == sum(e is None for e in expected)

    def learnable(record, out):
        if has_markers:
            return any(out["assistant_masks"])
        # A whole turn always holds its end of turn (an empty answer teaches the model to stop).
        return span == "turn" or any(m["content"].strip() for m in record["messages"] if m["role"] == "assistant")

    kept = [(r, e) for r, e in zip(records, expected) if e is not None and learnable(r, e)]
    assert len(ids) == len(kept) == summary.manifest["totals"]["documents_written"]
    for row, label, (record, out) in zip(ids, labels, kept):
        assert row.tolist() == out["input_ids"]
        supervised = label != IGNORE
        assert np.all(label[supervised] == row[supervised])
        if has_markers:
            assert supervised.astype(int).tolist() == out["assistant_masks"]
        else:
            _check_runs_are_assistant_turns(hf, row, supervised, record, family, span)
    assert verify_output(tmp_path / "out").ok


def _check_runs_are_assistant_turns(hf, row, supervised, record, family, span):
    """Without markers: each run of supervised tokens is one assistant turn (``content``: a non-empty
    one), its content as the template writes it, ending with the end-of-turn token."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], supervised.astype(np.int8), [0]])))
    runs = [hf.decode(row[a:b].tolist()) for a, b in zip(edges[::2], edges[1::2])]
    contents = [
        m["content"]
        for m in record["messages"]
        if m["role"] == "assistant" and (span == "turn" or m["content"].strip())
    ]
    eos = TURN_END[family]
    assert len(runs) == len(contents)
    for run, content in zip(runs, contents):
        assert run.endswith(eos) and content.strip() in run, (run, content)
        if span == "turn":  # nothing of the template's own text before the content: the turn is the model's
            assert run.removesuffix(eos).strip() == content.strip() or content.strip() in run, (run, content)


def _one_run(tokenizer, records, tmp_path, name="out", **options):
    data = write_jsonl(records, tmp_path / f"{name}.jsonl")
    run_transform(
        [data], tokenizer, tmp_path / name, objective="chat", **{"packing": "none", "seq_len": 4096, **options}
    )
    return _rows(tmp_path / name)


def test_loss_on_last_assistant_and_all(tokenizers_dir, tmp_path):
    records = [
        {
            "messages": [
                {"role": "user", "content": "why rivers ?"},
                {"role": "assistant", "content": "the model"},
                {"role": "user", "content": "and mountains ?"},
                {"role": "assistant", "content": "history"},
            ]
        }
    ]
    tokenizer = tokenizers_dir["qwen2.5"]
    _, ids, every = _one_run(tokenizer, records, tmp_path, "every")
    _, _, last = _one_run(tokenizer, records, tmp_path, "last", loss_on="last-assistant")
    _, _, whole = _one_run(tokenizer, records, tmp_path, "whole", loss_on="all")
    hf = transformers.AutoTokenizer.from_pretrained(str(tokenizer.parent))
    assert hf.decode(ids[0][every[0] != IGNORE].tolist()) == "the model<|im_end|>history<|im_end|>"
    assert hf.decode(ids[0][last[0] != IGNORE].tolist()) == "history<|im_end|>"
    assert np.array_equal(whole[0], ids[0])


def test_prompt_completion_records(tokenizers_dir, tmp_path):
    tokenizer = tokenizers_dir["llama3"]
    records = [
        {"prompt": "Explain rivers :", "completion": " the history of rivers ."},
        {
            "prompt": [{"role": "user", "content": "why ?"}],
            "completion": [{"role": "assistant", "content": "here is why"}],
        },
    ]
    manifest, ids, labels = _one_run(tokenizer, records, tmp_path, bos=True)  # BOS before a plain prompt
    hf = transformers.AutoTokenizer.from_pretrained(str(tokenizer.parent))
    plain = hf("<|begin_of_text|>Explain rivers : the history of rivers .<|eot_id|>", add_special_tokens=False)
    assert ids[0].tolist() == plain["input_ids"]
    assert hf.decode(ids[0][labels[0] != IGNORE].tolist()) in (
        " the history of rivers .<|eot_id|>",
        "the history of rivers .<|eot_id|>",
    )
    chat = hf.apply_chat_template(records[1]["prompt"] + records[1]["completion"], tokenize=True, return_dict=True)
    assert ids[1].tolist() == chat["input_ids"]
    assert hf.decode(ids[1][labels[1] != IGNORE].tolist()) == "here is why<|eot_id|>"


def test_overlong_conversations_are_cut_at_a_turn_or_dropped(tokenizers_dir, tmp_path):
    tokenizer = tokenizers_dir["qwen2.5"]
    long_turn = " ".join(["rivers mountains history"] * 40)
    record = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "short answer"},
            {"role": "user", "content": "more"},
            {"role": "assistant", "content": long_turn},
        ]
    }
    alone = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": long_turn * 2}]}
    _, full, _ = _one_run(tokenizer, [record], tmp_path, "full")
    seq_len = len(full[0]) - 10
    manifest, ids, labels = _one_run(tokenizer, [record, alone], tmp_path, "cut", seq_len=seq_len)
    hf = transformers.AutoTokenizer.from_pretrained(str(tokenizer.parent))
    assert len(ids) == 1 and len(ids[0]) < seq_len
    assert hf.decode(ids[0].tolist()).endswith("short answer<|im_end|>")
    assert hf.decode(ids[0][labels[0] != IGNORE].tolist()) == "short answer<|im_end|>"
    totals = manifest["totals"]
    assert totals["skipped_by_reason"] == {"assistant_tokens_cut": 1} and totals["conversations_truncated"] == 1
    data = write_jsonl([record, alone], tmp_path / "drop.jsonl")
    summary = run_transform([data], tokenizer, tmp_path / "drop", objective="chat", seq_len=seq_len, overlong="drop")
    totals = summary.manifest["totals"]
    assert totals["rows"] == 0 and totals["skipped_by_reason"] == {"overlong": 2}


def test_bad_records_are_counted_skips_with_reasons(tokenizers_dir, tmp_path):
    good = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    bad = [
        {"messages": [{"role": "user", "content": "only a question"}]},
        {"messages": [{"role": "wizard", "content": "?"}, {"role": "assistant", "content": "a"}]},
        {"messages": [{"role": "user", "content": [{"type": "image"}]}, {"role": "assistant", "content": "a"}]},
        {"messages": [{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}]},  # mistral raises
        {"text": "not a conversation"},
    ]
    data = tmp_path / "mixed.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in [good, *bad]) + "{broken\n[1, 2]\n")
    summary = run_transform([data], tokenizers_dir["mistral"], tmp_path / "out", objective="chat")
    totals = summary.manifest["totals"]
    assert totals["skipped_by_reason"] == {
        "no_assistant_message": 1,
        "unknown_role": 1,
        "non_text_content": 1,
        "template_error": 1,
        "no_messages": 1,
        "bad_json": 1,
        "not_an_object": 1,
    }
    assert totals["documents_read"] == 8 == totals["documents_written"] + totals["documents_skipped"]


@pytest.mark.parametrize("span", ["turn", "content"])
def test_a_template_that_rewrites_content_is_a_counted_skip(span, tokenizers_dir, tmp_path):
    """A rendering that cannot be taken apart skips that record, counted with its reason; the run goes on."""
    template = tmp_path / "upper.jinja"
    template.write_text(
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | upper }}<|im_end|>\n{% endfor %}"
    )
    records = [
        {"messages": [{"role": "user", "content": "HI"}, {"role": "assistant", "content": "OK"}]},
        {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "lower"}]},
    ]
    data = write_jsonl(records, tmp_path / "c.jsonl")
    result = run_cli(
        "transform",
        data,
        "-t",
        tokenizers_dir["qwen2.5"],
        "-o",
        tmp_path / "out",
        "--objective",
        "chat",
        "--chat-template",
        template,
        "--assistant-span",
        span,
    )
    assert result.returncode == 0, result.stderr
    totals = json.loads((tmp_path / "out" / "manifest.json").read_text())["totals"]
    assert totals["skipped_by_reason"] == {"content_not_found": 1} and totals["documents_written"] == 1
    assert "Traceback" not in result.stderr


def test_best_fit_packs_whole_conversations_apart(tokenizers_dir, tmp_path):
    records = conversations(400, "chatml-generation", seed=3)
    data = write_jsonl(records, tmp_path / "c.jsonl")
    summary = run_transform(
        [data],
        tokenizers_dir["chatml-generation"],
        tmp_path / "packed",
        objective="chat",
        seq_len=1024,
        output_format="parquet",
    )
    run_transform(
        [data], tokenizers_dir["chatml-generation"], tmp_path / "single", objective="chat", packing="none", seq_len=1024
    )
    _, singles, single_labels = _rows(tmp_path / "single")
    table = pq.read_table(sorted((tmp_path / "packed").glob("*.parquet")))
    ids, labels, segments = (np.array(table[c].to_pylist()) for c in ("input_ids", "labels", "segment_ids"))
    assert summary.manifest["totals"]["documents_split"] == 0
    pieces = sorted(
        (tuple(r[s == k]), tuple(lab[s == k]))
        for r, lab, s in zip(ids, labels, segments)
        for k in range(1, s.max() + 1)
    )
    assert pieces == sorted((tuple(a), tuple(b)) for a, b in zip(singles, single_labels))
    assert np.all(labels[segments == 0] == IGNORE)
    assert verify_output(tmp_path / "packed").ok


def test_the_same_bytes_whatever_the_workers(tokenizers_dir, tmp_path):
    data = write_jsonl(conversations(600, "llama3", seed=5), tmp_path / "c.jsonl")
    common = dict(objective="chat", seq_len=512, partition_size="64KB")
    run_transform([data], tokenizers_dir["llama3"], tmp_path / "one", **common)
    run_transform([data], tokenizers_dir["llama3"], tmp_path / "two", workers=2, pool="processes", **common)
    one = {p.name: p.read_bytes() for p in (tmp_path / "one").glob("part-*")}
    assert len(one) > 1 and one == {p.name: p.read_bytes() for p in (tmp_path / "two").glob("part-*")}


def test_plain_text_and_text_key_are_refused_in_one_line(tokenizers_dir, tmp_path):
    text = tmp_path / "plain.txt"
    text.write_text("just text\n")
    result = run_cli("transform", text, "-t", tokenizers_dir["llama3"], "-o", tmp_path / "o", "--objective", "chat")
    assert result.returncode == 1 and "conversations are JSON records" in result.stderr
    result = run_cli(
        "transform",
        text,
        "-t",
        tokenizers_dir["llama3"],
        "-o",
        tmp_path / "o",
        "--objective",
        "chat",
        "--text-key",
        "body",
    )
    assert result.returncode == 1 and "--messages-key" in without_warnings(result.stderr)


def test_sentencepiece_and_tiktoken_need_a_template_and_then_work(sample_tokenizer, tmp_path):
    data = write_jsonl(conversations(50, "mistral", seed=2), tmp_path / "c.jsonl")
    result = run_cli("transform", data, "-t", sample_tokenizer, "-o", tmp_path / "o", "--objective", "chat")
    assert result.returncode == 1 and "--chat-template" in result.stderr
    summary = run_transform(
        [data],
        sample_tokenizer,
        tmp_path / "sp",
        objective="chat",
        packing="none",
        chat_template=str(TEMPLATES / "mistral.jinja"),
    )
    _, ids, labels = _rows(tmp_path / "sp")
    assert summary.manifest["totals"]["documents_written"] == len(ids) > 0
    for row, label in zip(ids, labels):
        assert row[0] == summary.manifest["special_tokens"]["ids"].get("bos", row[0])
        assert np.any(label != IGNORE) and np.all((label == IGNORE) | (label == row))


def test_parquet_conversations_read_like_json_lines(tokenizers_dir, tmp_path):
    import pyarrow as pa

    records = conversations(100, "qwen2.5", seed=8)
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "c.parquet")
    write_jsonl(records, tmp_path / "c.jsonl")
    run_transform([tmp_path / "c.parquet"], tokenizers_dir["qwen2.5"], tmp_path / "pq", objective="chat")
    run_transform([tmp_path / "c.jsonl"], tokenizers_dir["qwen2.5"], tmp_path / "js", objective="chat")
    assert _rows(tmp_path / "pq")[1] and all(
        np.array_equal(a, b) for a, b in zip(_rows(tmp_path / "pq")[1], _rows(tmp_path / "js")[1])
    )


def test_unknown_template_file_is_one_line(tokenizers_dir, tmp_path):
    with pytest.raises(ObjcliError, match="--chat-template"):
        run_transform(
            [write_jsonl([], tmp_path / "e.jsonl")],
            tokenizers_dir["qwen2.5"],
            tmp_path / "o",
            objective="chat",
            chat_template=str(tmp_path / "missing.jinja"),
        )


@st.composite
def _conversation_offsets(draw):
    """Token offsets as tokenizers report them (ascending, gaps where characters were dropped,
    empty tokens) and character spans over them, for several conversations."""
    conversations = []
    for _ in range(draw(st.integers(1, 4))):
        position, offsets = 0, []
        for _ in range(draw(st.integers(1, 12))):
            position += draw(st.sampled_from([0, 0, 0, 1, 2]))  # a gap
            width = draw(st.integers(0, 4))
            offsets.append((position, position + width))
            position += width
        text_length = position + draw(st.integers(0, 2))
        cuts = sorted(draw(st.lists(st.integers(0, text_length), min_size=0, max_size=6)))
        spans = [(a, b) for a, b in zip(cuts[::2], cuts[1::2])]
        conversations.append((offsets, spans, text_length))
    return conversations


def _flatten(conversations):
    """Flat arrays in the batch's coordinate (the texts joined end to end), as chat_encode gives them."""
    shifts = np.concatenate([[0], np.cumsum([n for _, _, n in conversations])]).astype(np.int64)
    starts = np.array([x + shifts[k] for k, (o, _, _) in enumerate(conversations) for x, _ in o], np.int64)
    ends = np.array([y + shifts[k] for k, (o, _, _) in enumerate(conversations) for _, y in o], np.int64)
    offsets = np.concatenate([[0], np.cumsum([len(o) for o, _, _ in conversations])]).astype(np.int64)
    owner = np.array([k for k, (_, s, _) in enumerate(conversations) for _ in s], np.int64)
    a = np.array([x + shifts[k] for k, (_, s, _) in enumerate(conversations) for x, _ in s], np.int64)
    b = np.array([y + shifts[k] for k, (_, s, _) in enumerate(conversations) for _, y in s], np.int64)
    return starts, ends, offsets, owner, a, b


@settings(max_examples=300, deadline=None)
@given(_conversation_offsets())
def test_generation_spans_map_to_tokens_as_transformers_maps_them(conversations):
    starts, ends, offsets, owner, a, b = _flatten(conversations)
    first, last, kept = span_tokens(starts, ends, offsets, owner, a, b)
    mask = mark_ranges(len(starts), first[kept], last[kept])
    expected = [m for o, s, _ in conversations for m in assistant_mask_reference(o, s)]
    assert mask.astype(int).tolist() == expected


@settings(max_examples=300, deadline=None)
@given(_conversation_offsets())
def test_content_spans_cover_the_tokens_that_overlap_them(conversations):
    starts, ends, offsets, owner, a, b = _flatten(conversations)
    first, last, kept = overlapping_tokens(starts, ends, offsets, owner, a, b)
    mask = mark_ranges(len(starts), first[kept], last[kept])
    expected = [m for o, s, _ in conversations for m in overlap_mask_reference(o, s)]
    assert mask.astype(int).tolist() == expected


def test_stats_report_supervised_tokens_per_row(tokenizers_dir, tmp_path):
    from objcli.commands.stats import compute_stats

    data = write_jsonl(conversations(120, "qwen2.5", seed=4), tmp_path / "c.jsonl")
    run_transform([data], tokenizers_dir["qwen2.5"], tmp_path / "out", objective="chat", packing="none")
    _, _, labels = _rows(tmp_path / "out")
    per_row = np.array([np.sum(label != IGNORE) for label in labels])
    d = compute_stats(tmp_path / "out")["supervised_per_row"]
    assert (d["min"], d["max"], d["rows_without"]) == (per_row.min(), per_row.max(), 0)
    assert d["median"] == int(np.percentile(per_row, 50, method="lower"))


@pytest.mark.parametrize("family", [f for f, spec in FAMILIES.items() if spec[1]])
def test_offsets_from_token_bytes_equal_the_library_offsets(family, tokenizers_dir):
    """The fast path (the run's engine, spans from token bytes) against tokenizers' own encode and
    offsets, on ASCII and non-ASCII batches, texts of special tokens only, and an empty text."""
    from objcli.tokenizers import open_tokenizer
    from objcli.tokenizers.chat_encode import encode_with_library

    tokenizer = open_tokenizer(tokenizers_dir[family])
    specials = FAMILIES[family][2]
    texts = [json.dumps(r["messages"], ensure_ascii=False) for r in conversations(200, family, seed=9)]
    for batch in (texts, [t.encode("ascii", "ignore").decode() for t in texts], [specials[0] + specials[-1], "", "x"]):
        fast = tokenizer.encode_chat(batch, lambda parts: tokenizer.encode(parts))
        library = encode_with_library(tokenizer._chat_library, batch)
        for got, expected in zip(fast, library):
            assert np.array_equal(got, expected)


def test_strftime_now_gives_the_fixed_template_date(tokenizers_dir, tmp_path):
    """Templates that print today's date (Llama 3.1's) give the same bytes on any day."""
    template = tmp_path / "dated.jinja"
    template.write_text(
        "{% for m in messages %}<|im_start|>{{ m.role }} {{ strftime_now('%d %b %Y') }}\\n"
        "{{ m.content }}<|im_end|>\\n{% endfor %}"
    )
    records = [{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}]
    _, ids, _ = _one_run(
        tokenizers_dir["qwen2.5"], records, tmp_path, chat_template=str(template), template_date="2031-02-03"
    )
    hf = transformers.AutoTokenizer.from_pretrained(str(tokenizers_dir["qwen2.5"].parent))
    assert "user 03 Feb 2031" in hf.decode(ids[0].tolist())


def test_hostile_templates_are_counted_skips_or_one_line_errors(tokenizers_dir, tmp_path):
    """A template that hits the sandbox's limits is a counted template_error (all records: one line);
    one that never writes the assistant's content skips every record (one line), never an empty mask."""
    records = [{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "the answer"}]}] * 3
    data = write_jsonl(records, tmp_path / "c.jsonl")
    cases = {
        "range.jinja": ("{% for i in range(10**7) %}x{% endfor %}", "every record"),
        "silent.jinja": ("{% for m in messages %}<|im_start|>{{ m.role }}<|im_end|>{% endfor %}", "content_not_found"),
        "broken.jinja": ("{% for m in messages %}{{ m.content", "fix the template"),
    }
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        result = run_cli(
            "transform",
            data,
            "-t",
            tokenizers_dir["qwen2.5"],
            "-o",
            tmp_path / name.split(".")[0],
            "--objective",
            "chat",
            "--chat-template",
            tmp_path / name,
        )
        error = without_warnings(result.stderr)
        assert result.returncode == 1 and error.startswith("Error: ") and error.count("\n") == 1, (name, error)
        assert message in error and "Traceback" not in result.stderr, (name, error)


def test_a_chat_template_jinja_beside_the_tokenizer_is_found(tokenizers_dir, tmp_path):
    """Newer checkpoints keep the template in chat_template.jinja, not in tokenizer_config.json."""
    import shutil

    folder = tmp_path / "split"
    shutil.copytree(tokenizers_dir["qwen2.5"].parent, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "chat_template.jinja").write_text(config.pop("chat_template"))
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    records = [{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "the model"}]}]
    _, apart, _ = _one_run(folder / "tokenizer.json", records, tmp_path, "apart")
    _, inside, _ = _one_run(tokenizers_dir["qwen2.5"], records, tmp_path, "inside")
    assert apart[0].tolist() == inside[0].tolist()


def test_the_sandbox_remembers_each_verdict_and_gives_jinjas_own():
    """The chat sandbox asks Jinja's immutable sandbox once per (type, attribute) and gives the same
    verdict every time after: safe reads stay allowed, mutating methods, underscores and internals
    stay refused, whichever order they are first asked in."""
    from datetime import datetime

    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from objcli.tokenizers.jinja_sandbox import chat_environment

    def generator():
        yield 1

    objects = [[1], {"a": 1}, "text", (1,), {1}, generator(), generator, int, jinja2.utils.Namespace(), b"x"]
    names = [
        "append",
        "update",
        "pop",
        "strip",
        "items",
        "__class__",
        "_hidden",
        "mro",
        "gi_frame",
        "__globals__",
        "add",
        "count",
        "keys",
        "func_code",
        "upper",
        "real",
        "decode",
    ]
    reference, ours = ImmutableSandboxedEnvironment(), chat_environment(datetime(2026, 1, 1))
    for order in (names, names[::-1]):
        for obj in objects:
            for name in order:
                value = getattr(obj, name, None)
                assert ours.is_safe_attribute(obj, name, value) == reference.is_safe_attribute(obj, name, value), (
                    obj,
                    name,
                )
    template = ours.from_string("{{ messages.append(1) }}")
    for _ in range(2):  # refused the first time and every time after
        with pytest.raises(jinja2.exceptions.SecurityError):
            template.render(messages=[])


@pytest.mark.parametrize("family", [f for f, spec in FAMILIES.items() if spec[1]])
def test_chat_on_the_prerelease_writes_the_stable_releases_bytes(family, tokenizers_dir, tmp_path):
    """With tokenizers 1.0 the library reads special-token texts as the tokens itself (one call a
    batch, spans from the tokens' bytes); 0.x's path splits at them. Same shards, byte for byte, on
    conversations whose text spells special tokens."""
    import subprocess
    import sys

    from runs import prerelease_env

    data = write_jsonl(conversations(300, family, seed=21), tmp_path / "c.jsonl")
    common = [str(data), "-t", str(tokenizers_dir[family]), "--objective", "chat", "--workers", "2", "-q"]
    run_transform([data], tokenizers_dir[family], tmp_path / "stable", objective="chat", workers=2)
    run = subprocess.run(
        [sys.executable, "-m", "objcli", "transform", *common, "-o", str(tmp_path / "fast")],
        env=prerelease_env(),
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    fast, stable = (json.loads((tmp_path / name / "manifest.json").read_text()) for name in ("fast", "stable"))
    assert fast["tokenizer"]["engine"]["version"].startswith("1.") and not stable["tokenizer"]["engine"][
        "version"
    ].startswith("1.")
    assert [s["sha256"] for s in fast["shards"]] == [s["sha256"] for s in stable["shards"]]
    assert fast["totals"]["documents_written"] > 250


def test_keys_whose_value_is_null_are_dropped_as_transformers_drops_them(tokenizers_dir, tmp_path):
    """OpenAI's exports write "name": null, "tool_calls": null; a template that asks whether a key
    is defined must see them absent, in every message of the record (and none of the others)."""
    template = tmp_path / "defined.jinja"
    template.write_text(
        "{% for m in messages %}<|im_start|>{{ m.role }}{% if m.name is defined %}[{{ m.name }}]"
        "{% endif %}: {{ m.content }}<|im_end|>\n{% endfor %}"
    )
    messages = [
        {"role": "user", "content": "q", "name": None},
        {"role": "assistant", "content": "a", "name": "bot"},
        {"role": "user", "content": "r"},
        {"role": "assistant", "content": "b", "tool_calls": None, "name": None},
    ]
    _, ids, _ = _one_run(tokenizers_dir["qwen2.5"], [{"messages": messages}], tmp_path, chat_template=str(template))
    hf = transformers.AutoTokenizer.from_pretrained(str(tokenizers_dir["qwen2.5"].parent))
    assert (
        hf.decode(ids[0].tolist()) == "<|im_start|>user: q<|im_end|>\n<|im_start|>assistant[bot]: a<|im_end|>\n"
        "<|im_start|>user: r<|im_end|>\n<|im_start|>assistant: b<|im_end|>\n"
    )
    assert (
        ids[0].tolist()
        == hf.apply_chat_template(messages, chat_template=template.read_text(), tokenize=True, return_dict=True)[
            "input_ids"
        ]
    )


@pytest.mark.parametrize("template, absent", [("qwen2.5", "<|im_start|>, <|im_end|>"), ("gemma", "<start_of_turn>")])
def test_a_template_writing_markers_the_tokenizer_lacks_is_said_once(template, absent, tmp_path):
    """Issue 53: a Qwen or Gemma template over another model's tokenizer wrote each marker as several
    ordinary pieces, with no word said. The markers a template writes are named once, before the run;
    a template over its own tokenizer (every marker a special token) says nothing."""
    from paths import SAMPLE_DATA

    records = [{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}]
    data = write_jsonl(records, tmp_path / "chat.jsonl")
    args = ["transform", data, "-t", SAMPLE_DATA / "llama-style", "--objective", "chat", "--seq-len", "128",
            "--chat-template", TEMPLATES / f"{template}.jinja", "-o", tmp_path / "o"]  # fmt: skip
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "has no special token for" in line]
    assert len(lines) == 1 and absent in lines[0] and "<|begin_of_text|>" not in lines[0]
    assert "has no special token for" not in run_cli(*args).stderr  # nothing to do: nothing said


@pytest.mark.parametrize("family", ["llama3", "gemma"])
def test_a_template_over_its_own_tokenizer_says_nothing_of_markers(family, tokenizers_dir, tmp_path):
    records = [{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}]
    data = write_jsonl(records, tmp_path / "chat.jsonl")
    own = run_cli("transform", data, "-t", tokenizers_dir[family], "--objective", "chat", "-o", tmp_path / "o")
    assert own.returncode == 0 and "has no special token for" not in own.stderr, own.stderr
