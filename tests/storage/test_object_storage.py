"""Inputs and outputs in object storage, against a real S3 endpoint: a moto server on 127.0.0.1,
reached through the standard endpoint and credential variables, as any S3 service would be."""

import gzip
import json
import os
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from optional import lazily, requires
from runs import SAMPLE, TEXT_FORMATS, folder_bytes, manifest_json, run_cli, run_transform
from s3_server import moto_s3

pytestmark = requires("s3fs", "moto")
s3fs = lazily("s3fs")

from objcli.formats import whole_document_formats  # noqa: E402

NO_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "",
    "AWS_SECRET_ACCESS_KEY": "",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
    "AWS_CONFIG_FILE": "/nonexistent",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on a free loopback port (``s3_server.py``)."""
    with moto_s3() as client:
        yield client


@pytest.fixture
def bucket(s3, request):
    name = "b" + str(abs(hash(request.node.nodeid)) % 10**10)
    s3.mkdir(name)
    return name


@pytest.fixture(scope="module")
def corpus(small_corpus, tmp_path_factory):
    """Prose and plain text from the sample corpus, a gzip copy (streamed through the decompressor),
    a JSONL large enough to be cut into byte ranges and a Parquet file, in a subfolder."""
    folder = tmp_path_factory.mktemp("s3corpus")
    prose = b"".join((small_corpus / "prose.jsonl").read_bytes().splitlines(keepends=True)[:40])
    (folder / "prose.jsonl").write_bytes(prose)
    (folder / "reference.txt").write_bytes((small_corpus / "reference.txt").read_bytes())
    (folder / "more").mkdir()
    (folder / "more" / "prose-copy.jsonl.gz").write_bytes(gzip.compress(prose))
    (folder / "more" / "big.jsonl").write_bytes(prose * 2)
    texts = [json.loads(line)["text"] for line in prose.splitlines()[:10]]
    pq.write_table(pa.table({"text": texts}), folder / "more" / "some.parquet", row_group_size=4)  # read by ranges
    (folder / ".hidden.jsonl").write_bytes(prose)  # skipped, as in a local folder
    return folder


def local_bytes(folder) -> dict[str, bytes]:
    """A local output's files but its lock file (empty when no run holds it; a bucket's is removed)."""
    return {k: v for k, v in folder_bytes(folder).items() if k != ".objcli-lock"}


def upload(s3, folder, prefix):
    s3.put(f"{folder}/", f"{prefix}/", recursive=True)
    return f"s3://{prefix}/"


def objects(s3, prefix) -> dict[str, bytes]:
    """Every object under a prefix (not below it), by name: the remote twin of folder_bytes."""
    return {
        path.rsplit("/", 1)[-1]: s3.cat_file(path)
        for path in sorted(s3.find(prefix))
        if path.count("/") == prefix.count("/") + 1
    }


# One format of each way of writing a shard (one file; .bin and .idx; a folder of .npy files) by default,
# every format with the heavy tests: the bucket's commit path is the same for all of them.
BUCKET_FORMATS = [
    pytest.param(f, marks=[] if f in ("arrow", "megatron", "nemo-packed-npy") else [pytest.mark.heavy])
    for f in sorted(TEXT_FORMATS)
]


@pytest.mark.parametrize("fmt", BUCKET_FORMATS)
def test_a_bucket_and_a_local_copy_give_the_same_bytes(s3, bucket, corpus, sample_tokenizer, tmp_path, fmt):
    """Same sorted listing, same partitions (byte ranges included), same shards, in every format;
    written to the bucket, they are the bytes a local run writes."""
    url = upload(s3, corpus, f"{bucket}/corpus")
    options = {
        "output_format": fmt,
        "partition_size": "100000",
        "seq_len": 128,
        "objective": "clm",
        **({"packing": "none"} if fmt in whole_document_formats() else {}),
    }
    local = run_transform([corpus], sample_tokenizer, tmp_path / "local", workers=2, **options)
    remote = run_transform([url], sample_tokenizer, f"s3://{bucket}/out", workers=2, **options)
    expected = local_bytes(tmp_path / "local")
    written = objects(s3, f"{bucket}/out")
    assert written.keys() == expected.keys()  # no lock, no work prefix left behind
    # The manifest and HF's state.json carry the configuration's fingerprint, and the inputs differ.
    same = [k for k in written if k not in ("manifest.json", "state.json", "README.md")]  # the card names them too
    assert [written[k] for k in same] == [expected[k] for k in same]
    manifest, local_manifest = json.loads(written["manifest.json"]), json.loads(expected["manifest.json"])
    assert manifest["shards"] == local_manifest["shards"]
    assert remote.totals == local.totals
    assert [p["path"].removeprefix(url) for p in manifest["inputs"]] == [
        os.path.relpath(p["path"], corpus) for p in local_manifest["inputs"]
    ]
    ranges = [p["byte_range"] for part in manifest["partitions"] for p in part["pieces"] if p["byte_range"]]
    assert len(ranges) >= 3  # big.jsonl was read in ranged pieces


def test_shuffled_and_split_output_in_a_bucket_is_the_local_bytes(s3, bucket, corpus, sample_tokenizer, tmp_path):
    url = upload(s3, corpus, f"{bucket}/corpus")
    options = {"shuffle_rows": True, "split": "validation=0.2", "partition_size": "100000", "seq_len": 128}
    run_transform([corpus], sample_tokenizer, tmp_path / "local", workers=2, **options)
    run_transform([url], sample_tokenizer, f"s3://{bucket}/out", workers=2, **options)
    expected = local_bytes(tmp_path / "local")
    written = objects(s3, f"{bucket}/out")
    assert sorted(written) == sorted(expected) and any(name.startswith("validation-") for name in written)
    assert all(written[name] == expected[name] for name in written if name not in ("manifest.json", "README.md"))


def test_output_in_a_bucket_reads_back_through_its_url(s3, bucket, corpus, sample_tokenizer):
    """pyarrow and Hugging Face datasets read the shards straight from s3:// (through s3fs); objcli's
    own verify reads it back too, and names the damaged object."""
    import datasets

    out = f"s3://{bucket}/parquet"
    summary = run_transform([corpus], sample_tokenizer, out, workers=2, output_format="parquet", seq_len=128)
    manifest = json.loads(s3.cat_file(f"{bucket}/parquet/manifest.json"))
    first = manifest["shards"][0]["files"][0]
    table = pq.read_table(f"{bucket}/parquet/{first}", filesystem=s3)
    assert table.num_rows == manifest["shards"][0]["rows"]
    lengths = [len(row) for row in table.column("input_ids").to_pylist()]
    assert lengths == [128] * table.num_rows  # packed rows of --seq-len
    loaded = datasets.load_dataset(
        "parquet",
        data_files=f"{out}/part-*.parquet",
        split="train",
        storage_options={"client_kwargs": {"endpoint_url": os.environ["AWS_ENDPOINT_URL"]}},
    )
    assert len(loaded) == summary.totals["rows"]
    run_transform([corpus], sample_tokenizer, f"s3://{bucket}/hf", workers=2, output_format="hf", seq_len=128)
    saved = datasets.load_from_disk(f"s3://{bucket}/hf")
    assert len(saved) == summary.totals["rows"]
    verified = run_cli("verify", out)
    assert verified.returncode == 0 and verified.stderr.startswith(f"objcli verify: {out}: "), verified.stderr
    s3.pipe_file(f"{bucket}/parquet/{first}", b"PAR1 damaged")
    damaged = run_cli("verify", out)
    assert damaged.returncode == 1 and f"objcli verify: {out}: 1 problem(s)" in damaged.stderr, damaged.stderr


@pytest.fixture(scope="module")
def clean_remote_run(s3, corpus, sample_tokenizer):
    """(arguments, bucket, objects) of an uninterrupted CLI run from a bucket into it. The bucket's
    name is new each time: pytest may set a module fixture up again over the same server (CI saw a
    second set-up find the bucket there)."""
    name = f"clean-run-{uuid.uuid4().hex[:12]}"
    s3.mkdir(name)
    url = upload(s3, corpus, f"{name}/corpus")
    args = [url, "-t", sample_tokenizer, "--seq-len", "128", "--partition-size", "100000", "--workers", "1"]
    clean = run_cli("transform", *args, "-q", "-o", f"s3://{name}/clean")
    assert clean.returncode == 0, clean.stderr
    return args, name, objects(s3, f"{name}/clean")


@pytest.mark.parametrize(
    "crash_at, kept",
    [  # a crash at each step of the commit; the first two in make test, the rest in make test-extras
        ("upload:1", False),
        ("upload:3", True),
        pytest.param("partition-done:2", True, marks=pytest.mark.heavy),
        pytest.param("rename:2", True, marks=pytest.mark.heavy),
        pytest.param("manifest.json:1", True, marks=pytest.mark.heavy),
    ],
)
def test_a_run_killed_mid_upload_resumes_to_the_same_bytes(s3, clean_remote_run, crash_at, kept):
    """SIGKILL while shards go up, between partitions, while they are copied into place, and just
    before the manifest: never a manifest without its shards; the rerun (its lock taken over from
    the dead run) keeps the finished partitions and ends with the bytes of an uninterrupted run."""
    args, name, expected = clean_remote_run
    out = f"{name}/{crash_at.replace(':', '-')}"
    killed = run_cli("transform", *args, "-q", "-o", f"s3://{out}", env={"OBJCLI_CRASH_AT": crash_at})
    assert killed.returncode == -9, killed.stderr
    assert not s3.exists(f"{out}/manifest.json")
    assert s3.exists(f"{out}/.objcli-lock")  # the dead run's
    rerun = run_cli("transform", *args, "-o", f"s3://{out}")
    assert rerun.returncode == 0, rerun.stderr
    assert ("partitions kept from the interrupted run" in rerun.stderr) == kept, rerun.stderr
    assert not _dead_staging()  # the killed run's staging folder went with the rerun (issue 30)
    written = objects(s3, out)
    assert written.keys() == expected.keys()
    assert all(written[k] == expected[k] for k in written if k not in ("manifest.json", "README.md"))
    assert json.loads(written["manifest.json"])["shards"] == json.loads(expected["manifest.json"])["shards"]


def test_a_live_run_holds_the_output(s3, bucket, corpus, sample_tokenizer):
    s3.pipe_file(f"{bucket}/out/.objcli-lock", json.dumps({"host": "elsewhere", "pid": 1, "since": 0}).encode())
    done = run_cli("transform", corpus, "-t", sample_tokenizer, "-o", f"s3://{bucket}/out", "-q")
    assert done.returncode == 1
    assert done.stderr == (
        f"Error: output s3://{bucket}/out: another run (pid 1 on elsewhere) is writing it; wait for it "
        f"to finish, or if that run is gone, delete s3://{bucket}/out/.objcli-lock\n"
    )


PRELOAD = """
import os, sys
FORBIDDEN = os.environ["OBJCLI_TEST_FORBIDDEN"]
def refuse(event, args):
    if event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, bytes, os.PathLike)):
        if os.path.abspath(os.fsdecode(args[0])).startswith(FORBIDDEN):
            raise PermissionError(f"a worker touched the client's folder: {os.fsdecode(args[0])}")
sys.addaudithook(refuse)
"""


@pytest.mark.heavy
def test_dask_workers_need_no_shared_folder(s3, bucket, corpus, sample_tokenizer, tmp_path):
    """Workers whose every open of the client's folder fails (an audit hook, preloaded) read the
    bucket, fetch the tokenizer from it and write their shards there; the client writes the manifest."""
    pytest.importorskip("distributed")
    from clusters import DaskProcesses

    client, cluster_folder = tmp_path / "client", tmp_path / "cluster"
    client.mkdir()
    cluster_folder.mkdir()
    tokenizer = client / "tokenizer.model"
    tokenizer.write_bytes(open(sample_tokenizer, "rb").read())
    preload = cluster_folder / "refuse_client_folder.py"
    preload.write_text(PRELOAD)
    url = upload(s3, corpus, f"{bucket}/corpus")
    args = [url, "-t", tokenizer, "--seq-len", "128", "--partition-size", "100000", "-q"]
    local = run_cli("transform", *args, "-o", client / "local", "--workers", "2")
    assert local.returncode == 0, local.stderr
    env = {"OBJCLI_TEST_FORBIDDEN": str(client), "DASK_DISTRIBUTED__WORKER__PRELOAD": json.dumps([str(preload)])}
    cluster = DaskProcesses(cluster_folder, workers=2, env=env)
    try:
        done = run_cli(
            "transform",
            *args,
            "-o",
            f"s3://{bucket}/out",
            "--executor",
            "dask",
            "--scheduler",
            cluster.address,
            cwd=client,
        )
        shared = run_cli(
            "transform", *args, "-o", client / "shared", "--executor", "dask", "--scheduler", cluster.address
        )
    finally:
        cluster.stop()
    assert done.returncode == 0, done.stderr
    assert shared.returncode == 1 and "client's folder" in shared.stderr  # the hook does bite
    expected = local_bytes(client / "local")
    written = objects(s3, f"{bucket}/out")
    assert written.keys() == expected.keys()
    assert all(written[k] == expected[k] for k in written if k not in ("manifest.json", "README.md"))


@pytest.mark.parametrize(
    "case",
    [
        "no credentials",
        "no bucket (input)",
        "no bucket (output)",
        "nothing at the prefix",
        "unknown protocol",
        "prefix with ..",
        "gs:// without gcsfs",
    ],
)
def test_storage_failures_are_one_line(s3, bucket, corpus, sample_tokenizer, case):
    url = f"s3://{bucket}/corpus/"
    inputs, output, env, expected = corpus, f"s3://{bucket}/out", {}, ""
    if case == "no credentials":
        inputs, env = url, NO_CREDENTIALS
        expected = f"Error: {url}: no credentials found (listing it); set them the standard way (AWS_ACCESS_KEY_ID"
    elif case == "no bucket (input)":
        inputs = "s3://no-such-bucket-here/corpus/"
        expected = (
            "Error: s3://no-such-bucket-here/corpus/: no such bucket 'no-such-bucket-here' (listing it); check the name"
        )
    elif case == "no bucket (output)":
        output = "s3://no-such-bucket-here/out"
        expected = (
            "Error: s3://no-such-bucket-here/out: no such bucket 'no-such-bucket-here' (taking the output's lock)"
        )
    elif case == "nothing at the prefix":
        inputs = url
        expected = f"Error: {url}: no such object or prefix (listing it); check the URL"
    elif case == "unknown protocol":
        inputs = "nosuch://b/corpus/"
        expected = "Error: nosuch://b/corpus/: unknown protocol nosuch://; use a local path, or s3://, gs://, hf://"
    elif case == "prefix with ..":
        output = f"s3://{bucket}/a/../b"
        expected = f"Error: -o s3://{bucket}/a/../b: the path has an empty, '.' or '..' part"
    else:
        if _installed("gcsfs"):
            pytest.skip("gcsfs is installed")
        inputs = "gs://b/corpus/"
        expected = "Error: gs://b/corpus/: gs:// needs a package that is not installed; pip install 'objcli[gcs]'"
    done = run_cli("transform", inputs, "-t", sample_tokenizer, "-o", output, "-q", env=env)
    assert done.returncode == 1
    assert done.stderr.startswith(expected), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def _installed(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def test_a_name_leaving_the_prefix_is_refused(s3, bucket):
    """A marker or manifest in the bucket that names ``../x`` is not followed out of the prefix."""
    from objcli.errors import ObjcliError
    from objcli.storage.remote_place import RemotePlace

    store = RemotePlace(f"s3://{bucket}/out")
    for name in ("../x", "/x", "a/../../x", ""):
        with pytest.raises(ObjcliError, match="would escape the output prefix"):
            store.key(name)
    assert store.key("part-00000-of-00001.arrow") == f"{bucket}/out/part-00000-of-00001.arrow"


def test_any_fsspec_protocol_works_in_and_out(corpus, sample_tokenizer, tmp_path):
    """The generic path, with fsspec's in-memory filesystem standing in for hf:// (no hub is
    reachable from the tests): listing, ranged reads, the lock by existence, uploads and copies."""
    import fsspec

    memory = fsspec.filesystem("memory")
    memory.put(f"{corpus}/", "/objcli-test/corpus/", recursive=True)
    options = {"partition_size": "100000", "seq_len": 128}
    run_transform([corpus], sample_tokenizer, tmp_path / "local", workers=1, **options)
    run_transform(["memory://objcli-test/corpus/"], sample_tokenizer, "memory://objcli-test/out", workers=1, **options)
    expected = local_bytes(tmp_path / "local")
    written = {path.rsplit("/", 1)[-1]: memory.cat_file(path) for path in memory.find("/objcli-test/out")}
    assert written.keys() == expected.keys()
    assert all(written[k] == expected[k] for k in written if k not in ("manifest.json", "README.md"))
    memory.rm("/objcli-test", recursive=True)


@pytest.mark.parametrize(
    "code, message, expected",
    [
        (
            "AccessDenied",
            "Access Denied",
            "s3://b/k: access denied (reading it) (Access Denied); check the credentials' permissions",
        ),
        (
            "SlowDown",
            "Please reduce your request rate.",
            "s3://b/k: the storage service is throttling requests and retries did not",
        ),
        ("Throttling", "Rate exceeded", "s3://b/k: the storage service is throttling requests"),
        ("NoSuchBucket", "The specified bucket does not exist", "s3://b/k: no such bucket 'b' (reading it)"),
    ],
)
def test_service_errors_as_the_client_raises_them_are_one_line(code, message, expected):
    """Errors moto does not produce on demand, built as botocore raises them and translated by s3fs
    itself, then by objcli."""
    from botocore.exceptions import ClientError
    from s3fs.errors import translate_boto_error

    from objcli.storage.remote import storage_error

    raised = translate_boto_error(ClientError({"Error": {"Code": code, "Message": message}}, "GetObject"))
    assert str(storage_error(raised, "s3://b/k", "reading it")).startswith(expected)


def test_export_tokenizer_reads_an_output_in_a_bucket(s3, bucket, corpus, sample_tokenizer, tmp_path):
    """Issue 30, item 10: export-tokenizer said "no manifest.json" for a URL that verify, stats and
    inspect read; it now reads the manifest alone (not the shards) from the bucket."""
    out = f"s3://{bucket}/mlm"
    run_transform([corpus], sample_tokenizer, out, workers=1, objective="mlm", seq_len=64)
    exported = run_cli("export-tokenizer", out, "-o", tmp_path / "tok")
    assert exported.returncode == 0, exported.stderr
    import sentencepiece as spm

    model = spm.SentencePieceProcessor(model_file=str(tmp_path / "tok" / "tokenizer.model"))
    manifest = json.loads(s3.cat_file(f"{bucket}/mlm/manifest.json"))
    for piece, token_id in manifest["special_tokens"]["added"].items():
        assert model.piece_to_id(piece) == token_id
    missing = run_cli("export-tokenizer", f"s3://{bucket}/nothing-here", "-o", tmp_path / "tok2")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "no such object or prefix" in missing.stderr


@pytest.mark.parametrize(
    ("url", "fix"),
    [
        ("s3://{b}//a//", "write s3://{b}/a/"),
        ("s3://{b}/a/./c", "write s3://{b}/a/c"),
        ("s3://{b}/a/../c", "name the key without '..'"),
    ],
)
def test_an_output_url_with_an_empty_or_dot_part_is_refused_before_any_work(
    s3, bucket, corpus, sample_tokenizer, url, fix
):
    """Issue 30, item 8: s3://bucket//a// processed everything, then failed with "shard … vanished" on
    every rerun, leaving .objcli-tmp behind."""
    done = run_cli("transform", corpus, "-t", sample_tokenizer, "-o", url.format(b=bucket), "-q")
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert (
        done.stderr.startswith(f"Error: -o {url.format(b=bucket)}: the path has an empty")
        and fix.format(b=bucket) in done.stderr
    )
    assert s3.ls(bucket) == []


def test_a_lock_that_names_no_writer_is_never_pid_none(s3, bucket):
    """Issue 30: the loser of a lock race read the winner's lock before it was whole and reported
    "pid None on None"; it now reads again, and names a lock it cannot read as another process."""
    from objcli.errors import ObjcliError
    from objcli.storage.remote_place import RemotePlace

    s3.pipe_file(f"{bucket}/out/.objcli-lock", b"")
    with pytest.raises(ObjcliError, match=r"another run \(another process\) is writing it") as raised:
        RemotePlace(f"s3://{bucket}/out").lock()
    assert "None" not in str(raised.value)


def _dead_staging() -> list:
    import tempfile
    from pathlib import Path

    from objcli.storage.staging import STAGING_PREFIX, process_alive

    found = Path(tempfile.gettempdir()).glob(f"{STAGING_PREFIX}*")
    return [
        p
        for p in found
        if p.name[len(STAGING_PREFIX) :].split("-")[0].isdigit()
        and not process_alive(int(p.name[len(STAGING_PREFIX) :].split("-")[0]))
    ]


def test_staging_folders_of_killed_runs_are_removed_and_no_others(tmp_path, monkeypatch):
    import subprocess
    import sys
    import tempfile

    from objcli.storage.staging import STAGING_PREFIX, remove_dead_staging

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead, live, other = (
        tmp_path / f"{STAGING_PREFIX}{gone.stdout.strip()}-x",
        tmp_path / f"{STAGING_PREFIX}{os.getpid()}-y",
        tmp_path / f"{STAGING_PREFIX}abcdef",
    )
    for folder in (dead, live, other):
        folder.mkdir()
        (folder / "part.arrow").write_bytes(b"x")
    remove_dead_staging()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])


@pytest.mark.heavy
def test_appending_to_an_output_in_a_bucket_gives_the_bytes_of_the_whole_run(s3, bucket, corpus, sample_tokenizer):
    """--append on object storage: the output's objects are copied server-side into the work prefix;
    the result is what transform(A + B) writes to the bucket."""
    url = upload(s3, corpus, f"{bucket}/corpus")
    a, b = f"{url}prose.jsonl", f"{url}more/big.jsonl"
    common = ["-t", str(sample_tokenizer), "--seq-len", "128", "--partition-size", "100000", "-q"]
    assert run_cli("transform", a, "-o", f"s3://{bucket}/grown", *common).returncode == 0
    result = run_cli("transform", b, "-o", f"s3://{bucket}/grown", "--append", "-t", str(sample_tokenizer), "-q")
    assert result.returncode == 0 and "appended: " in result.stderr, result.stderr
    # The whole run it equals: A then B, B starting partitions of its own (what the recipe records).
    run_transform(
        [a, b], sample_tokenizer, f"s3://{bucket}/whole", seq_len=128, partition_size="100000", input_breaks=[1]
    )
    assert objects(s3, f"{bucket}/grown") == objects(s3, f"{bucket}/whole")


@pytest.mark.heavy
def test_merge_and_reshard_read_and_write_buckets(s3, bucket, corpus, sample_tokenizer, tmp_path):
    """Sources and outputs on object storage give the shards local ones give; the manifest comes last."""
    url = upload(s3, corpus, f"{bucket}/corpus")
    common = ["-t", str(sample_tokenizer), "--seq-len", "128", "-q", "--shard-size", "30"]
    for name, source in (("a", f"{url}prose.jsonl"), ("b", f"{url}more/big.jsonl")):
        assert run_cli("transform", source, "-o", f"s3://{bucket}/{name}", *common).returncode == 0
        assert run_cli("transform", source, "-o", tmp_path / name, *common).returncode == 0
    for command, remote_args, local_args in (
        (
            "merge",
            (f"s3://{bucket}/a", f"s3://{bucket}/b", "-o", f"s3://{bucket}/m"),
            (tmp_path / "a", tmp_path / "b", "-o", tmp_path / "m"),
        ),
        (
            "reshard",
            (f"s3://{bucket}/m", "--shard-size", "70", "-o", f"s3://{bucket}/r"),
            (tmp_path / "m", "--shard-size", "70", "-o", tmp_path / "r"),
        ),
    ):
        for args in (remote_args, local_args):
            result = run_cli(command, *args, "-q")
            assert result.returncode == 0, result.stderr
    for name in ("m", "r"):
        remote, local = objects(s3, f"{bucket}/{name}"), local_bytes(tmp_path / name)
        assert remote.keys() == local.keys()
        made_from_manifest = ("manifest.json", "README.md")  # which name the sources as given
        assert {k: v for k, v in remote.items() if k not in made_from_manifest} == {
            k: v for k, v in local.items() if k not in made_from_manifest
        }
    merged = json.loads(objects(s3, f"{bucket}/m")["manifest.json"])
    assert [m["output"] for m in merged["merged_from"]] == [f"s3://{bucket}/a", f"s3://{bucket}/b"]
    again = run_cli("merge", f"s3://{bucket}/a", f"s3://{bucket}/b", "-o", f"s3://{bucket}/m")
    assert again.returncode == 1 and "not empty" in again.stderr and again.stderr.count("\n") == 1


@pytest.mark.heavy
def test_tokenized_inputs_in_a_bucket_are_read_as_their_local_copies(s3, bucket, tmp_path, monkeypatch):
    """Megatron-LM's, datatrove's and a datasets.map's files in a bucket: the same rows as the local
    files, the manifest naming the URLs with the files' sha256, provenance naming them too; the objects
    are fetched once per machine (a second run downloads nothing) and again once one is replaced."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    data = Path(__file__).resolve().parent.parent / "data" / "token_files"
    s3.put(f"{data}/", f"{bucket}/tokens/", recursive=True)
    spm, llama = SAMPLE / "tokenizer.model", SAMPLE / "llama-style" / "tokenizer.json"
    cases = [
        ("corpus_text_document", spm, {}),
        ("corpus_text_document.bin", spm, {"objective": "span-corruption"}),
        ("corpus_unshuffled.ds", llama, {}),
        ("mapped", spm, {}),
        ("mapped.parquet", spm, {"input_format": "input-ids"}),
    ]
    for name, tokenizer, options in cases:
        common = {"seq_len": 64, "provenance": True, **options}
        remote = run_transform([f"s3://{bucket}/tokens/{name}"], tokenizer, tmp_path / f"r-{name}", **common)
        local = run_transform([data / name], tokenizer, tmp_path / f"l-{name}", **common)
        digests = [[s["sha256"][s["files"][0]] for s in run.manifest["shards"]] for run in (remote, local)]
        assert digests[0] == digests[1], name
        (entry,) = remote.manifest["inputs"]
        assert (
            entry["path"] == f"s3://{bucket}/tokens/{name}" and entry["sha256"] == local.manifest["inputs"][0]["sha256"]
        )
        spans = pq.read_table(tmp_path / f"r-{name}" / remote.manifest["shards"][0]["files"][-1])
        assert set(spans.column("file").to_pylist()) == {entry["path"]}
    shown = run_cli("trace", tmp_path / "r-corpus_text_document", 3)
    assert shown.returncode == 0 and "tokens" in shown.stdout and "cannot be read" not in shown.stdout, shown.stderr
    s3.rm(f"{bucket}/tokens/plain_text_document.idx")
    missing = run_cli("transform", f"s3://{bucket}/tokens/plain_text_document", "-t", spm, "-o", tmp_path / "m")
    assert missing.returncode == 1 and "without s3://" in missing.stderr and missing.stderr.count("\n") == 1
    copies = sorted((tmp_path / "cache" / "objcli" / "remote-copies").iterdir())
    run_transform([f"s3://{bucket}/tokens/corpus_text_document"], spm, tmp_path / "again", seq_len=64)
    assert sorted((tmp_path / "cache" / "objcli" / "remote-copies").iterdir()) == copies
    cached = next(p for folder in copies for p in folder.glob("corpus_text_document.bin"))
    cached.write_bytes(cached.read_bytes()[:-100])  # a damaged cache, cut short: a later run fetches it again
    for given, out in ((f"s3://{bucket}/tokens/corpus_text_document", "mended"), (data / "corpus_text_document", "l")):
        assert run_cli("transform", given, "-t", spm, "--seq-len", "64", "-o", tmp_path / out).returncode == 0
    assert manifest_json(tmp_path / "mended")["shards"] == manifest_json(tmp_path / "l")["shards"]
    s3.put(str(data / "plain_text_document.bin"), f"{bucket}/tokens/corpus_text_document.bin")  # replaced
    s3.put(str(data / "plain_text_document.idx"), f"{bucket}/tokens/corpus_text_document.idx")
    s3.put(str(data / "plain_text_document.idx"), f"{bucket}/tokens/plain_text_document.idx")
    replaced = run_transform([f"s3://{bucket}/tokens/corpus_text_document"], spm, tmp_path / "new", seq_len=64)
    plain = run_transform([data / "plain_text_document"], spm, tmp_path / "plain", seq_len=64)
    assert replaced.manifest["shards"][0]["sha256"] == plain.manifest["shards"][0]["sha256"]
    assert len(list((tmp_path / "cache" / "objcli" / "remote-copies").iterdir())) == len(copies) + 1


@pytest.mark.heavy
def test_a_token_store_in_a_bucket(s3, bucket, corpus, sample_tokenizer, tmp_path):
    """objcli tokenize -o s3://…: the store's objects are the local store's bytes, verify reads it there,
    and a transform from it (with --provenance) writes what a transform from the local store writes;
    trace reaches the text through it."""
    common = ["-t", sample_tokenizer, "--provenance", "--partition-size", "60000"]
    assert run_cli("tokenize", corpus, *common, "-o", f"s3://{bucket}/store").returncode == 0
    assert run_cli("tokenize", corpus, *common, "-o", tmp_path / "store").returncode == 0
    listed = {n: v for n, v in local_bytes(tmp_path / "store").items() if n.endswith(".store")}
    assert {n: v for n, v in objects(s3, f"{bucket}/store").items() if n.endswith(".store")} == listed != {}
    assert run_cli("verify", f"s3://{bucket}/store").returncode == 0
    derive = ["--objective", "span-corruption", "--seq-len", "128", "--provenance"]
    done = run_cli("transform", f"s3://{bucket}/store", *derive, "-o", tmp_path / "remote")
    assert done.returncode == 0, done.stderr
    assert run_cli("transform", tmp_path / "store", *derive, "-o", tmp_path / "local").returncode == 0
    shards = {n: v for n, v in local_bytes(tmp_path / "local").items() if n.startswith("part-")}
    assert {n: v for n, v in local_bytes(tmp_path / "remote").items() if n.startswith("part-")} == shards
    shown = run_cli("trace", tmp_path / "remote", 0)
    assert shown.returncode == 0 and "cannot be read" not in shown.stdout and "characters" in shown.stdout


def test_a_plan_over_a_store_in_a_bucket_reads_from_anywhere(s3, bucket, corpus, sample_tokenizer, tmp_path):
    """A plan written to a bucket over a store in a bucket: objcli.reading.Rows reads it through its URL,
    its rows the rows of the same command written as Arrow; verify makes them there."""
    from objcli.reading import Rows

    assert run_cli("tokenize", corpus, "-t", sample_tokenizer, "-o", f"s3://{bucket}/store").returncode == 0
    derive = ["--objective", "mlm", "--seq-len", "64", "--split", "validation=10%"]
    done = run_cli("transform", f"s3://{bucket}/store", *derive, "--format", "plan", "-o", f"s3://{bucket}/plan")
    assert done.returncode == 0, done.stderr
    assert run_cli("transform", f"s3://{bucket}/store", *derive, "-o", tmp_path / "arrow").returncode == 0
    assert run_cli("verify", f"s3://{bucket}/plan").returncode == 0
    for split in ("train", "validation"):
        planned, written = Rows(f"s3://{bucket}/plan", split), Rows(tmp_path / "arrow", split)
        assert len(planned) == len(written) > 0
        for i in range(len(written)):
            assert all(np.array_equal(planned[i][c], written[i][c]) for c in written.columns)


@pytest.mark.heavy
def test_a_random_row_of_a_plan_over_a_bucket_store_is_read_by_ranges(
    s3, bucket, corpus, sample_tokenizer, tmp_path, monkeypatch
):
    """Issue 83, item 3: Rows over a plan in a bucket reads a random row's ids from the bucket's store by byte
    ranges, the blocks they lie in (with those one ranged GET brings beside them) and no more, each checked
    against its digest: no store shard is copied (the plan's own small files are), and an edited block is
    refused where it is read."""
    from objcli.errors import ObjcliError
    from objcli.reading import Rows

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    common = ["-t", sample_tokenizer, "--partition-size", "60000"]
    assert run_cli("tokenize", corpus, *common, "-o", f"s3://{bucket}/store").returncode == 0
    derive = ["--seq-len", "128"]
    done = run_cli("transform", f"s3://{bucket}/store", *derive, "--format", "plan", "-o", f"s3://{bucket}/plan")
    assert done.returncode == 0, done.stderr
    assert run_cli("transform", f"s3://{bucket}/store", *derive, "-o", tmp_path / "arrow").returncode == 0
    before = {p for p in (tmp_path / "cache").rglob("*") if p.is_file()}  # the derived run's copies
    planned, written = Rows(f"s3://{bucket}/plan"), Rows(tmp_path / "arrow")
    row = len(written) * 2 // 3
    assert all(np.array_equal(planned[row][c], written[row][c]) for c in written.columns)
    fetched = planned._opened_plan().stores[0]._blocks.blocks
    from objcli.reading.store_tokens import FETCH_BYTES
    from objcli.storage.blocks import BLOCK_BYTES

    assert len({shard for shard, _ in fetched}) == 1 and len(fetched) <= FETCH_BYTES // BLOCK_BYTES  # one GET's
    copied = [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file() and p not in before]
    assert copied and not [name for name in copied if ".store" in name], copied  # the plan's files, no shard
    (shard, block), data = next(iter(fetched.items()))
    name = shard.split(f"{bucket}/store/")[1]
    s3.pipe(f"{bucket}/store/{name}", bytes(reversed(s3.cat(f"{bucket}/store/{name}"))))  # edited in place
    again = Rows(f"s3://{bucket}/plan")
    again._opened_plan().stores[0]._blocks.blocks.clear()
    with pytest.raises(ObjcliError, match="does not match the digests"):
        again[row]


def test_a_process_that_changes_its_endpoint_reads_the_new_one(tmp_path):
    """A long-lived process (a notebook, a service, this suite's servers one after another) that points
    AWS_ENDPOINT_URL elsewhere reads the new endpoint: fsspec's kept client of the old one, whose server is
    gone, is not reused."""
    from objcli.inputs.token_store import is_store
    from objcli.storage.remote import filesystem

    seen = []
    for text in (b"first", b"second"):  # moto's servers in one process share their buckets: one each
        bucket = f"endpoints-{uuid.uuid4().hex[:12]}"
        with moto_s3() as client:
            client.mkdir(bucket)
            client.pipe(f"{bucket}/object", text)
            fs, inner = filesystem(f"s3://{bucket}/object")
            seen.append(fs.cat(inner))
            assert not is_store(f"s3://{bucket}/object")  # reaches the server: no "could not connect" line
    assert seen == [b"first", b"second"]
