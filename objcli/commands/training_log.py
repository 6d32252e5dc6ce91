"""Progress of a SentencePiece training, from SentencePiece's own log.

The trainer logs from C++ straight to file descriptor 2, and says nothing useful above its INFO
level. While it trains, descriptor 2 is a pipe that a thread reads: the few lines that tell how far
it is (sentences loaded, each EM iteration, BPE merges) become objcli progress lines, the rest of
its chatter is dropped, and objcli's own lines written meanwhile pass through unchanged.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from collections.abc import Iterator

PROGRESS = [
    (re.compile(r"Loaded all (\d+) sentences"), "loaded {0} sentences"),
    (re.compile(r"Alphabet size=(\d+)"), "{0} characters in the alphabet"),
    # Each EM round has sub-iterations and then prunes: one line per round.
    (re.compile(r"EM sub_iter=0 size=(\d+)"), "EM round: {0} pieces, pruning towards {vocab}"),
    (re.compile(r"Added: freq=\d+ size=(\d+)"), "BPE: {0} of {vocab} pieces"),
]
BPE_EVERY_SECONDS = 2.0


def _progress_line(line: str, vocab: int, last_bpe: list[float]) -> str | None:
    if line.startswith("objcli: "):
        return line.removeprefix("objcli: ").rstrip("\n")
    for pattern, text in PROGRESS:
        match = pattern.search(line)
        if match is None:
            continue
        if text.startswith("BPE"):  # a line per merge step: show one every few seconds
            if time.monotonic() - last_bpe[0] < BPE_EVERY_SECONDS:
                return None
            last_bpe[0] = time.monotonic()
        numbers = [f"{int(n):,}" for n in match.groups()]
        return text.format(*numbers, vocab=f"{vocab:,}")
    return None


@contextlib.contextmanager
def sentencepiece_progress(show: bool, vocab: int) -> Iterator[int]:
    """Yields the ``minloglevel`` to train with; while inside, progress lines go to standard error."""
    if not show:
        yield 2  # errors only: SentencePiece's INFO lines would flood the terminal
        return
    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    last_bpe = [0.0]

    def relay() -> None:
        with os.fdopen(read_end, "r", encoding="utf-8", errors="replace") as log:
            for line in log:
                text = _progress_line(line, vocab, last_bpe)
                if text:
                    os.write(saved, f"objcli: {text}\n".encode())

    thread = threading.Thread(target=relay, daemon=True)
    thread.start()
    try:
        yield 0
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe's last writer gone: the relay reads to its end and stops
        thread.join(timeout=10)
        os.close(saved)
