"""A stop (Ctrl-C, SIGTERM) that lands inside the pool's own bookkeeping: the run still stops, one line.

CI saw a Ctrl-C in a loaded process-pool run print nothing for 120 s (and, once in twenty loaded runs, a
SIGTERM). The signal had landed in ``concurrent.futures.wait`` while it took the pending futures' locks one
by one: the KeyboardInterrupt left some taken, and the pool's manager thread (or a worker thread) waited
for them forever, the pool's shutdown with it. Loaded machines make the window wide (the main thread is
descheduled halfway through); these tests open it on purpose: a trace hook sends the signal to the process
exactly there, after the first lock is taken."""

import contextlib
import subprocess
import sys
import textwrap

import pytest
from runs import as_a_terminal_starts_it, manifest_json, run_cli

from objcli.executors import POOLS

# Runs objcli's command in a process whose main thread sends itself the signal inside
# ``_AcquireFutures.__enter__`` the first time that has taken one lock of several.
DRIVER = textwrap.dedent(
    """
    import signal, sys
    from concurrent.futures import _base

    stop = getattr(signal, sys.argv.pop(1))
    target = _base._AcquireFutures.__enter__.__code__
    sent = []

    def in_enter(frame, event, arg):
        if event == "line" and not sent and len(frame.f_locals["self"].futures) > 1:
            taken = [f for f in frame.f_locals["self"].futures if f._condition._is_owned()]
            if taken:
                sent.append(True)
                sys.stderr.write("SENT\\n")
                signal.raise_signal(stop)
        return in_enter

    def calls(frame, event, arg):
        return in_enter if frame.f_code is target else None

    sys.settrace(calls)
    sys.argv[0] = "objcli"
    from objcli.__main__ import run
    run()
    """
)


POOL_KINDS = [pool for pool in POOLS if pool != "auto"]


def _run_signalled(stop: str, args: list, ignored: bool = False) -> tuple[int, list[str]]:
    """The command run by DRIVER (with ``stop`` ignored from its start where asked, as a shell's
    ``trap '' INT`` or a background job leaves it): its status and what it printed."""
    command = [sys.executable, "-c", DRIVER, stop, *args]
    if ignored:
        command = ["bash", "-c", f'trap "" {stop.removeprefix("SIG")}; exec "$@"', "_", *command]
    start = None if ignored else as_a_terminal_starts_it  # a test run started in the background ignores SIGINT
    run = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, preexec_fn=start)
    try:
        stderr = run.communicate(timeout=300)[1]  # a deadline for a hang, not a measure of speed
    except subprocess.TimeoutExpired:
        run.kill()
        pytest.fail(f"{stop} inside the pool's wait: the run never ended")
    said = stderr.splitlines()
    assert said[0] == "SENT", stderr  # the signal landed where it is meant to
    return run.returncode, said[1:]


def _args(pool: str, corpus, tokenizer) -> list[str]:
    args = ["transform", str(corpus), "-t", str(tokenizer), "--pool", pool, "--workers", "2"]
    return [*args, "--partition-size", "16KiB", "--seq-len", "64"]


@pytest.mark.parametrize("pool", POOL_KINDS)
@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_a_stop_inside_the_pools_wait_stops_the_run_with_one_line(stop, pool, sample_tokenizer, small_corpus, tmp_path):
    out = tmp_path / "out"
    args = _args(pool, small_corpus, sample_tokenizer)
    status, said = _run_signalled(stop, [*args, "-o", str(out)])
    what = "interrupted" if stop == "SIGINT" else "terminated (SIGTERM)"
    go_on = "rerun the same command to go on (an output folder keeps its finished partitions)"
    assert said == [f"Error: {what}; {go_on}"]
    assert status == (130 if stop == "SIGINT" else 143)
    assert run_cli(*args, "-o", out, "-q").returncode == 0
    assert manifest_json(out)["complete"]


@pytest.mark.parametrize("pool", POOL_KINDS)
def test_a_ctrl_c_the_command_ignores_stays_ignored_inside_the_wait(pool, sample_tokenizer, small_corpus, tmp_path):
    """Held while the wait runs, the signal goes to the handler that was there: ignored, it is ignored."""
    out = tmp_path / "out"
    status, said = _run_signalled("SIGINT", [*_args(pool, small_corpus, sample_tokenizer), "-o", str(out)], True)
    assert status == 0 and len(said) == 1 and said[0].startswith("objcli: "), said
    assert manifest_json(out)["complete"]


def test_a_handler_set_outside_python_is_left_as_it_is(monkeypatch):
    """An embedding program's own handler (``getsignal`` None) cannot be put back: the wait leaves it."""
    import signal

    from objcli.executors import local

    real_getsignal, swapped = signal.getsignal, []
    monkeypatch.setattr(signal, "getsignal", lambda n: None if n == signal.SIGTERM else real_getsignal(n))
    real_signal = signal.signal
    monkeypatch.setattr(signal, "signal", lambda n, h: swapped.append(n) or real_signal(n, h))
    before = real_getsignal(signal.SIGINT)
    with local._stops_held():
        assert real_getsignal(signal.SIGINT) is not before  # Ctrl-C held meanwhile
    assert swapped == [signal.SIGINT, signal.SIGINT] and real_getsignal(signal.SIGINT) is before


@pytest.mark.parametrize("handler", ["default", "ignored"])
def test_a_ctrl_c_while_workers_start_is_acted_on_after_by_the_handler_that_was_there(handler):
    """While a pool starts its workers, Ctrl-C is masked (the workers inherit the mask) and held: after
    the block it raises KeyboardInterrupt there, or nothing where the command ignores it (it raised
    KeyboardInterrupt even then, before the hold went through the handler that was there)."""
    import signal

    from objcli.executors import local

    before = signal.signal(signal.SIGINT, signal.SIG_IGN if handler == "ignored" else signal.default_int_handler)
    reached = []
    try:
        with pytest.raises(KeyboardInterrupt) if handler == "default" else contextlib.nullcontext():
            with local._workers_ignore_sigint():
                signal.raise_signal(signal.SIGINT)
                reached.append("the block's end")  # the signal did not stop the block halfway
        assert reached == ["the block's end"]
    finally:
        signal.signal(signal.SIGINT, before)
