"""Regressions from issue 17 ("Hostile use"): each test is the reproduction of a defect that lost or
duplicated data with exit status 0."""

import json
import os
import signal

import pytest
from runs import as_a_terminal_starts_it, cli, manifest_json, run_cli, without_warnings


def _docs(path, count, tag):
    path.write_text(
        "".join(json.dumps({"text": f"{tag} document number {i}, with a few words."}) + "\n" for i in range(count))
    )


def _transform(*args):
    return cli(["transform", *map(str, args), "--seq-len", "16", "--workers", "1", "-q"])


def test_a_finished_output_is_rebuilt_when_an_input_changed(sample_tokenizer, tmp_path):
    """Item 1: appending to an input (or adding a file) after a finished run is not 'nothing to do'."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _docs(corpus / "a.jsonl", 20, "first")
    out = tmp_path / "out"
    assert _transform(corpus, "-t", sample_tokenizer, "-o", out).exit_code == 0
    _docs(corpus / "b.jsonl", 5, "added")
    again = _transform(corpus, "-t", sample_tokenizer, "-o", out)
    assert again.exit_code == 0 and "nothing to do" not in again.output
    assert "inputs changed since the finished run" in again.output
    assert manifest_json(out)["totals"]["documents_read"] == 25
    still = _transform(corpus, "-t", sample_tokenizer, "-o", out)  # unchanged now: left alone
    assert "nothing to do" in still.output


def test_files_under_hidden_folders_and_objcli_outputs_are_not_inputs(sample_tokenizer, tmp_path):
    """Items 3 and 4: `.git/objects/x.jsonl` was read, and an output inside the input folder fed back."""
    corpus = tmp_path / "corpus"
    (corpus / ".git" / "objects").mkdir(parents=True)
    _docs(corpus / "real.jsonl", 10, "real")
    _docs(corpus / ".git" / "objects" / "x.jsonl", 7, "hidden")
    inside = _transform(corpus, "-t", sample_tokenizer, "-o", corpus / "out")
    assert inside.exit_code != 0 and f"Error: output {corpus / 'out'}: inside the input folder" in inside.output
    assert not (corpus / "out").exists()
    first = _transform(corpus / "*.jsonl", "-t", sample_tokenizer, "-o", corpus / "out", "--format", "parquet")
    assert first.exit_code == 0 and manifest_json(corpus / "out")["totals"]["documents_read"] == 10
    second = _transform(corpus, "-t", sample_tokenizer, "-o", tmp_path / "elsewhere")
    assert second.exit_code == 0, second.output
    totals = manifest_json(tmp_path / "elsewhere")["totals"]
    assert totals["documents_read"] == 10 and totals["documents_skipped"] == 0  # no shards, no manifest.json read


def test_pipes_named_as_paths_are_read_once_like_standard_input(sample_tokenizer, tmp_path):
    """Item 2: `<(cat three.jsonl)` read 0 documents (the sniffer consumed the pipe), a larger one
    lost its first bytes, and a named FIFO hung."""
    import gzip
    import threading

    corpus = tmp_path / "three.jsonl"
    _docs(corpus, 3000, "piped")  # more than a pipe buffer: the sniffer's reads would cost data
    common = ["-t", sample_tokenizer, "--seq-len", "16", "--workers", "2", "-q"]
    assert run_cli("transform", corpus, *common, "-o", tmp_path / "file").returncode == 0
    shards = [s["sha256"] for s in manifest_json(tmp_path / "file")["shards"]]
    for data in (corpus.read_bytes(), gzip.compress(corpus.read_bytes())):
        read_end, write_end = os.pipe()
        threading.Thread(target=lambda w=write_end, d=data: (os.write(w, d), os.close(w)), daemon=True).start()
        piped = run_cli("transform", f"/dev/fd/{read_end}", *common, "-o", tmp_path / "pipe", pass_fds=(read_end,))
        os.close(read_end)
        assert piped.returncode == 0, piped.stderr
        assert [s["sha256"] for s in manifest_json(tmp_path / "pipe")["shards"]] == shards
    fifo = tmp_path / "named.fifo"
    os.mkfifo(fifo)
    threading.Thread(target=lambda: fifo.write_bytes(corpus.read_bytes()), daemon=True).start()
    named = run_cli("transform", fifo, *common, "-o", tmp_path / "fifo", "--input-format", "jsonl")
    assert named.returncode == 0 and manifest_json(tmp_path / "fifo")["totals"]["documents_read"] == 3000
    resumed = run_cli("transform", fifo, *common, "-o", tmp_path / "fifo", "--resume")
    assert resumed.returncode != 0 and "is a stream, read once" in resumed.stderr


def test_the_same_input_named_twice_is_read_once(sample_tokenizer, tmp_path, monkeypatch):
    """Item 6: `a.jsonl ./a.jsonl`, a file and its folder, overlapping globs duplicated training data."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _docs(corpus / "a.jsonl", 12, "only")
    monkeypatch.chdir(tmp_path)
    result = _transform(
        "corpus/a.jsonl", "./corpus/a.jsonl", "corpus", "corpus/*.jsonl", "-t", sample_tokenizer, "-o", tmp_path / "out"
    )
    assert result.exit_code == 0
    assert manifest_json(tmp_path / "out")["totals"]["documents_read"] == 12
    assert "input ./corpus/a.jsonl is named more than once; reading it once" in result.output


def test_resume_after_a_kill_before_the_first_partition_finished(sample_tokenizer, tmp_path):
    """Item 13: the folder holds the interrupted run's .objcli-tmp/; --resume must continue it."""
    corpus = tmp_path / "corpus.jsonl"
    _docs(corpus, 200, "many")
    out = tmp_path / "out"
    args = ["transform", corpus, "-t", sample_tokenizer, "--seq-len", "16", "--workers", "1", "-q", "-o", out]
    killed = run_cli(*args, env={"OBJCLI_CRASH_AT": "partition-start:1"})
    assert killed.returncode == -signal.SIGKILL
    resumed = run_cli(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert manifest_json(out)["totals"]["documents_read"] == 200


@pytest.mark.parametrize("where", ["local", "fresh"])
def test_resume_after_a_kill_before_anything_was_written(sample_tokenizer, tmp_path, where):
    """Issue 30: killed in its first half second, a run left only its lock (no run file), and --resume
    was refused ("holds no earlier run"). A folder with only a dead run's lock now starts the run;
    a folder that never held a run is still refused with --resume."""
    corpus = tmp_path / "corpus.jsonl"
    _docs(corpus, 50, "few")
    out = tmp_path / "out"
    args = ["transform", corpus, "-t", sample_tokenizer, "--seq-len", "16", "--workers", "1", "-q", "-o", out]
    if where == "local":
        killed = run_cli(*args, env={"OBJCLI_CRASH_AT": "locked:1"})
        assert killed.returncode == -signal.SIGKILL
        assert sorted(p.name for p in out.iterdir()) == [".objcli-lock"]
        resumed = run_cli(*args, "--resume")
        assert resumed.returncode == 0, resumed.stderr
        assert manifest_json(out)["totals"]["documents_read"] == 50
    else:
        out.mkdir()
        refused = run_cli(*args, "--resume")
        assert refused.returncode == 1 and "holds no earlier run of this configuration" in refused.stderr


@pytest.mark.heavy
def test_pool_workers_exit_when_the_main_process_is_killed(small_corpus, sample_tokenizer, tmp_path):
    """Item 12: after SIGKILL of the main process, spawned workers stayed alive for minutes."""
    import subprocess
    import sys
    import time

    import psutil

    corpus = tmp_path / "big.jsonl"
    text = (small_corpus / "prose.jsonl").read_text()
    corpus.write_text(text * 40)
    main_process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "objcli",
            "transform",
            str(corpus),
            "-t",
            sample_tokenizer,
            "-o",
            str(tmp_path / "out"),
            "--objective",
            "nsp",
            "--seq-len",
            "64",
            "--workers",
            "2",
            "--pool",
            "processes",
            "--partition-size",
            "200000",
            "-q",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    parent = psutil.Process(main_process.pid)
    deadline = time.monotonic() + 60
    workers = []
    while time.monotonic() < deadline and len(workers) < 2:
        workers = [c for c in parent.children(recursive=True) if "resource_tracker" not in " ".join(c.cmdline())]
        time.sleep(0.1)
    assert len(workers) >= 2, "the pool never started"
    time.sleep(1.0)  # the workers have run their initializer
    main_process.kill()
    main_process.wait()
    gone, alive = psutil.wait_procs(workers, timeout=15)
    assert not alive, f"{len(alive)} workers outlived the killed run"


def test_a_second_writer_of_an_output_folder_is_refused_in_one_line(sample_tokenizer, tmp_path):
    """Item 5: two runs into one folder deleted each other's temp files and both failed."""
    import fcntl

    corpus = tmp_path / "a.jsonl"
    _docs(corpus, 10, "locked")
    out = tmp_path / "out"
    out.mkdir()
    with open(out / ".objcli-lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("pid 4242 on somehost")
        held.flush()
        result = _transform(corpus, "-t", sample_tokenizer, "-o", out)
    assert result.exit_code == 1
    assert result.output == (
        f"Error: output {out}: another run (pid 4242 on somehost) is writing it; "
        "wait for it to finish or choose another -o\n"
    )
    assert _transform(corpus, "-t", sample_tokenizer, "-o", out).exit_code == 0  # free again


def test_workers_and_partition_size_have_sane_minimums(sample_tokenizer, tmp_path):
    """Rough edges: --workers 0 silently meant all cores; --partition-size 1 made a partition per byte."""
    corpus = tmp_path / "a.jsonl"
    _docs(corpus, 3, "few")
    zero = cli(["transform", str(corpus), "-t", sample_tokenizer, "-o", str(tmp_path / "o"), "--workers", "0"])
    assert zero.exit_code == 1 and zero.output == "Error: --workers 0: must be between 1 and 4096\n"
    tiny = _transform(corpus, "-t", sample_tokenizer, "-o", tmp_path / "o", "--partition-size", "1")
    assert tiny.exit_code == 1 and tiny.output.startswith("Error: --partition-size 1: must be at least 16KiB")


def test_options_that_would_do_nothing_are_errors(sample_tokenizer, tmp_path):
    """Rough edges: --text-unit on JSON lines and --eos-token '' were accepted and ignored."""
    corpus = tmp_path / "a.jsonl"
    _docs(corpus, 3, "few")
    unit = _transform(corpus, "-t", sample_tokenizer, "-o", tmp_path / "o", "--text-unit", "paragraph")
    assert unit.exit_code == 1 and unit.output.startswith("Error: --text-unit paragraph: applies to plain-text inputs")
    (tmp_path / "b.txt").write_text("a plain line\n")
    mixed = _transform(corpus, tmp_path / "b.txt", "-t", sample_tokenizer, "-o", tmp_path / "o", "--text-unit", "file")
    assert mixed.exit_code == 0  # it applies to b.txt
    empty = _transform(corpus, "-t", sample_tokenizer, "-o", tmp_path / "o2", "--eos-token", "")
    assert empty.exit_code == 1 and empty.output.startswith("Error: --eos-token '': an empty piece is no token")


@pytest.mark.parametrize(
    "body, reason",
    [
        ('[{"text": 5}, {"text": 6}]\n', "2 not_a_string"),  # a .json file holding one JSON array
        ('{"text": 5}\n{"text": ["a"]}\n', "2 not_a_string"),  # a text field that is never a string
    ],
)
def test_a_run_in_which_every_record_is_bad_is_an_error(sample_tokenizer, tmp_path, body, reason):
    """Rough edge: a run that wrote nothing because every record was bad exited 0 without a word."""
    corpus = tmp_path / "records.json"
    corpus.write_text(body)
    result = _transform(corpus, "-t", sample_tokenizer, "-o", tmp_path / "o")
    assert result.exit_code == 1
    assert f"Error: inputs: every record read ({reason.split()[0]}) was skipped ({reason})" in result.output
    assert not (tmp_path / "o" / "manifest.json").exists()


def test_a_run_that_writes_no_row_warns_why(sample_tokenizer, tmp_path):
    """Rough edge: a --seq-len longer than the corpus (or an empty input) wrote nothing, silently."""
    corpus = tmp_path / "a.jsonl"
    _docs(corpus, 3, "few")
    short = cli(
        [
            "transform",
            str(corpus),
            "-t",
            sample_tokenizer,
            "-o",
            str(tmp_path / "o"),
            "--seq-len",
            "100000",
            "--workers",
            "1",
        ],
    )
    assert short.exit_code == 0 and "warning: no row was written: each partition's tokens" in short.output
    assert "pass --remainder pad or a smaller --seq-len" in short.output
    (tmp_path / "empty.jsonl").write_text("")
    nothing = cli(["transform", str(tmp_path / "empty.jsonl"), "-t", sample_tokenizer, "-o", str(tmp_path / "o2")])
    assert nothing.exit_code == 0 and "warning: no document was read" in nothing.output
    padded = cli(
        [
            "transform",
            str(corpus),
            "-t",
            sample_tokenizer,
            "-o",
            str(tmp_path / "o3"),
            "--seq-len",
            "100000",
            "--remainder",
            "pad",
            "-q",
        ],
    )
    assert padded.exit_code == 0 and manifest_json(tmp_path / "o3")["totals"]["rows"] == 1


def test_paragraphs_keep_no_line_ends_and_read_crlf_as_lf(tmp_path):
    """Item 10: the last paragraph kept its newline, and CR survived in CRLF files."""
    from readback import text_inputs

    from objcli.inputs import ReadOptions, RecordLog, cut_partitions, read_documents

    path = tmp_path / "p.txt"
    path.write_bytes(b"first line\r\nsecond line\r\n\r\nlast paragraph\r\n")
    files = text_inputs([str(path)])
    texts = [
        t
        for p in cut_partitions(files, 1 << 30, "paragraph")
        for batch in read_documents(p, ReadOptions("text", "paragraph", False, 1 << 20), RecordLog(False))
        for t in batch
    ]
    assert texts == ["first line\nsecond line", "last paragraph"]


def test_byte_order_marks(sample_tokenizer, tmp_path):
    """Item 11: UTF-16 text became NUL-interleaved training data; a UTF-8 BOM cost the first record."""
    utf16 = tmp_path / "u16.txt"
    utf16.write_bytes("hello world\n".encode("utf-16"))
    result = _transform(utf16, "-t", sample_tokenizer, "-o", tmp_path / "o16")
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: input {utf16}: UTF-16 text (it starts with a byte-order mark)")
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + b"".join(json.dumps({"text": f"doc {i}"}).encode() + b"\n" for i in range(3)))
    ok = _transform(bom, "-t", sample_tokenizer, "-o", tmp_path / "obom")
    assert ok.exit_code == 0
    totals = manifest_json(tmp_path / "obom")["totals"]
    assert totals["documents_read"] == 3 and "bad_json" not in totals["skipped_by_reason"]


def test_stats_and_inspect_on_a_truncated_shard_and_a_plot_into_a_missing_folder(sample_tokenizer, tmp_path):
    """Item 8: tracebacks where one line was promised (and the text stats lost to a failed plot)."""
    corpus = tmp_path / "a.jsonl"
    _docs(corpus, 200, "many")
    out = tmp_path / "out"
    assert _transform(corpus, "-t", sample_tokenizer, "-o", out).exit_code == 0
    plot = cli(["stats", str(out), "--plot", str(tmp_path / "missing" / "x.png")])
    assert plot.exit_code == 1 and plot.output.startswith("Error: --plot") and len(plot.output.splitlines()) == 1
    shard = next(out.glob("part-*"))
    shard.write_bytes(shard.read_bytes()[:300])
    for command in (["stats", str(out)], ["inspect", str(out), "-n", "2"]):
        result = cli(command)
        assert result.exit_code == 1 and len(result.output.splitlines()) == 1
        assert result.output.startswith(f"Error: {shard}: cannot be read (")


def test_stats_say_what_is_not_known_instead_of_misreporting(sample_tokenizer, small_corpus, tmp_path):
    """Item 9: NSP without --mlm showed 70.9 % supervised tokens; Megatron and Arrow disagreed."""
    from objcli.commands.stats import compute_stats

    cli(
        [
            "transform",
            str(small_corpus / "prose.jsonl"),
            "-t",
            sample_tokenizer,
            "-o",
            str(tmp_path / "nsp"),
            "--objective",
            "nsp",
            "--seq-len",
            "64",
            "-q",
        ],
    )
    nsp = compute_stats(tmp_path / "nsp")
    assert nsp["supervision"] == "example-labels" and nsp["supervised_tokens"] == 0
    for fmt in ("arrow", "megatron"):  # Megatron's rows packed by concat: it stores no segment ids
        _transform(
            small_corpus / "prose.jsonl",
            "-t",
            sample_tokenizer,
            "-o",
            tmp_path / fmt,
            "--format",
            fmt,
            "--packing",
            "concat",
        )
    arrow, megatron = compute_stats(tmp_path / "arrow"), compute_stats(tmp_path / "megatron")
    assert arrow["examples_per_row"] > 1 and megatron["examples_per_row"] is None
    _transform(small_corpus / "prose.jsonl", "-t", sample_tokenizer, "-o", tmp_path / "whole", "--format", "megatron")
    assert compute_stats(tmp_path / "whole")["examples_per_row"] == 1.0  # whole documents: one per row
    assert megatron["supervised_tokens"] is None and megatron["tokens"] == arrow["tokens"]


def test_special_tokens_that_collide_are_refused_and_ordinary_pieces_warned(sample_tokenizer, small_corpus, tmp_path):
    """Item 7: EOS = [MASK], FIM sentinels on EOS/BOS or on one ordinary piece; verify passed them all."""
    corpus = small_corpus / "prose.jsonl"
    collisions = [
        ["--objective", "mlm", "--eos-token", "[MASK]"],
        ["--objective", "fim", "--fim-tokens", "</s>,<s>,<pad>,<unk>"],
        ["--objective", "fim", "--fim-tokens", "A,A,A,A"],
    ]
    for flags in collisions:
        result = _transform(corpus, "-t", sample_tokenizer, "-o", tmp_path / "o", *flags)
        assert result.exit_code == 1 and result.output.startswith("Error: special tokens collide: "), flags
        assert len(result.output.splitlines()) == 1
    word = _transform(corpus, "-t", sample_tokenizer, "-o", tmp_path / "w", "--eos-token", "\u2581the")
    assert word.exit_code == 0
    assert "the eos token '\u2581the'" in word.output and "is an ordinary piece: text can produce it" in word.output


@pytest.mark.heavy
def test_ctrl_c_in_a_process_pool_run_is_one_line(sample_tokenizer, small_corpus, tmp_path):
    """Item 8: SIGINT early in a process-pool run printed ~70 lines of interleaved worker tracebacks.
    Ctrl-C signals the whole process group, workers included; whenever it comes, what is printed is one
    line (the interruption, or the summary if the run had finished) and a rerun finishes the output."""
    import subprocess
    import sys

    args = [
        sys.executable,
        "-m",
        "objcli",
        "transform",
        str(small_corpus),
        "-t",
        str(sample_tokenizer),
        "--pool",
        "processes",
        "--workers",
        "2",
        "--partition-size",
        "16KiB",
        "--seq-len",
        "64",
    ]
    for state in RUN_STATES:
        out = tmp_path / f"out-{state}"
        run = subprocess.Popen(
            [*args, "-o", str(out)],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=as_a_terminal_starts_it,
            text=True,
        )
        wait_for_run_state(run, out, state)
        os.killpg(run.pid, signal.SIGINT)
        stderr = run.communicate(timeout=120)[1]
        assert "Traceback" not in stderr and len(stderr.splitlines()) <= 1, stderr
        if run.returncode == 130:
            assert stderr.startswith("Error: interrupted; rerun the same command")
        assert run_cli(*args[3:], "-o", out, "-q").returncode == 0
        assert manifest_json(out)["complete"]


RUN_STATES = ("locked", "partition begun", "partition done", "two partitions done")


def wait_for_run_state(run, out, state: str, timeout: float = 120) -> None:
    """Wait until a run into ``out`` reached ``state`` (its lock taken, a partition's first file in the
    work folder, one or two partitions finished), or ended: a busy machine only makes this take longer,
    never makes the signal land before the run began (a fixed sleep did, on a loaded 2-core CI)."""
    import time

    work = out / ".objcli-tmp"
    reached = {
        "locked": lambda: (out / ".objcli-lock").exists() and (out / ".objcli-lock").read_text().startswith("pid"),
        "partition begun": lambda: any(p.name.startswith("p0") for p in work.glob("*")),
        "partition done": lambda: len(list(work.glob("*.done.json"))) >= 1,
        "two partitions done": lambda: len(list(work.glob("*.done.json"))) >= 2,
    }[state]
    deadline = time.monotonic() + timeout
    while run.poll() is None and time.monotonic() < deadline:
        try:
            if reached():
                return
        except OSError:  # the folder is being made or renamed
            pass
        time.sleep(0.01)  # polling the state, not waiting a fixed time for it


@pytest.mark.heavy
@pytest.mark.parametrize("pool", ["processes", pytest.param("threads", marks=pytest.mark.slow)])
def test_sigterm_is_one_line_without_leaked_semaphores_and_a_rerun_finishes(
    sample_tokenizer, small_corpus, tmp_path, pool
):
    """Issue 30: SIGTERM (a scheduler stopping the job, `kill`) ended the main process by the default
    action, and multiprocessing's resource tracker printed "leaked semaphore objects"; it is now handled
    as Ctrl-C is: workers stopped, the lock released, one line, exit 143, and the rerun finishes."""
    import subprocess
    import sys

    corpus = tmp_path / "big.jsonl"
    corpus.write_text((small_corpus / "prose.jsonl").read_text() * 30)
    args = [
        sys.executable,
        "-m",
        "objcli",
        "transform",
        str(corpus),
        "-t",
        str(sample_tokenizer),
        "--objective",
        "nsp",
        "--pool",
        pool,
        "--workers",
        "2",
        "--partition-size",
        "64KiB",
        "--seq-len",
        "64",
    ]
    terminated = 0
    for state in ("partition begun", "partition done"):
        out = tmp_path / f"out-{state}"
        run = subprocess.Popen([*args, "-o", str(out)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        wait_for_run_state(run, out, state)
        run.send_signal(signal.SIGTERM)
        stderr = without_warnings(run.communicate(timeout=120)[1])  # nsp allocates [CLS] and [SEP]: a warning
        assert "leaked" not in stderr and "Traceback" not in stderr and len(stderr.splitlines()) <= 1, stderr
        if run.returncode == 143:
            terminated += 1
            assert stderr == (
                "Error: terminated (SIGTERM); rerun the same command to go on (an output folder keeps "
                "its finished partitions)\n"
            )
            assert (out / ".objcli-lock").read_text() == ""  # released: no writer named
        assert run_cli(*args[3:], "-o", out, "-q").returncode == 0
        assert manifest_json(out)["complete"]
    assert terminated  # at least one signal landed mid-run


def test_a_rerun_with_nothing_to_do_leaves_a_make_friendly_stamp(sample_tokenizer, tmp_path):
    """Rough edge: with OUT/manifest.json as a Make target, a rerun that had nothing to do kept the old
    mtime, so Make ran the recipe again every time. Now it rewrites nothing and stamps the manifest."""
    corpus = tmp_path / "a.jsonl"
    _docs(corpus, 10, "stamped")
    out = tmp_path / "out"
    assert _transform(corpus, "-t", sample_tokenizer, "-o", out).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    os.utime(out / "manifest.json", (946684800, 946684800))  # 2000-01-01
    again = _transform(corpus, "-t", sample_tokenizer, "-o", out)
    assert again.exit_code == 0
    assert (out / "manifest.json").stat().st_mtime > corpus.stat().st_mtime
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


@pytest.mark.heavy
def test_a_stop_that_hangs_ends_after_its_grace_with_one_line(sample_tokenizer, small_corpus, tmp_path):
    """SIGTERM whose stop never ends (a fault point that hangs where the pool's workers are stopped): after
    OBJCLI_STOP_GRACE_S the process still ends, 143 and the one line, and the rerun finishes."""
    import subprocess
    import sys

    corpus = tmp_path / "big.jsonl"
    corpus.write_text((small_corpus / "prose.jsonl").read_text() * 30)
    args = ["transform", str(corpus), "-t", str(sample_tokenizer), "--objective", "nsp", "--pool", "processes"]
    args += ["--workers", "2", "--partition-size", "64KiB", "--seq-len", "64"]
    out = tmp_path / "out"
    env = {**os.environ, "OBJCLI_CRASH_AT": "stopping:1:HANG", "OBJCLI_STOP_GRACE_S": "2"}
    run = subprocess.Popen(
        [sys.executable, "-m", "objcli", *args, "-o", str(out)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    wait_for_run_state(run, out, "partition begun")
    run.send_signal(signal.SIGTERM)
    stderr = without_warnings(run.communicate(timeout=120)[1])
    assert run.returncode == 143, stderr
    first, *rest = stderr.splitlines()
    assert first == (
        "Error: terminated (SIGTERM); rerun the same command to go on (an output folder keeps its finished partitions)"
    )
    assert not rest or "resource_tracker" in rest[0], rest  # the tracker unlinks the pool's semaphores, and says so
    assert run_cli(*args, "-o", out, "-q").returncode == 0
    assert manifest_json(out)["complete"]
