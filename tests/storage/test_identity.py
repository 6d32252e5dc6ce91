"""A run's identity is everything that changes its bytes (issue 38): each file a tokenizer kind reads
beside its main file, and a chat template file, edited in turn, is noticed by a rerun (refused, naming
it), --resume, --append (refused, the output left as it was), merge (refused) and verify (named);
--overwrite rebuilds it to the bytes a fresh run writes."""

import json
import shutil

import pytest
from chat_data import TEMPLATES, build_tokenizer, conversations, write_jsonl
from runs import SAMPLE, folder_bytes, run_cli

pytest.importorskip("tokenizers")


def _edit_template(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def _edit_config(folder, **changes):
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    for key, change in changes.items():
        config[key] = change(config.get(key))
    config_path.write_text(json.dumps(config, indent=1))


def _chat_family(folder, family="llama3"):
    build_tokenizer(family, folder / "tok")
    (folder / "in").mkdir()
    (folder / "more").mkdir()
    write_jsonl(conversations(12, family), folder / "in" / "a.jsonl")
    write_jsonl(conversations(5, family, seed=3), folder / "more" / "b.jsonl")
    return folder / "tok", ["--objective", "chat"]


def _prose(folder):
    lines = (SAMPLE / "prose.jsonl").read_text().splitlines(keepends=True)
    (folder / "in").mkdir(parents=True)
    (folder / "more").mkdir(parents=True)
    (folder / "in" / "a.jsonl").write_text("".join(lines[:30]))
    (folder / "more" / "b.jsonl").write_text("".join(lines[30:40]))


def template_in_a_file(folder):
    tokenizer, args = _chat_family(folder, "mistral")
    shutil.copy(TEMPLATES / "mistral.jinja", folder / "t.jinja")
    return (
        tokenizer,
        [*args, "--chat-template", str(folder / "t.jinja")],
        lambda: _edit_template(folder / "t.jinja", "[INST]", "[INST]!"),
        "t.jinja",
    )


def template_in_the_config(folder):
    tokenizer, args = _chat_family(folder)
    return (
        tokenizer,
        args,
        lambda: _edit_config(
            folder / "tok", chat_template=lambda t: t.replace("<|end_header_id|>", "<|end_header_id|>:")
        ),
        "tokenizer_config.json",
    )


def template_beside_the_tokenizer(folder):
    tokenizer, args = _chat_family(folder, "qwen2.5")
    template = json.loads((tokenizer / "tokenizer_config.json").read_text())["chat_template"]
    _edit_config(tokenizer, chat_template=lambda t: None)
    (tokenizer / "chat_template.jinja").write_text(template)
    return (
        tokenizer,
        args,
        lambda: _edit_template(tokenizer / "chat_template.jinja", "You are Qwen", "You are Qwen!"),
        "chat_template.jinja",
    )


def eos_in_the_config(folder):
    _prose(folder)
    build_tokenizer("llama3", folder / "tok")
    return (
        folder / "tok",
        [],
        lambda: _edit_config(folder / "tok", eos_token=lambda _: "<|end_of_text|>"),
        "tokenizer_config.json",
    )


def bos_in_the_config(folder):
    _prose(folder)
    build_tokenizer("llama3", folder / "tok")
    return (
        folder / "tok",
        ["--bos"],
        lambda: _edit_config(folder / "tok", bos_token=lambda _: "<|start_header_id|>"),
        "tokenizer_config.json",
    )


def pad_in_the_config(folder):
    _prose(folder)
    build_tokenizer("llama3", folder / "tok")
    _edit_config(folder / "tok", pad_token=lambda _: "<|end_of_text|>")
    return (
        folder / "tok",
        ["--packing", "best-fit"],
        lambda: _edit_config(folder / "tok", pad_token=lambda _: "<|end_header_id|>"),
        "tokenizer_config.json",
    )


def specials_in_a_tiktoken_side_file(folder):
    from bpe_files import write_rank_file

    from objcli.tokenizers.bpe_spec import FROM_BYTE_CHARS

    _prose(folder)
    document = json.loads((SAMPLE / "llama-style" / "tokenizer.json").read_text())
    specials = {t["content"]: t["id"] for t in document["added_tokens"]}
    ranks = {
        p.translate(FROM_BYTE_CHARS).encode("latin-1"): r
        for p, r in document["model"]["vocab"].items()
        if p not in specials
    }
    rank_file = write_rank_file(ranks, folder / "tt" / "sample.tiktoken")
    side = rank_file.with_name(rank_file.name + ".json")
    spec = {
        "pattern": document["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"],
        "special_tokens": specials,
        "bos": None,
        "eos": "<|end_of_text|>",
    }
    side.write_text(json.dumps(spec))
    return (
        rank_file,
        [],
        lambda: side.write_text(json.dumps({**spec, "eos": "<|reserved_special_token_0|>"})),
        "sample.tiktoken",
    )


def config_added_beside(folder):
    """A tokenizer.json run without a config, then a tokenizer_config.json put beside it (issue 50)."""
    import shutil

    _prose(folder)
    shutil.copytree(SAMPLE / "llama-style", folder / "tok")
    (folder / "tok" / "tokenizer_config.json").unlink()
    return (
        folder / "tok" / "tokenizer.json",
        [],
        lambda: (folder / "tok" / "tokenizer_config.json").write_text(
            json.dumps({"eos_token": "<|reserved_special_token_0|>"})
        ),
        "tokenizer_config.json",
    )


CASES = [
    config_added_beside,
    template_in_a_file,
    template_in_the_config,
    template_beside_the_tokenizer,
    eos_in_the_config,
    bos_in_the_config,
    pad_in_the_config,
    specials_in_a_tiktoken_side_file,
]


def _shards(folder):
    return {k: v for k, v in folder_bytes(folder).items() if k != "manifest.json" and not k.startswith(".")}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_an_edited_file_beside_the_tokenizer_is_noticed_everywhere(case, tmp_path):
    tokenizer, args, edit, name = case(tmp_path)
    out = tmp_path / "out"
    command = ["transform", tmp_path / "in", "-t", tokenizer, "--seq-len", "256", *args, "-o", out, "-q"]
    first = run_cli(*command)
    assert first.returncode == 0, first.stderr
    assert run_cli(*command).stderr.count("nothing to do") == 1  # unchanged: the same run
    shutil.copytree(out, tmp_path / "before")
    held = folder_bytes(out)
    edit()

    rerun = run_cli(*command)
    assert rerun.returncode == 1 and "changed:" in rerun.stderr and name in rerun.stderr, rerun.stderr
    assert run_cli(*command, "--resume").returncode == 1
    appended = run_cli("transform", tmp_path / "more", "-o", out, "--append")
    assert appended.returncode == 1 and name in appended.stderr and "left as it was" in appended.stderr
    assert folder_bytes(out) == held
    verify = run_cli("verify", out)
    assert verify.returncode == 1 and name in verify.stdout + verify.stderr

    rebuilt = run_cli(*command, "--overwrite")
    assert rebuilt.returncode == 0, rebuilt.stderr
    fresh = run_cli(*command[:-3], "-o", tmp_path / "fresh", "-q")
    assert fresh.returncode == 0 and _shards(out) == _shards(tmp_path / "fresh")
    assert _shards(out) != _shards(tmp_path / "before")  # the edit changes the bytes: a stale output was at stake
    recorded = json.loads((out / "manifest.json").read_text())["identity"]
    assert any(entry["path"].endswith(name) for entry in recorded.values())
    assert run_cli("verify", out).returncode == 0
    merged = run_cli("merge", tmp_path / "before", out, "-o", tmp_path / "merged")
    assert merged.returncode == 1 and "differs" in merged.stderr, merged.stderr


def test_an_output_whose_reshard_stopped_past_its_commit_names_the_command_that_finishes_it(tmp_path):
    out = tmp_path / "out"
    assert (
        run_cli(
            "transform",
            SAMPLE / "prose.jsonl",
            "-t",
            SAMPLE / "tokenizer.model",
            "--seq-len",
            "128",
            "-o",
            out,
            "--shard-size",
            "300",
            "-q",
        ).returncode
        == 0
    )
    stopped = run_cli("reshard", out, "--shard-size", "700", env={"OBJCLI_CRASH_AT": "reshard-moved"})
    assert stopped.returncode != 0
    for command in (
        ["verify", out],
        ["inspect", out],
        ["transform", SAMPLE / "prose.jsonl", "-t", SAMPLE / "tokenizer.model", "--seq-len", "128", "-o", out],
    ):
        result = run_cli(*command)
        assert result.returncode == 1 and f"objcli reshard {out} --shard-size 700" in result.stderr, result.stderr
    assert run_cli("reshard", out, "--shard-size", "700").returncode == 0
    assert run_cli("verify", out).returncode == 0


def test_a_template_that_writes_without_bound_is_a_counted_skip(tmp_path):
    template = tmp_path / "big.jinja"
    template.write_text(
        "{% for m in messages %}{% for i in range(100000) %}{{ m['content'] * 1000 }}{% endfor %}"
        "{{ m['content'] }}{% endfor %}"
    )
    small = tmp_path / "small.jinja"
    small.write_text("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}")
    records = [
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
        {"messages": [{"role": "user", "content": "x" * 20}, {"role": "assistant", "content": "y"}]},
    ]
    write_jsonl(records, tmp_path / "c.jsonl")
    for repeat in (
        "{{ m['content'] * 100000000 }}",
        "{% for i in range(100000) %}{{ m['content'] * 1000 }}{% endfor %}",
    ):
        template.write_text(
            "{% for m in messages %}{% if m['role'] == 'assistant' and m['content'] == 'y' %}"
            + repeat
            + "{% endif %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        )
        result = run_cli(
            "transform",
            tmp_path / "c.jsonl",
            "-t",
            SAMPLE / "tokenizer.model",
            "--objective",
            "chat",
            "--chat-template",
            template,
            "-o",
            tmp_path / "o",
            "--overwrite",
            "--loss-on",
            "all",
        )
        assert result.returncode == 0, result.stderr
        totals = json.loads((tmp_path / "o" / "manifest.json").read_text())["totals"]
        assert totals["skipped_by_reason"] == {"template_error": 1} and totals["documents_written"] == 1
