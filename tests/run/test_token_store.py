"""Tokenize once, derive every objective (issue 51): ``transform STORE`` writes the same shard bytes as
``transform TEXT`` with the same options and seed, for every objective × packer it takes (from the
registry) and the ordering options, on a corpus with bad records, long documents cut by
``--max-document-chars``, several files and several partitions. An objective that cuts text into
pieces of its own is refused in one line."""

import json
import shutil
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from objective_variants import variants
from runs import SAMPLE, TEXT_FORMATS, manifest_json, run_cli, run_tokenize, run_transform, shard_files

from objcli.commands.trace import trace
from objcli.commands.verify import verify_output
from objcli.errors import ObjcliError
from objcli.formats import whole_document_formats
from objcli.formats.store import crc32_from
from objcli.objectives import REGISTRY
from objcli.objectives.supply import Provides
from objcli.recipe import config_from_values
from objcli.transform import transform

SPM = SAMPLE / "tokenizer.model"
READING = {"partition_size": "32KiB", "batch_size": "8KiB", "max_document_chars": 3000}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Three files: prose JSON lines with bad records, code JSON lines, plain text (several partitions)."""
    folder = tmp_path_factory.mktemp("store-corpus")
    prose = (SAMPLE / "prose.jsonl").read_text().splitlines(keepends=True)
    bad = ['{"text": ""}\n', "{broken\n", '{"other": 1}\n', '{"text": 7}\n']
    (folder / "a.jsonl").write_text("".join(prose[:40] + bad + prose[40:80]))
    code = (SAMPLE / "code.jsonl").read_text().splitlines(keepends=True)[:25]
    (folder / "b.jsonl").write_text("".join(line for line in code if len(line) < 40_000))  # 18 files, 300 KB
    (folder / "c.txt").write_text("".join(json.loads(line)["text"].replace("\n", " ") + "\n" for line in prose[80:110]))
    return folder


def _run(inputs, out, **values):
    return run_transform(inputs, SPM, out, **values)


def _tokenize(inputs, out, kind: str = "documents", **reading):
    run_tokenize(inputs, SPM, out, kind, workers=2, **{**READING, **reading})
    return out


@pytest.fixture(scope="module")
def store(corpus, tmp_path_factory):
    return _tokenize([corpus], tmp_path_factory.mktemp("store") / "store")


@pytest.fixture(scope="module")
def sentence_store(corpus, tmp_path_factory):
    """Tokenized per sentence (``--sentences prose``), for the sentence objectives."""
    return _tokenize([corpus], tmp_path_factory.mktemp("store") / "sentences", "prose")


@pytest.fixture(scope="module")
def origins_stores(corpus, tmp_path_factory):
    """A store of whole documents and a per-sentence one, made with --provenance."""
    folder = tmp_path_factory.mktemp("store")
    return {kind: _tokenize([corpus], folder / kind, kind, provenance=True) for kind in ("documents", "prose")}


def _same(corpus, store, tmp_path, **options) -> dict:
    """The text run and the store run with these options: the same shard bytes and accounting."""
    text = _run([corpus], tmp_path / "text", **READING, **options)
    derived = _run([store], tmp_path / "derived", **options)
    assert shard_files(tmp_path / "text") == shard_files(tmp_path / "derived") != {}
    t, d = text.manifest["totals"], derived.manifest["totals"]
    assert t == d, (t, d)
    assert derived.manifest["inputs"][0]["format"] == "store"  # the manifest names the store it came from
    return derived.manifest


def _objective(config_values: dict):
    """The objective as the run builds it (whether it cuts each text into pieces of its own)."""
    from objcli.run.setup import set_up_objective

    config = config_from_values({"inputs": ["-"], "tokenizer": str(SPM), "output": "-", **config_values})
    return set_up_objective(config)[2]


def _combinations():
    """Every objective x packer; each objective's first packer by default and the rest with the heavy tests:
    a store and a text differ in the examples they give, which every packer packs alike."""
    for name, options in variants():
        packers = REGISTRY.named(name).packers(REGISTRY.named(name).options_type(**options))
        for i, packer in enumerate(packers):
            label = f"{name}-{'-'.join(map(str, options.values())) or 'default'}-{packer}"
            yield pytest.param(name, options, packer, id=label, marks=[pytest.mark.heavy] if i else [])


COMBINATIONS = list(_combinations())


@pytest.mark.parametrize("name, options, packer", COMBINATIONS)
def test_every_objective_and_packer_from_a_store_writes_the_text_runs_bytes(
    name, options, packer, corpus, store, sentence_store, tmp_path
):
    """Objectives that read documents' tokens from a store of whole documents, the sentence objectives
    from a per-sentence store, chat from a chat store (another file); document-level FIM refused."""
    run = {"objective": name, "packing": packer, "seq_len": 96, **options}
    if REGISTRY.named(name).reads(REGISTRY.named(name).options_type(**options)).records:
        run["chat_template"] = str(SAMPLE.parent / "tests" / "support" / "chat_templates" / "mistral.jinja")
    objective = _objective(run)
    sentences = objective.tokenizes_itself and hasattr(objective.options, "sentences")
    if objective.reads(objective.options).needs in (Provides.PAIRS, Provides.PROMPTS):  # a pair store, or none
        with pytest.raises(ObjcliError, match=r"objcli tokenize \.\.\. --preference|no store keeps them"):
            _run([store], tmp_path / "derived", **run)
        return
    if objective.reads(
        objective.options
    ).records:  # conversations: from a chat store (tests/objectives/test_chat_store.py)
        with pytest.raises(ObjcliError, match=r"make a chat store: objcli tokenize \.\.\. --chat"):
            _run([store], tmp_path / "derived", **run)
        return
    if objective.tokenizes_itself and not sentences:
        with pytest.raises(ObjcliError, match="run it from the text"):
            _run([store], tmp_path / "derived", **run)
        return
    if sentences:  # a store of whole documents names the tokenize option that makes the right one
        with pytest.raises(ObjcliError, match="objcli tokenize ... --sentences prose"):
            _run([store], tmp_path / "derived", **run)
    _same(corpus, sentence_store if sentences else store, tmp_path, **run)


def _provenance_params() -> list:
    """Every objective × packer of the registry (chat's from a chat store: test_chat_store.py); the default
    suite runs the first of each way a run records provenance (a document's tokens, examples cut from
    the documents joined, whole documents), the rest are slow."""
    params, kinds = [], set()
    for name, options in variants():
        objective = REGISTRY.named(name)
        if objective.reads(objective.options_type(**options)).records:
            continue
        kind = objective.provenance_of(objective.options_type(**options))
        for packer in objective.packers(objective.options_type(**options)):
            marks = () if kind not in kinds else (pytest.mark.slow,)
            kinds.add(kind)
            label = f"{name}-{'-'.join(map(str, options.values())) or 'default'}-{packer}"
            params.append(pytest.param(name, options, packer, marks=marks, id=label))
    return params


@pytest.mark.parametrize("name, options, packer", _provenance_params())
def test_provenance_from_a_store_is_the_text_runs_provenance(name, options, packer, corpus, origins_stores, tmp_path):
    """A store made with --provenance: a derived run with --provenance writes the text run's shards and
    provenance files, byte for byte (every span's file, record and characters), and trace reads it."""
    run = {"objective": name, "packing": packer, "seq_len": 96, **options}
    objective = _objective(run)
    run["provenance"] = True
    sentences = objective.tokenizes_itself and hasattr(objective.options, "sentences")
    if objective.tokenizes_itself and not sentences:
        return  # cuts characters of the text (document-level FIM): refused from any store, tested above
    manifest = _same(corpus, origins_stores["prose" if sentences else "documents"], tmp_path, **run)
    assert any(name.endswith(".provenance") for shard in manifest["shards"] for name in shard["files"])
    spans = trace(tmp_path / "derived", 0)
    assert spans and all(span["file"].startswith(str(corpus)) for span in spans)


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_every_format_from_a_store(fmt, corpus, store, tmp_path):
    packing = {"packing": "none"} if fmt in whole_document_formats() else {}
    _same(corpus, store, tmp_path, objective="clm", seq_len=128, output_format=fmt, **packing)


@pytest.mark.parametrize(
    "objective",
    [
        "clm",
        "mlm",
        pytest.param("span-corruption", marks=pytest.mark.slow),
        pytest.param("ul2", marks=pytest.mark.slow),
    ],
)
@pytest.mark.parametrize(
    "ordering",
    [
        {"split": "validation=10%,test=5%"},
        {"split": "test=7"},  # a count: the first pass over the store
        {"shuffle_documents": "32KiB"},
        {"shuffle_rows": True},
        {"shuffle_documents": "20KiB", "split": "validation=20%", "shuffle_rows": True, "seed": 7},
    ],
    ids=["split", "split-count", "shuffle-documents", "shuffle-rows", "all"],
)
def test_splits_and_shuffles_from_a_store(objective, ordering, corpus, store, tmp_path):
    manifest = _same(corpus, store, tmp_path, objective=objective, seq_len=96, **ordering)
    assert verify_output(tmp_path / "derived").ok
    if "split" in ordering:
        assert len(manifest["splits"]) == len(ordering["split"].split(",")) + 1


def _source_tokens(out) -> dict[str, int]:
    """Each source's tokens in the output: its partitions' shards' (padding not counted)."""
    manifest = manifest_json(out)
    shards = {s["files"][0]: s["tokens"] for s in manifest["shards"]}
    found: dict[str, int] = {}
    for partition in manifest["partitions"]:
        found[partition["source"]] = found.get(partition["source"], 0) + sum(shards[n] for n in partition["shards"])
    return found


@pytest.fixture(scope="module")
def two_stores(corpus, tmp_path_factory):
    """Long prose documents and short code ones: unequal lengths, where a count of documents misses."""
    root = tmp_path_factory.mktemp("two")
    return {name: _tokenize([corpus / f], root / name) for name, f in (("prose", "a.jsonl"), ("code", "b.jsonl"))}


@pytest.mark.parametrize("weights", ["prose=40k,code=25k", "prose=0.3,code=0.7", "prose=9k,code=150k"])
def test_budgets_and_shares_from_stores_are_met_to_the_token(two_stores, weights, tmp_path):
    """Stores count their tokens: a source gets the most tokens of its share or budget that whole
    documents give (one document short at most), where text sources only estimate theirs."""
    sources = [f"{name}={path}" for name, path in two_stores.items()]
    common = {"objective": "clm", "seq_len": 64, "remainder": "pad", "weights": weights}
    summary = _run([], tmp_path / "out", source=sources, **common)
    mixture = summary.manifest["mixture"]
    counted = {name: plan["counted_tokens"] for name, plan in mixture.items()}
    kind = "budget" if weights.endswith("k") else "share"
    wanted = {n: p[kind] if kind == "budget" else p[kind] * sum(counted.values()) for n, p in mixture.items()}
    longest = {name: max(np.diff(_stored_offsets(path))) + 1 for name, path in two_stores.items()}  # + its EOS
    for name, tokens in _source_tokens(tmp_path / "out").items():
        assert wanted[name] - longest[name] < tokens <= wanted[name], (name, tokens, wanted[name])
    assert summary.manifest["totals"]["tokens_dropped"] == 0 if "tokens_dropped" in summary.manifest["totals"] else True


def _stored_offsets(store) -> np.ndarray:
    from objcli.formats.store import read_store_table, table_documents

    return np.concatenate(
        [np.diff(table_documents(read_store_table(p))[1]) for p in sorted(store.glob("*.store"))]
    ).cumsum()


def test_max_epochs_caps_a_source_and_says_so(two_stores, corpus, tmp_path):
    sources = [f"{name}={path}" for name, path in two_stores.items()]
    done = run_cli(
        "transform", *(a for s in sources for a in ("--source", s)), "-t", SPM, "--weights", "prose=2000k,code=20k",
        "--max-epochs", "prose=2", "--seq-len", "64", "-o", tmp_path / "o",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "capped at --max-epochs prose=2" in done.stderr
    plan = manifest_json(tmp_path / "o")["mixture"]["prose"]
    stored = manifest_json(two_stores["prose"])["totals"]["documents_written"]
    assert plan["rate"] == 2 and plan["capped_from"] > 2 and plan["documents_written"] == 2 * stored
    bad = run_cli(
        "transform",
        "--source",
        sources[0],
        "--weights",
        "prose=1",
        "-t",
        SPM,
        "--max-epochs",
        "web=2",
        "-o",
        tmp_path / "x",
    )
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "--max-epochs web=2" in bad.stderr
    text = _run([], tmp_path / "text", source=[f"prose={corpus / 'a.jsonl'}"], weights="prose=1", **READING)
    assert "counted_tokens" in text.manifest["mixture"]["prose"]  # text sources are counted too (issue 72)


def test_the_store_is_two_bytes_a_token_and_verifies(store):
    manifest = manifest_json(store)
    size = manifest["token_store"]["bytes"]
    assert manifest["token_store"]["ids_dtype"] == "uint16"
    assert size["tokens"] == 2 * manifest["totals"]["tokens"]
    documents = manifest["totals"]["documents_written"]  # 25 bytes each, 4 of their boundary, plus framing
    assert 25 * documents <= size["boundaries_and_metadata"] <= 29 * documents + 2048 * manifest["totals"]["shards"]
    assert len(manifest["partitions"]) >= 3
    t = manifest["totals"]
    assert t["documents_read"] == t["documents_written"] + t["documents_skipped"] and t["documents_skipped"] >= 3
    assert verify_output(store).ok


def test_a_store_refuses_another_tokenizer_other_reading_options_and_provenance(store, tmp_path):
    other = SAMPLE / "code.model"
    for options, message in [
        ({"tokenizer": str(other)}, "the token store"),
        ({"batch_size": "64KiB"}, "--batch-size 64KiB: the token store"),
        ({"max_document_chars": 500}, "--max-document-chars 500: the token store"),
        ({"provenance": True}, "--provenance: the token store .* was made without it"),
    ]:
        values = {"inputs": [str(store)], "tokenizer": str(SPM), "output": str(tmp_path / "o"), **options}
        with pytest.raises(ObjcliError, match=message):
            transform(config_from_values(values), workers=1, overwrite=True)


def test_a_store_edited_by_hand_is_named_by_verify_and_refused_by_transform(corpus, tmp_path):
    store = tmp_path / "store"
    done = run_cli("tokenize", corpus / "a.jsonl", "-t", SPM, "-o", store, "-q")
    assert done.returncode == 0 and "2.00 bytes a token" in done.stderr, done.stderr
    shard = next(store.glob("*.store"))
    data = bytearray(shard.read_bytes())
    data[-200] ^= 1
    shard.write_bytes(bytes(data))
    verify = run_cli("verify", store)
    assert verify.returncode == 1 and shard.name in verify.stdout + verify.stderr
    derived = run_cli("transform", store, "-t", SPM, "-o", tmp_path / "d")
    assert derived.returncode == 1 and derived.stderr.count("\n") == 1 and shard.name in derived.stderr


def test_tokenize_resumes_after_a_kill_to_the_same_bytes(corpus, tmp_path):
    args = ["tokenize", corpus, "-t", SPM, "--partition-size", "48KiB", "--batch-size", "16KiB"]
    clean = run_cli(*args, "-o", tmp_path / "clean", "-q")
    assert clean.returncode == 0, clean.stderr
    killed = run_cli(
        *args, "-o", tmp_path / "killed", "-q", "--workers", "1", env={"OBJCLI_CRASH_AT": "partition-done:2"}
    )
    assert killed.returncode == -9
    assert not (tmp_path / "killed" / "manifest.json").exists()
    rerun = run_cli(*args, "-o", tmp_path / "killed", "-q", "--workers", "1")
    assert rerun.returncode == 0 and "kept" in rerun.stderr, rerun.stderr
    assert shard_files(tmp_path / "killed") == shard_files(tmp_path / "clean")


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.binary(max_size=200), max_size=8), start=st.integers(0, 2**32 - 1))
def test_the_seeded_crc_follows_from_the_stored_one(texts, start):
    """Texts of any lengths, repeated or not, in any order: each one's CRC from its start value."""
    crcs = np.array([zlib.crc32(t) for t in texts], np.uint32)
    got = crc32_from(crcs, np.array([len(t) for t in texts], np.int64), start)
    assert got.tolist() == [zlib.crc32(t, start) for t in texts]


def test_the_tokenizer_is_found_where_the_store_names_it_and_a_stores_file_is_no_input(store, tmp_path):
    derived = run_cli("transform", store, "--objective", "clm", "--seq-len", "64", "-o", tmp_path / "o", "-q")
    assert derived.returncode == 0, derived.stderr
    assert manifest_json(tmp_path / "o")["tokenizer"]["sha256"] == manifest_json(store)["tokenizer"]["sha256"]
    shard = next(store.glob("*.store"))
    refused = run_cli("transform", shard, "-t", SPM, "-o", tmp_path / "x")
    assert (
        refused.returncode == 1
        and "is a file of the token store" in refused.stderr
        and "give the store's folder" in refused.stderr
    )
    to_stdout = run_cli("tokenize", SAMPLE / "prose.jsonl", "-t", SPM, "-o", "-")
    assert to_stdout.returncode == 1 and to_stdout.stderr.count("\n") == 1 and "-o STORE" in to_stdout.stderr


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda m: m.update(partitions="x"), "not an objcli manifest"),
        (lambda m: m["partitions"][0].update(skipped_by_reason=[1]), "a damaged token store manifest"),
        (lambda m: m["partitions"][0].update(shards=["nope.store"]), "names nope.store, no shard of the store"),
        (lambda m: m.update(token_store=[]), "a damaged token store manifest"),
        (lambda m: m["token_store"]["reading"].pop("text_key"), "a damaged token store manifest"),
        (lambda m: m["tokenizer"].pop("sha256"), "not an objcli manifest"),
        (lambda m: m["inputs"][0].update(path=5), "a damaged token store manifest"),
    ],
)
def test_a_store_manifest_of_the_wrong_shape_is_one_line(edit, message, store, tmp_path):
    import shutil

    damaged = tmp_path / "store"
    shutil.copytree(store, damaged)
    manifest = json.loads((damaged / "manifest.json").read_text())
    edit(manifest)
    (damaged / "manifest.json").write_text(json.dumps(manifest))
    done = run_cli("transform", damaged, "-t", SPM, "-o", tmp_path / "o")
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


def test_every_store_of_a_mixture_is_checked_for_its_kind(store, tmp_path):
    """A per-sentence store as the second source of a clm mixture was read as documents (its own text:
    the store's text as a second source is refused as the same files, test_hostile_store.py)."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.jsonl").write_text("".join((SAMPLE / "prose.jsonl").read_text().splitlines(keepends=True)[300:320]))
    sentence_store = _tokenize([other], tmp_path / "sentences", "prose")
    sources = ["--source", f"a={store}", "--source", f"b={sentence_store}", "--weights", "a=1,b=1"]
    done = run_cli("transform", *sources, "-t", SPM, "-o", tmp_path / "o")
    assert done.returncode == 1 and f"the token store {sentence_store} was tokenized per sentence" in done.stderr


def test_a_store_appended_to_derives_what_the_text_run_appended_to_writes(corpus, tmp_path):
    """tokenize A, then tokenize B --append: its new partitions come after the store's own, and a
    derived run is the text run of A appended with B, byte for byte; stores are not merged (their
    partitions are each its text run's), in one line."""
    first, second = corpus / "a.jsonl", corpus / "b.jsonl"
    reading = ["--partition-size", "32KiB", "--batch-size", "8KiB"]
    assert run_cli("tokenize", first, "-t", SPM, "-o", tmp_path / "store", *reading).returncode == 0
    added = run_cli("tokenize", second, "-t", SPM, "-o", tmp_path / "store", "--append")
    assert added.returncode == 0 and "appended after the store's" in added.stderr, added.stderr
    again = run_cli("tokenize", first, "-t", SPM, "-o", tmp_path / "store", "--append")
    assert again.returncode == 1 and "already in the output" in again.stderr
    options = ["--objective", "ul2", "--seq-len", "128"]
    assert run_cli("transform", tmp_path / "store", "-o", tmp_path / "derived", *options).returncode == 0
    assert run_cli("transform", first, "-t", SPM, "-o", tmp_path / "text", *options, *reading).returncode == 0
    assert run_cli("transform", second, "-t", SPM, "-o", tmp_path / "text", "--append").returncode == 0
    assert shard_files(tmp_path / "text") == shard_files(tmp_path / "derived") != {}
    assert run_cli("tokenize", corpus / "c.txt", "-t", SPM, "-o", tmp_path / "other").returncode == 0
    refused = run_cli("merge", tmp_path / "store", tmp_path / "other", "-o", tmp_path / "m")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and "is a token store" in refused.stderr
    assert verify_output(tmp_path / "store").ok


def test_a_store_resharded_derives_the_same_bytes(store, tmp_path):
    """Recut within its partitions (to another folder, and in place): more shards, each partition
    naming its own, verify passes, and a derived run writes what it wrote from the store before."""
    options = ["--objective", "span-corruption", "--seq-len", "128"]
    assert run_cli("transform", store, *options, "-o", tmp_path / "before").returncode == 0
    done = run_cli("reshard", store, "--shard-size", "20KB", "-o", tmp_path / "recut")
    assert done.returncode == 0, done.stderr
    shutil.copytree(store, tmp_path / "in-place")
    assert run_cli("reshard", tmp_path / "in-place", "--shard-size", "30KB").returncode == 0
    for recut in (tmp_path / "recut", tmp_path / "in-place"):
        manifest = manifest_json(recut)
        assert len(manifest["shards"]) > len(manifest_json(store)["shards"]) and verify_output(recut).ok
        named = [name for partition in manifest["partitions"] for name in partition["shards"]]
        assert named == [shard["files"][0] for shard in manifest["shards"]]  # in order, each once
        assert run_cli("transform", recut, *options, "-o", tmp_path / f"{recut.name}-derived").returncode == 0
        assert shard_files(tmp_path / f"{recut.name}-derived") == shard_files(tmp_path / "before")
    counted = run_cli("reshard", store, "--num-shards", "3", "-o", tmp_path / "counted")
    assert counted.returncode == 1 and "--num-shards" in counted.stderr and counted.stderr.count("\n") == 1
