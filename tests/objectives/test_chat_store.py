"""A chat store (issue 51, point 3): ``objcli tokenize --chat`` renders each record with the chat
template once and keeps its conversations' ids and supervised spans; ``transform STORE --objective
chat`` re-cuts, re-masks and re-packs them for any ``--seq-len``, ``--packing``, ``--loss-on`` and
``--overlong`` with the same shard bytes and accounting as the run from the conversations, on five
real chat formats, records the template cannot render, several files and partitions."""

import json
import shutil

import numpy as np
import pytest
from chat_data import FAMILIES, build_tokenizer, conversations, write_jsonl
from runs import folder_bytes, manifest_json, run_cli, run_tokenize, run_transform, shard_files, without_warnings

from objcli.commands.trace import trace, trace_lines
from objcli.commands.verify import verify_output
from objcli.errors import ObjcliError
from objcli.formats.store import read_store_table, table_documents
from objcli.objectives import REGISTRY
from objcli.recipe import config_from_values
from objcli.transform import transform

READING = {"partition_size": "24KiB", "batch_size": "6KiB"}
# How each family's store is rendered: the default, content spans, one example per assistant turn.
RENDERING = {"llama3": {"assistant_span": "content"}, "mistral": {"turns": "each"}}
# What a derived run chooses for itself: each is run from the store and from the text.
DERIVED = [
    {"seq_len": 256},
    {"seq_len": 48, "overlong": "drop", "loss_on": "last-assistant"},
    {"seq_len": 128, "loss_on": "all"},
]
BAD = [[1, 2], {"messages": "not a list"}, {"messages": [{"role": "wizard", "content": "x"}]}, {"prompt": "only"}]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    """Per family: its tokenizer and a folder of two files of conversations with bad records."""
    root = tmp_path_factory.mktemp("chat-store")
    made = {}
    for k, family in enumerate(FAMILIES):
        folder = root / family / "data"
        folder.mkdir(parents=True)
        records = conversations(260, family, seed=40 + k)
        write_jsonl(records[:150] + BAD + records[150:200], folder / "a.jsonl")
        write_jsonl(records[200:], folder / "b.jsonl")
        made[family] = (build_tokenizer(family, root / family / "tokenizer"), folder)
    return made


def _values(tokenizer, inputs, out, **options) -> dict:
    return {"inputs": [str(i) for i in inputs], "tokenizer": str(tokenizer), "output": str(out), **options}


def _tokenize(tokenizer, inputs, out, **options):
    """``objcli tokenize --chat`` as the library runs it."""
    return run_tokenize(inputs, tokenizer, out, "conversations", workers=2, objective="chat", **READING, **options)


def _run(tokenizer, inputs, out, **options):
    return run_transform(inputs, tokenizer, out, objective="chat", **options)


@pytest.fixture(scope="module")
def stores(corpora, tmp_path_factory):
    """Per family: a chat store of its corpus, rendered as RENDERING says, made with --provenance."""
    root = tmp_path_factory.mktemp("chat-stores")
    made = {}
    for family, (tokenizer, folder) in corpora.items():
        _tokenize(tokenizer, [folder], root / family, provenance=True, **RENDERING.get(family, {}))
        made[family] = root / family
    return made


def _same(family, corpora, stores, tmp_path, **options) -> dict:
    tokenizer, folder = corpora[family]
    rendering = RENDERING.get(family, {})
    text = _run(tokenizer, [folder], tmp_path / "text", **READING, **rendering, **options)
    derived = _run(tokenizer, [stores[family]], tmp_path / "derived", **options)
    assert shard_files(tmp_path / "text") == shard_files(tmp_path / "derived") != {}
    assert text.manifest["totals"] == derived.manifest["totals"]
    assert derived.manifest["inputs"][0]["format"] == "store"
    return derived.manifest


@pytest.mark.parametrize("packer", REGISTRY.named("chat").packers(REGISTRY.named("chat").options_type()))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_packer_and_loss_from_a_chat_store_writes_the_text_runs_bytes(family, packer, corpora, stores, tmp_path):
    for k, options in enumerate(DERIVED):
        manifest = _same(family, corpora, stores, tmp_path / str(k), packing=packer, **options)
        skipped = manifest["totals"]["skipped_by_reason"]
        assert skipped["not_an_object"] == 1 and skipped["no_messages"] == 1 and skipped["unknown_role"] == 1
        if options.get("overlong") == "drop":
            assert skipped["overlong"] > 0  # the run from the store cut what the text run cut


def test_the_store_keeps_what_rendering_gives_and_verifies(corpora, stores, tmp_path):
    """A record per row (those the template cannot render too, kept so a derived run counts them where
    the text run does); 2 bytes a token; the rendering and the template in its manifest."""
    manifest = manifest_json(stores["mistral"])
    totals = manifest["totals"]
    assert totals["documents_read"] == 264 and totals["skipped_by_reason"] == {"not_an_object": 1}
    assert totals["documents_written"] == 263  # the other bad records are stored, with why they render nothing
    unrendered = {k.removeprefix("not_rendered:"): v for k, v in totals.items() if k.startswith("not_rendered:")}
    assert unrendered["no_messages"] == unrendered["prompt_only"] == unrendered["unknown_role"] == 1
    assert unrendered["template_error"] > 0  # Mistral's template refuses a system prompt
    derived = _run(corpora["mistral"][0], [stores["mistral"]], tmp_path / "derived", seq_len=4096)
    skipped = derived.manifest["totals"]["skipped_by_reason"]
    assert {reason: skipped[reason] for reason in unrendered} == unrendered  # each counted where the text run does
    # Nothing is encoded: the reference engine, no fast engine built and probed (seconds for a large vocabulary).
    engine = derived.manifest["tokenizer"]["engine"]
    assert engine["name"] == "tokenizers" and engine["probe"].startswith("not needed: no text is encoded")
    section = manifest["token_store"]
    assert section["tokenized"] == "conversations" and section["chat"]["turns"] == "each"
    assert section["bytes"]["tokens"] == 2 * totals["tokens"]
    assert "tokenizer config" in manifest["identity"]  # the template it was rendered with, by sha256
    assert verify_output(stores["mistral"]).ok


def test_splits_shuffles_and_provenance_from_a_chat_store(corpora, stores, tmp_path):
    """--split and --shuffle-documents place each record where the text run does; --provenance
    writes the text run's provenance files, and trace reaches the record's JSON."""
    options = {"seq_len": 200, "split": "val=20%", "shuffle_documents": "8KiB", "provenance": True}
    manifest = _same("llama3", corpora, stores, tmp_path, **options)
    assert {s["split"] for s in manifest["shards"]} == {"train", "val"}
    provenance = [name for name in folder_bytes(tmp_path / "derived") if name.endswith(".provenance")]
    assert provenance and all(
        folder_bytes(tmp_path / "text")[n] == folder_bytes(tmp_path / "derived")[n] for n in provenance
    )
    spans = trace(tmp_path / "derived", 0, "val")
    assert spans and all(s["file"].endswith(".jsonl") for s in spans)
    lines = trace_lines(tmp_path / "derived", 0, "val")  # the record's JSON, read from the store's inputs
    assert json.loads(lines[1])["messages"] and f"record {spans[0]['record']}" in lines[0]


def test_a_chat_store_takes_its_rendering_and_refuses_another(corpora, stores, tmp_path):
    """A derived run takes the store's rendering; one given otherwise, another template (by sha256),
    an objective other than chat, or chat from a store of documents is one line naming the fix."""
    tokenizer, folder = corpora["mistral"]
    template = tmp_path / "edited.jinja"
    template.write_text(json.loads(tokenizer.with_name("tokenizer_config.json").read_text())["chat_template"] + "\n")
    documents = tmp_path / "documents"
    (tmp_path / "prose.txt").write_text("the model answers what the user asks\nplease explain why\n")
    run_tokenize([tmp_path / "prose.txt"], tokenizer, documents)
    for store, options, message in [
        (stores["llama3"], {"turns": "each"}, "--turns each: the chat store .* --turns together"),
        (stores["mistral"], {"assistant_span": "content"}, "--assistant-span content: the chat store .* turn"),
        (stores["mistral"], {"eos": False}, "--no-eos: the chat store .* with --eos"),
        (
            stores["mistral"],
            {"chat_template": str(template)},
            r"rendered with chat template none \(the tokenizer.s own template\), and this run has .*edited.jinja",
        ),
        (stores["mistral"], {"objective": "clm"}, "holds rendered conversations, for --objective chat"),
        (documents, {}, "make a chat store: objcli tokenize ... --chat"),
    ]:
        values = {"objective": "chat", **options}
        with pytest.raises(ObjcliError, match=message):
            transform(config_from_values(_values(tokenizer, [store], tmp_path / "o", **values)), overwrite=True)


def test_tokenize_chat_on_the_command_line(corpora, tmp_path):
    """The options that render (--turns, --eos, …) belong to --chat; a prompt/completion pair's EOS is
    the store's; the summary line says how many records render nothing."""
    tokenizer, folder = corpora["llama3"]
    records = [{"prompt": f"say {k} :", "completion": f" the answer is {k} ."} for k in range(30)]
    data = write_jsonl(records + [{"prompt": "no completion"}], tmp_path / "pairs.jsonl")
    made = run_cli("tokenize", data, "-t", tokenizer, "-o", tmp_path / "store", "--chat", "--no-eos", "--bos")
    assert made.returncode == 0, made.stderr
    assert "31 documents read, 31 stored (1 prompt_only not rendered: a derived run skips them)" in made.stderr
    text = run_cli("transform", data, "-t", tokenizer, "--objective", "chat", "--no-eos", "--bos", "-o", tmp_path / "t")
    derived = run_cli("transform", tmp_path / "store", "--objective", "chat", "-o", tmp_path / "d")
    assert text.returncode == derived.returncode == 0, derived.stderr
    assert shard_files(tmp_path / "t") == shard_files(tmp_path / "d")
    assert manifest_json(tmp_path / "d")["config"]["eos"] is False  # taken from the store
    for args, message in [
        (["--turns", "each"], "--turns: applies to a chat store (objcli tokenize --chat)"),
        (["--chat", "--sentences", "prose"], "--chat and --sentences: a store holds one kind"),
    ]:
        refused = run_cli("tokenize", data, "-t", tokenizer, "-o", tmp_path / "x", *args)
        assert refused.returncode == 1 and message in refused.stderr
        assert without_warnings(refused.stderr).count("\n") == 1


@pytest.mark.heavy
def test_a_chat_store_appended_to_and_resharded_derives_the_text_runs_bytes(corpora, tmp_path):
    tokenizer, folder = corpora["qwen2.5"]
    reading = ["--partition-size", "24KiB", "--batch-size", "6KiB"]
    store = tmp_path / "store"
    assert run_cli("tokenize", folder / "a.jsonl", "-t", tokenizer, "-o", store, "--chat", *reading).returncode == 0
    added = run_cli("tokenize", folder / "b.jsonl", "-t", tokenizer, "-o", store, "--append")
    assert added.returncode == 0, added.stderr
    options = ["--objective", "chat", "--seq-len", "160"]
    assert (
        run_cli("transform", folder / "a.jsonl", "-t", tokenizer, "-o", tmp_path / "t", *options, *reading).returncode
        == 0
    )
    assert run_cli("transform", folder / "b.jsonl", "-t", tokenizer, "-o", tmp_path / "t", "--append").returncode == 0
    shutil.copytree(store, tmp_path / "recut")
    assert run_cli("reshard", tmp_path / "recut", "--shard-size", "8KB").returncode == 0
    for source in (store, tmp_path / "recut"):
        assert run_cli("transform", source, *options, "-o", tmp_path / f"{source.name}-d").returncode == 0
        assert shard_files(tmp_path / f"{source.name}-d") == shard_files(tmp_path / "t") != {}
    assert len(manifest_json(tmp_path / "recut")["shards"]) > len(manifest_json(store)["shards"])


def test_budgets_from_chat_stores_are_met_to_the_token(corpora, tmp_path):
    """Chat stores as --source count their conversations' tokens (what the template writes, nothing
    added): each source gets the most its budget allows in whole records, one record short at most."""
    tokenizer, folder = corpora["qwen2.5"]
    stored = {}
    for name in ("a", "b"):
        _tokenize(tokenizer, [folder / f"{name}.jsonl"], tmp_path / name)
        stored[name] = manifest_json(tmp_path / name)["totals"]["tokens"]
    # Part of one, a copy and a half of the other (budgets in thousands: a bare number is a share).
    budgets = {"a": stored["a"] // 2000 * 1000, "b": stored["b"] * 3 // 2000 * 1000}
    weights = ",".join(f"{name}={tokens // 1000}k" for name, tokens in budgets.items())
    sources = [f"{name}={tmp_path / name}" for name in budgets]
    summary = _run(tokenizer, [], tmp_path / "out", source=sources, weights=weights, seq_len=4096)
    mixture = summary.manifest["mixture"]
    assert {name: plan["counted_tokens"] for name, plan in mixture.items()} == stored
    shards = {s["files"][0]: s["tokens"] for s in summary.manifest["shards"]}
    written = dict.fromkeys(budgets, 0)
    for partition in summary.manifest["partitions"]:
        written[partition["source"]] += sum(shards[name] for name in partition["shards"])
    for name, tokens in written.items():
        longest = max(max(np.diff(table_documents(read_store_table(p))[1])) for p in (tmp_path / name).glob("*.store"))
        assert budgets[name] - longest < tokens <= budgets[name], (name, tokens, budgets[name])


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda m: m["token_store"]["chat"].pop("turns"), "missing required field `turns`"),
        (lambda m: m["token_store"]["chat"].update(turns=3), "Expected `str`, got `int`"),
        (lambda m: m["token_store"].update(render_failures=[]), "its render_failures do not name the reasons"),
    ],
)
def test_a_chat_store_manifest_edited_by_hand_is_one_line(edit, message, corpora, stores, tmp_path):
    shutil.copytree(stores["mistral"], tmp_path / "store")
    manifest = json.loads((tmp_path / "store" / "manifest.json").read_text())
    edit(manifest)
    (tmp_path / "store" / "manifest.json").write_text(json.dumps(manifest))
    done = run_cli("transform", tmp_path / "store", "--objective", "chat", "-o", tmp_path / "o")
    assert done.returncode == 1 and message in done.stderr and without_warnings(done.stderr).count("\n") == 1
