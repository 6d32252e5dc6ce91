"""Rows on read (issue 71): for every objective × packer a token store derives (the registry), a run with
``--format plan`` gives, through ``objcli.reading.Rows``, the rows the same command writes with
``--format arrow``, byte for byte and dtype for dtype; an objective that reads its tokens' values to
make its examples is refused in one line. The reader's ranks, resume state and refusals are tested here
too."""

import json
import shutil

import numpy as np
import pytest
from chat_data import build_tokenizer, conversations, write_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from objective_variants import variants
from runs import SAMPLE, run_tokenize, run_transform, shard_files

from objcli.commands.reshard import reshard
from objcli.commands.verify import verify_output
from objcli.errors import ObjcliError
from objcli.formats.row_plan import read_plan_file
from objcli.objectives import REGISTRY
from objcli.objectives.supply import Provides
from objcli.reading.reader import Rows

SPM = SAMPLE / "tokenizer.model"
READING = {"partition_size": "24KiB", "batch_size": "6KiB", "max_document_chars": 3000}
TEMPLATES = SAMPLE.parent / "tests" / "support" / "chat_templates"


def _tokenize(inputs, out, tokenizer=SPM, kind="documents", **options):
    run_tokenize(inputs, tokenizer, out, kind, workers=2, **{**options, **READING})
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Prose and code, several partitions, long documents cut."""
    folder = tmp_path_factory.mktemp("plan-corpus")
    (folder / "a.jsonl").write_text("".join((SAMPLE / "prose.jsonl").read_text().splitlines(True)[:90]))
    code = (SAMPLE / "code.jsonl").read_text().splitlines(True)[:12]
    (folder / "b.jsonl").write_text("".join(line for line in code if len(line) < 40_000))
    return _tokenize([folder], tmp_path_factory.mktemp("plan-store") / "store")


@pytest.fixture(scope="module")
def chat_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("plan-chat")
    (root / "data").mkdir()
    write_jsonl(conversations(160, "mistral", seed=3), root / "data" / "a.jsonl")
    tokenizer = build_tokenizer("mistral", root / "tokenizer")
    options = {"objective": "chat", "chat_template": str(TEMPLATES / "mistral.jinja")}
    return tokenizer, _tokenize([root / "data"], root / "store", tokenizer, "conversations", **options)


def same_rows(written, planned) -> int:
    """Every row of both outputs equal, column by column, values and dtypes; the row count."""
    a, b = Rows(written), Rows(planned)
    assert len(a) == len(b) > 0 and a.columns == b.columns
    for i in range(len(a)):
        x, y = a[i], b[i]
        for name in a.columns:
            assert x[name].dtype == y[name].dtype and np.array_equal(x[name], y[name]), (i, name)
    return len(a)


@pytest.fixture(scope="module")
def sentence_stores(store, tmp_path_factory):
    """Per-sentence stores of the same corpus, one a splitter, made when first asked for."""
    made = {}

    def of(splitter: str):
        if splitter not in made:
            folder = tmp_path_factory.mktemp(f"plan-sentences-{splitter}")
            made[splitter] = _tokenize([SAMPLE / "prose.jsonl"], folder / "store", kind=splitter)
        return made[splitter]

    return of


@pytest.fixture(scope="module")
def pair_store(tmp_path_factory):
    """A pair store (``objcli tokenize --preference``) of TRL-layout records, with a Qwen2.5-style tokenizer."""
    from trl_families import family_folder, preference_records, train_tokenizer

    root = tmp_path_factory.mktemp("plan-pairs")
    folder = family_folder(train_tokenizer(root), "qwen2_5", "qwen2_5", root / "tokenizer")
    write_jsonl(preference_records("qwen2_5", 80, seed=5), root / "pairs.jsonl")
    return folder, _tokenize([root / "pairs.jsonl"], root / "store", folder / "tokenizer.json", "pairs",
                             objective="preference")  # fmt: skip


def _source(request, reads):
    """(tokenizer, store, run options) an objective reading ``reads`` is derived from; None: no store gives it."""
    if reads.needs is Provides.DOCUMENTS:
        return SPM, request.getfixturevalue("store"), {}
    if reads.needs is Provides.SENTENCES:
        return SPM, request.getfixturevalue("sentence_stores")(reads.splitter), {}
    if reads.needs is Provides.CONVERSATIONS:
        tokenizer, chat = request.getfixturevalue("chat_store")
        return tokenizer, chat, {"chat_template": str(TEMPLATES / "mistral.jinja")}
    if reads.needs is Provides.PAIRS:
        folder, pairs = request.getfixturevalue("pair_store")
        return folder, pairs, {}
    return None  # text (characters, prompts): never from a store


def _refusal(name, run, tokenizer):
    """What the run's own objective says of a plan of its rows (None: it plans them)."""
    from objcli.recipe import config_from_values
    from objcli.run.setup import set_up_objective

    config = config_from_values({"inputs": ["-"], "tokenizer": str(tokenizer), "output": "-", **run})
    return set_up_objective(config)[2].plan_refusal()


def _combinations():
    """Every objective x packer a store derives; of the kinds of store made for few objectives (sentences,
    pairs), the first that plans in the default run and the rest with the heavy tests."""
    seen = set()
    for name, options in variants():
        objective = REGISTRY.named(name)
        for packer in objective.packers(objective.options_type(**options)):
            needs = objective.reads(objective.options_type(**options)).needs
            heavy = needs in (Provides.SENTENCES, Provides.PAIRS) and (
                needs in seen
                or needs is Provides.SENTENCES
                and _refusal(name, {"objective": name, "packing": packer, "seq_len": 96, **options}, SPM)
            )
            seen |= set() if heavy else {needs}
            label = f"{name}-{'-'.join(map(str, options.values())) or 'default'}-{packer}"
            yield pytest.param(name, options, packer, id=label, marks=[pytest.mark.heavy] if heavy else [])


@pytest.mark.parametrize("name, options, packer", list(_combinations()))
def test_plan_rows_are_the_written_rows(name, options, packer, request, tmp_path):
    objective = REGISTRY.named(name)
    source = _source(request, objective.reads(objective.options_type(**options)))
    if source is None:
        return
    tokenizer, store, extra = source
    run = {"objective": name, "packing": packer, "seq_len": 96, **options, **extra}
    if name in ("preference", "reward"):
        run["seq_len"] = 400 if packer != "none" else 200
    written = run_transform([store], tokenizer, tmp_path / "arrow", **run)
    refusal = _refusal(name, run, tokenizer)
    if refusal is not None:
        with pytest.raises(ObjcliError, match="--format plan: .* choose --format arrow") as refused:
            run_transform([store], tokenizer, tmp_path / "plan", output_format="plan", **run)
        assert refusal in str(refused.value) and "\n" not in str(refused.value)
        return
    planned = run_transform([store], tokenizer, tmp_path / "plan", output_format="plan", **run)
    assert same_rows(tmp_path / "arrow", tmp_path / "plan") == written.manifest["totals"]["rows"]
    for total in ("rows", "tokens", "padding_tokens", "documents_written", "documents_skipped"):
        assert planned.manifest["totals"][total] == written.manifest["totals"][total], total
    if objective.plan_counts_rows:  # its row step ran to count the rows: its counters are the written run's
        assert planned.manifest["totals"] == written.manifest["totals"]
    plan_bytes = sum(sum(s["bytes"].values()) for s in planned.manifest["shards"])
    arrow_bytes = sum(sum(s["bytes"].values()) for s in written.manifest["shards"])
    assert plan_bytes < arrow_bytes / 2  # a few bytes a segment (or a span), not bytes a token


@pytest.mark.heavy
@pytest.mark.parametrize(
    "run",
    [
        {"objective": "bart", "mask_length": "subword", "packing": "trim-and-pack", "rotate": 0.5, "insert": 0.1},
        {
            "objective": "bart",
            "bart_preset": "mbart",
            "replace_length": -1,
            "split": "validation=20%",
            "shuffle_rows": True,
        },  # fmt: skip
        {"objective": "contrastive", "augment": "delete:0.1,swap:0.1,crop:0.9", "negatives": 2},
        {"objective": "contrastive", "pairs": "ict", "negatives": 1},
        {"objective": "contrastive", "pairs": "adjacent", "shuffle_rows": True, "split": "validation=10%"},
        {"objective": "nsp", "split": "validation=20%", "shuffle_rows": True},
        {"objective": "nsp", "mlm": True, "whole_word": True},
        {"objective": "sop", "mlm": True, "sentences": "lines", "seq_len": 96},
        {"objective": "fim", "fim_level": "context", "split": "validation=20%", "shuffle_rows": True, "seq_len": 64},
    ],
    ids=[
        "bart-subword",
        "bart-mbart-words-shuffled",
        "contrastive-augment",
        "contrastive-ict",
        "contrastive-adjacent-shuffled",
        "nsp-shuffled",
        "nsp-mlm-whole-word",
        "sop-mlm-lines",
        "fim-context-shuffled",
    ],
)
def test_objectives_of_keyed_draws_over_sentences_plan_their_rows(run, request, tmp_path):
    """Noise drawn over lengths (BART's spans, rotations, inserts; contrastive views cut, dropped and swapped;
    NSP's pairs, shuffled and split), BART's word spans found from the ids a plan run reads beside the positions,
    masks drawn on read over ids (--mlm, whole words), and FIM's segments transformed on read: the plan's rows
    are the written rows, per split."""
    objective = REGISTRY.named(run["objective"])
    tokenizer, store, _ = _source(request, objective.reads(objective.options_type(**{k: v for k, v in run.items()
                                  if k in ("pairs", "sentences", "fim_level")})))  # fmt: skip
    run = {"seq_len": 128, **run}
    run_transform([store], tokenizer, tmp_path / "arrow", **run)
    run_transform([store], tokenizer, tmp_path / "plan", output_format="plan", **run)
    for split in ("train", "validation") if "split" in run else (None,):
        a, b = Rows(tmp_path / "arrow", split), Rows(tmp_path / "plan", split)
        assert len(a) == len(b) > 0
        assert all(np.array_equal(a[i][c], b[i][c]) for i in range(len(a)) for c in a.columns)


@pytest.mark.parametrize(
    "run",
    [
        {"objective": "clm", "packing": "best-fit", "split": "validation=20%"},
        {"objective": "mlm", "seq_len": 64},
        {"objective": "span-corruption", "seq_len": 128},
    ],
    ids=["clm-best-fit-split", "mlm", "span-corruption"],
)
def test_a_plan_written_out_is_the_arrow_outputs_bytes(run, store, tmp_path):
    """reshard --format arrow makes a plan's rows and writes them: the shard bytes of resharding the Arrow
    output of the same command; verify makes and checks them."""
    run_transform([store], SPM, tmp_path / "arrow", **run)
    run_transform([store], SPM, tmp_path / "plan", output_format="plan", **run)
    reshard(str(tmp_path / "arrow"), str(tmp_path / "arrow-2"), None, num_shards=3)
    reshard(str(tmp_path / "plan"), str(tmp_path / "plan-2"), None, num_shards=3, output_format="arrow")
    assert shard_files(tmp_path / "arrow-2") == shard_files(tmp_path / "plan-2") != {}
    assert verify_output(tmp_path / "plan").ok and verify_output(tmp_path / "plan-2").ok


@pytest.mark.parametrize(
    "run",
    [
        {"objective": "span-corruption", "final_chunk": "pad"},
        pytest.param({"objective": "ul2"}, marks=pytest.mark.heavy),  # ul2's parity runs by default (the registry)
        pytest.param({"objective": "ul2", "layout": "decoder"}, marks=pytest.mark.heavy),
    ],
    ids=["span-corruption", "ul2", "ul2-decoder"],
)
def test_a_denoising_plan_keeps_its_chunks_not_its_spans(run, store, tmp_path):
    """T5's and UL2's spans are drawn on read (their row step, unpacked): a plan keeps each row's raw chunk, a
    run for each stretch of the store it covers and each BOS between documents, not a run a span and sentinel;
    its counts are the written run's (T5's final chunk padded)."""
    planned = run_transform([store], SPM, tmp_path / "plan", output_format="plan", seq_len=128, **run)
    written = run_transform([store], SPM, tmp_path / "arrow", seq_len=128, **run)
    rows = sum(s["rows"] for s in planned.manifest["shards"])
    runs = sum(
        len(read_plan_file(tmp_path / "plan" / s["files"][0])[1]["input_ids.runs"]) for s in planned.manifest["shards"]
    )
    assert 0 < rows <= runs <= rows + 2 * planned.manifest["totals"]["documents_written"]
    assert planned.manifest["totals"] == written.manifest["totals"] and written.manifest["totals"]["padding_tokens"]


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    seq_len=st.integers(8, 300),
    packer=st.sampled_from(["concat", "best-fit"]),
    objective=st.sampled_from(["clm", "mlm"]),
    seed=st.integers(0, 2**31),
    split=st.sampled_from([None, "validation=20%"]),
    windows=st.sampled_from([None, "20KiB"]),
)
def test_plans_over_seeds_lengths_packers_and_splits(
    store, tmp_path_factory, seq_len, packer, objective, seed, split, windows
):
    """A property: whatever the length, packer, seed, split and document shuffle, the plan's rows are the
    written rows."""
    out = tmp_path_factory.mktemp("property")
    run = {"objective": objective, "packing": packer, "seq_len": seq_len, "seed": seed, "split": split}
    run["shuffle_documents"] = windows
    run = {k: v for k, v in run.items() if v is not None}
    run_transform([store], SPM, out / "arrow", **run)
    run_transform([store], SPM, out / "plan", output_format="plan", **run)
    same_rows(out / "arrow", out / "plan")
    for name in ("train", "validation") if split else ():
        a, b = Rows(out / "arrow", name), Rows(out / "plan", name)
        assert len(a) == len(b) and all(np.array_equal(a[i]["input_ids"], b[i]["input_ids"]) for i in range(len(a)))
    shutil.rmtree(out)


@pytest.fixture(scope="module")
def mlm_plan(store, tmp_path_factory):
    out = tmp_path_factory.mktemp("mlm-plan")
    run_transform([store], SPM, out / "plan", objective="mlm", seq_len=64, output_format="plan")
    return out / "plan"


def test_a_plan_file_written_before_narrow_arrays_reads_as_it_did(mlm_plan, tmp_path):
    """A plan file keeps each array at its values' width (its header's ``widths``); one written before them,
    every array at its own dtype, gives the same rows."""
    import zstandard

    from objcli.formats.row_plan import MAGIC

    shutil.copytree(mlm_plan, tmp_path / "plan")
    for path in (tmp_path / "plan").glob("*.plan"):
        _, arrays, header = read_plan_file(path)
        assert any(header["widths"][name] != array.dtype.str for name, array in arrays.items())  # narrowed
        del header["widths"]
        encoded = json.dumps(header).encode()
        payload = b"".join([len(encoded).to_bytes(8, "little"), encoded, *(a.tobytes() for a in arrays.values())])
        path.write_bytes(MAGIC + zstandard.ZstdCompressor().compress(payload))
    old, new = Rows(tmp_path / "plan"), Rows(mlm_plan)
    assert len(old) == len(new) and all(old[i].keys() == new[i].keys() for i in range(len(new)))
    assert all(np.array_equal(old[i][c], new[i][c]) and old[i][c].dtype == new[i][c].dtype
               for i in range(len(new)) for c in new.columns)  # fmt: skip


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_resume_from_a_saved_state_gives_the_rest(mlm_plan, data):
    """Rows read in any order equal rows read in order; a state saved at a random row of a random rank
    resumes with exactly the rest of that rank's rows."""
    rows = Rows(mlm_plan)
    world = data.draw(st.integers(1, 5))
    rank = data.draw(st.integers(0, world - 1))
    view = rows.shard(rank, world)
    stop = data.draw(st.integers(0, len(view)))
    state = json.loads(json.dumps(view.state(stop)))  # what a trainer saves, as JSON
    again = Rows(mlm_plan).shard(rank, world)
    rest = list(again.resume(state))
    assert len(rest) == len(view) - stop
    for k, row in enumerate(rest):
        assert np.array_equal(row["labels"], view[stop + k]["labels"])


def test_ranks_are_disjoint_and_cover_every_row(mlm_plan):
    rows = Rows(mlm_plan)
    for world in (1, 2, 3, 7):
        ranges = [(v.start, v.stop) for v in (rows.shard(r, world) for r in range(world))]
        assert ranges[0][0] == 0 and ranges[-1][1] == len(rows)
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        assert max(b - a for a, b in ranges) - min(b - a for a, b in ranges) <= 1
        even = [rows.shard(r, world, drop_remainder=True) for r in range(world)]
        assert {len(v) for v in even} == {len(rows) // world}


def test_a_state_of_other_rows_is_refused(mlm_plan):
    rows = Rows(mlm_plan)
    state = rows.shard(0, 2).state(3)
    with pytest.raises(ObjcliError, match="the saved state is of other rows"):
        next(rows.shard(1, 2).resume(state))


def test_an_edited_or_moved_store_is_refused(store, tmp_path):
    copy = shutil.copytree(store, tmp_path / "store")
    run_transform([copy], SPM, tmp_path / "plan", objective="clm", seq_len=64, output_format="plan")
    first = Rows(tmp_path / "plan")[0]["input_ids"]
    assert len(first) == 64
    manifest = json.loads((copy / "manifest.json").read_text())
    shard = copy / manifest["shards"][0]["files"][0]
    data = bytearray(shard.read_bytes())
    data[-200] ^= 1
    shard.write_bytes(bytes(data))
    with pytest.raises(ObjcliError, match="does not match the digests"):
        Rows(tmp_path / "plan")[0]
    (copy / "manifest.json").write_text(json.dumps({**manifest, "seed": 1}))
    with pytest.raises(ObjcliError, match="its token store .* changed since"):
        Rows(tmp_path / "plan")[0]
    shutil.rmtree(copy)
    with pytest.raises(ObjcliError, match="its token store .* is not there"):
        Rows(tmp_path / "plan")[0]


def test_a_plan_with_provenance_traces_its_rows_as_the_arrow_output(tmp_path):
    """--provenance: each plan file's spans are the Arrow output's (trace gives the same spans for every
    row), and written out they are the same .provenance files."""
    from objcli.commands.trace import trace

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.jsonl").write_text("".join((SAMPLE / "prose.jsonl").read_text().splitlines(True)[:40]))
    store = _tokenize([corpus], tmp_path / "store", provenance=True)
    run = {"objective": "mlm", "seq_len": 64, "provenance": True}
    run_transform([store], SPM, tmp_path / "arrow", **run)
    run_transform([store], SPM, tmp_path / "plan", output_format="plan", **run)
    rows = Rows(tmp_path / "arrow")
    assert all(trace(tmp_path / "plan", i) == trace(tmp_path / "arrow", i) for i in range(0, len(rows), 7))
    reshard(str(tmp_path / "arrow"), str(tmp_path / "arrow-2"), None, num_shards=2)
    reshard(str(tmp_path / "plan"), str(tmp_path / "plan-2"), None, num_shards=2, output_format="arrow")
    assert shard_files(tmp_path / "arrow-2") == shard_files(tmp_path / "plan-2")
    shuffled = {**run, "shuffle_rows": True}  # a shuffled plan's row i: the shuffled output's row i, spans too
    run_transform([store], SPM, tmp_path / "arrow-shuffled", **shuffled)
    run_transform([store], SPM, tmp_path / "plan-shuffled", output_format="plan", **shuffled)
    traced = [trace(tmp_path / "plan-shuffled", i) for i in range(0, len(rows), 7)]
    assert traced == [trace(tmp_path / "arrow-shuffled", i) for i in range(0, len(rows), 7)]
    assert traced != [trace(tmp_path / "plan", i) for i in range(0, len(rows), 7)]


def test_a_damaged_plan_file_is_one_line(mlm_plan, tmp_path):
    """Cut short or overwritten: verify names the file, the reader says it in one line."""
    plan = shutil.copytree(mlm_plan, tmp_path / "plan")
    name = json.loads((plan / "manifest.json").read_text())["shards"][0]["files"][0]
    (plan / name).write_bytes((plan / name).read_bytes()[:-40])
    report = verify_output(plan)
    assert not report.ok and any(name in problem for problem in report.problems)
    with pytest.raises(ObjcliError, match=f"{name}: cannot be read .*; run 'objcli verify"):
        Rows(plan)[0]


@pytest.mark.parametrize("widths", ["x", [1], {"input_ids.first": None}])
def test_a_plan_header_of_other_json_types_is_one_line(mlm_plan, tmp_path, widths):
    """A plan file's header edited to values of other JSON types: a damaged file, in one line."""
    import zstandard

    from objcli.formats.row_plan import MAGIC

    plan = shutil.copytree(mlm_plan, tmp_path / "plan")
    path = plan / json.loads((plan / "manifest.json").read_text())["shards"][0]["files"][0]
    data = zstandard.ZstdDecompressor().decompress(path.read_bytes()[len(MAGIC) :])
    size = int.from_bytes(data[:8], "little")
    header = {**json.loads(data[8 : 8 + size]), "widths": widths}
    encoded = json.dumps(header).encode()
    path.write_bytes(
        MAGIC + zstandard.ZstdCompressor().compress(len(encoded).to_bytes(8, "little") + encoded + data[8 + size :])
    )
    with pytest.raises(ObjcliError, match=f"{path.name}: cannot be read .*; run 'objcli verify"):
        Rows(plan)[0]


@pytest.mark.parametrize("section", [{}, {"vocabulary": "8000"}, {"store": ["x"]}, {"store_manifest_sha256": None}])
def test_an_edited_row_plan_section_is_one_line(mlm_plan, tmp_path, section):
    plan = shutil.copytree(mlm_plan, tmp_path / "plan")
    manifest = json.loads((plan / "manifest.json").read_text())
    edited = {} if not section else {**manifest["row_plan"], **section}
    (plan / "manifest.json").write_text(json.dumps({**manifest, "row_plan": edited}))
    with pytest.raises(ObjcliError, match="its row_plan does not name its stores"):
        Rows(plan)[0]


def test_what_a_plan_cannot_do_is_one_line(store, mlm_plan, tmp_path):
    """Merged, appended to or resharded as a plan: refused, naming the way that works."""
    from objcli.commands.merge import merge

    with pytest.raises(ObjcliError, match="merge: .* is a plan over .*; write its rows first"):
        merge([str(mlm_plan), str(store)], str(tmp_path / "merged"))
    with pytest.raises(ObjcliError, match="is a plan .*write its rows with --format arrow"):
        reshard(str(mlm_plan), str(tmp_path / "again"), None, num_shards=2)
    with pytest.raises(ObjcliError, match="--format megatron cannot hold"):
        reshard(str(mlm_plan), str(tmp_path / "again"), None, num_shards=2, output_format="megatron")
    with pytest.raises(ObjcliError, match="--dupe-factor 2 writes each row's copies as rows of their own"):
        run_transform([store], SPM, tmp_path / "p", output_format="plan", objective="mlm", dupe_factor=2)


def test_a_plan_needs_stores(store, tmp_path):
    with pytest.raises(ObjcliError, match="--format plan: a plan's rows are made on read from token stores' ids"):
        run_transform([SAMPLE / "prose.jsonl"], SPM, tmp_path / "p", output_format="plan")


def test_a_row_step_without_its_tokenizer_is_one_line(store, tmp_path):
    """MLM's masking is made on read with the plan's tokenizer: gone or changed, the reader says so in one line."""
    tokenizer = shutil.copy(SPM, tmp_path / "tokenizer.model")
    run_transform([store], tokenizer, tmp_path / "plan", objective="mlm", seq_len=64, output_format="plan")
    assert len(Rows(tmp_path / "plan")[0]["labels"]) == 64
    (tmp_path / "tokenizer.model").write_bytes(b"not the model")
    with pytest.raises(ObjcliError, match="not the tokenizer the plan was made with"):
        Rows(tmp_path / "plan")[0]
    (tmp_path / "tokenizer.model").unlink()
    with pytest.raises(ObjcliError, match="the plan's tokenizer is not there"):
        Rows(tmp_path / "plan")[0]


@pytest.fixture(scope="module")
def two_stores(store, tmp_path_factory):
    """The store above and a second one of other text: a mixture's sources."""
    folder = tmp_path_factory.mktemp("plan-second")
    (folder / "c.jsonl").write_text("".join((SAMPLE / "prose.jsonl").read_text().splitlines(True)[300:420]))
    return store, _tokenize([folder], tmp_path_factory.mktemp("plan-second-store") / "store")


@pytest.mark.parametrize(
    "run",
    [
        pytest.param({"objective": "clm", "packing": "best-fit", "split": "validation=20%"}, marks=pytest.mark.heavy),
        {"objective": "mlm", "seq_len": 64, "max_epochs": "b=3", "split": "validation=20%"},
        pytest.param({"objective": "span-corruption", "seq_len": 128}, marks=pytest.mark.heavy),
    ],
    ids=["clm-best-fit-split", "mlm-epochs", "span-corruption"],
)
def test_a_plan_over_a_mixture_of_stores_is_the_written_rows(run, two_stores, tmp_path):
    """Issue 82, item 2: a mixture of stores (shares, --max-epochs) planned: each run partition names its store
    and the store's partition, and the reader's rows are the Arrow output's of the same command."""
    first, second = two_stores
    mixture = {"source": (f"a={first}", f"b={second}"), "weights": "a=0.5,b=0.5", **run}
    run_transform([], SPM, tmp_path / "arrow", **mixture)
    planned = run_transform([], SPM, tmp_path / "plan", output_format="plan", **mixture)
    section = planned.manifest["row_plan"]
    assert [s["store"] for s in section["stores"]] == [str(first), str(second)]
    assert {index for index, _ in section["partition_stores"].values()} == {0, 1}
    same_rows(tmp_path / "arrow", tmp_path / "plan")
    assert verify_output(tmp_path / "plan").ok


def test_a_plan_whose_partition_stores_are_edited_is_one_line(two_stores, tmp_path):
    first, second = two_stores
    run_transform(
        [], SPM, tmp_path / "plan", output_format="plan", source=(f"a={first}", f"b={second}"), weights="a=1,b=1"
    )
    manifest = json.loads((tmp_path / "plan" / "manifest.json").read_text())
    manifest["row_plan"]["partition_stores"]["0"] = [2, 0]  # a third store it does not name
    (tmp_path / "plan" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ObjcliError, match="partition_stores is damaged"):
        Rows(tmp_path / "plan")[0]


@pytest.mark.parametrize(
    "run",
    [
        pytest.param({"objective": "clm", "packing": "best-fit", "split": "validation=20%"}, marks=pytest.mark.heavy),
        {"objective": "mlm", "seq_len": 64, "seed": 7, "split": "validation=20%"},
        pytest.param({"objective": "span-corruption", "seq_len": 128}, marks=pytest.mark.heavy),
    ],
    ids=["clm-best-fit-split", "mlm", "span-corruption"],
)
def test_a_shuffled_plan_reads_in_the_order_the_shuffled_run_writes(run, two_stores, tmp_path, monkeypatch):
    """Issue 82, item 2: --shuffle-rows planned. The run writes row i of each split as row permuted(i) of the
    split in order (kernels/permutation.py); a plan's reader computes the same index and makes that row, so
    the shuffled Arrow output and the plan read back are the same rows, split by split and all together, over a
    mixture of stores; several chunks (small ones) change nothing."""
    import objcli.order.shuffle as shuffle

    monkeypatch.setattr(shuffle, "CHUNK_BYTES", 64 * 2**10)
    first, second = two_stores
    mixture = {"source": (f"a={first}", f"b={second}"), "weights": "a=0.5,b=0.5", "shuffle_rows": True, **run}
    written = run_transform([], SPM, tmp_path / "arrow", **mixture)
    run_transform([], SPM, tmp_path / "plan", output_format="plan", **mixture)
    run_transform([], SPM, tmp_path / "ordered", **{**mixture, "shuffle_rows": False})
    assert same_rows(tmp_path / "arrow", tmp_path / "plan") == written.manifest["totals"]["rows"]
    for split in {s["split"] for s in written.manifest["shards"]}:
        a, b = Rows(tmp_path / "arrow", split or None), Rows(tmp_path / "plan", split or None)
        assert all(np.array_equal(a[i]["input_ids"], b[i]["input_ids"]) for i in range(len(a)))
    ordered = Rows(tmp_path / "ordered")
    moved = sum(not np.array_equal(ordered[i]["input_ids"], Rows(tmp_path / "plan")[i]["input_ids"]) for i in range(20))
    assert moved > 10  # shuffled, not in order
    with pytest.raises(ObjcliError, match="a plan written with --shuffle-rows, its order made on read"):
        reshard(str(tmp_path / "plan"), str(tmp_path / "again"), None, num_shards=2, output_format="arrow")


def test_a_plan_as_an_iterable_dataset_is_the_hf_outputs_dataset(mlm_plan, store, tmp_path):
    """Rows.to_iterable_dataset() declares the features the hf format's shards declare and gives their rows, as
    datasets gives them (lists of Python ints): what a collator written for datasets (TRL's) takes."""
    import datasets

    run_transform([store], SPM, tmp_path / "hf", objective="mlm", seq_len=64, output_format="hf")
    written = datasets.load_from_disk(str(tmp_path / "hf"))
    made = Rows(mlm_plan).to_iterable_dataset(shards=3)
    assert made.features == written.features
    rows = list(made)
    assert len(rows) == len(written) > 0 and rows == written.to_list()
    assert all(type(v) is list and all(type(x) is int for x in v) for v in rows[0].values())
