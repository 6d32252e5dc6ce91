"""The parity probe and the engine choice: an engine that is not a reference encodes a run only
once it has encoded the probe text exactly as an independent reference does.

It encodes the probe text shipped in the package (``probe.txt``: every script the tests cover,
whitespace runs, digits, emoji, combining marks, long words), the model's own special-token texts and
the run's first batch, and an independent reference encodes the same; one differing text and the run
falls back to the reference with a one-line warning naming that text.

The choice is made once, in the main process (``choose_engine``); workers load the engine named in
the run's configuration and never probe again, so every partition encodes alike. A probe that passed
is kept in the user's cache (``$XDG_CACHE_HOME/objcli/probe-verdicts``) per tokenizer files' sha256,
engine name and version and objcli version: a later run of the same three finds it and starts
without loading the reference or probing; anything that differs probes again.
"""

from __future__ import annotations

import hashlib
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources

import numpy as np

from ..storage.user_cache import cache_folder, write_quietly
from .bpe_spec import Unsupported
from .engines import Missing
from .verdicts import keep_verdict, kept_verdict

PROBE_SAMPLE_CHARS = 256 * 1024  # of the run's first batch: the readable reference runs at about 5 MB/s


@dataclass
class EngineChoice:
    """The engine a run encodes with, and how it was proven exact (recorded in the manifest)."""

    engine: object
    probe: str

    def to_json(self) -> dict:
        return {"name": self.engine.name, "version": self.engine.version, "probe": self.probe}


def probe_texts(special_texts: list[str], sample: list[str]) -> list[str]:
    """The shipped probe text by paragraph, the model's special-token texts alone and in context,
    and up to PROBE_SAMPLE_CHARS of the run's first batch."""
    shipped = resources.files("objcli.tokenizers").joinpath("probe.txt").read_bytes().decode("utf-8")  # \r\n kept
    texts = [shipped, *shipped.split("\n\n")]
    texts += [f"{s}{t}x {t}\n{t}{t}" for t, s in zip(special_texts, ["", " ", "a", "\n"] * len(special_texts))]
    budget = PROBE_SAMPLE_CHARS
    for text in sample:
        if budget <= 0:
            break
        texts.append(text[:budget])
        budget -= len(text)
    return texts


@contextmanager
def on_one_core():
    """The calling thread kept to one core for the block. ``tokenizers`` 1.0 starts helper threads
    on a call whose thread may run on several cores, and every later call shares them: the probe,
    in the main thread, must start none, or the workers pinned to a core each where they fill the
    cores (``run/affinity.py``) would share them on a first run (measured: no gain then)."""
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    allowed = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(allowed)})
    except OSError:
        allowed = None
    try:
        yield
    finally:
        if allowed is not None:
            os.sched_setaffinity(0, allowed)


def first_difference(engine, reference, texts: list[str]) -> str | None:
    """The first text the two engines encode differently, or None."""
    with on_one_core():  # the same tokens; no helper threads left behind (on_one_core)
        a_tokens, a_offsets = engine.encode_batch(texts, 1)
    b_tokens, b_offsets = reference.encode_batch(texts, 1)
    for i, text in enumerate(texts):
        a = a_tokens[a_offsets[i] : a_offsets[i + 1]]
        b = b_tokens[b_offsets[i] : b_offsets[i + 1]]
        if len(a) != len(b) or not np.array_equal(a, b):
            return text
    return None


def describe(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    shown = repr(text[:60]) + ("…" if len(text) > 60 else "")
    return f"{shown} ({len(text):,} characters, sha256 {digest})"


FAST_NOTICE = (
    "a faster exact engine applies to {name} and is not installed: pip install 'objcli[fast]' "
    "(the same tokens, checked by the engine probe; several times the speed). Said once here"
)


def choose_engine(tokenizer, requested: str, sample: list[str], warn=None) -> EngineChoice:
    """The engine for a run: ``auto``, the fastest of ``tokenizer.engine_order()`` that takes the
    file and passes the probe; ``reference``, the family's reference; a name, that engine (probed,
    falling back to the reference on a difference). Under ``auto``, a run that settles for a slower
    engine because objcli[fast] is not installed says so, once per environment and tokenizer file (a
    file in the cache: a shared account's other environments, and other models, are told too)."""
    missing: list[str] = []
    choice = _choose_engine(tokenizer, requested, sample, warn, missing)
    if warn and requested == "auto" and missing and choice.engine.name not in missing:
        place = hashlib.sha256(f"{sys.prefix}\0{tokenizer.sha256}".encode()).hexdigest()[:16]
        notice = cache_folder("notices") / f"fast-engine-{place}"
        if not notice.exists():
            warn(FAST_NOTICE.format(name=tokenizer.path.name))
            write_quietly(notice, "said\n")
    return choice


def _choose_engine(tokenizer, requested: str, sample: list[str], warn, missing: list[str]) -> EngineChoice:
    say = warn or (lambda message: None)
    names = tokenizer.engine_order() if requested == "auto" else [requested]
    if requested == "reference":
        names = [tokenizer.reference_engine_name()]
    unprobed = None
    for name in names:
        engine = _made(tokenizer, name, requested, missing)
        if engine is None:
            continue
        if engine.reference:
            return EngineChoice(engine, "not needed: the reference engine")
        kept = kept_verdict(tokenizer, engine)
        if kept is not None:
            return EngineChoice(engine, kept)
        oracle = tokenizer.probe_reference(engine)
        if oracle is None:
            unprobed = unprobed or engine
            continue
        difference = first_difference(engine, oracle, probe_texts(tokenizer.special_texts(), sample))
        label = f"{oracle.name} {oracle.version}"
        if difference is None:
            # Said alike whether this run probed or found the verdict kept (the manifest's bytes do not
            # depend on a cache), so it names what a probe reads, not this run's counts.
            verdict = f"identical to {label} on the shipped probe, the special tokens' texts and a run's first batch"
            keep_verdict(tokenizer, engine, verdict)
            return EngineChoice(engine, verdict)
        say(
            f"engine {engine.name} {engine.version} encodes {describe(difference)} differently from {label}; "
            "falling back to " + ("the next engine" if requested == "auto" else "the reference")
        )
        if requested != "auto":
            return _choose_engine(tokenizer, "reference", sample, warn, missing)
    return _unprobed(tokenizer, unprobed, say)


def _made(tokenizer, name: str, requested: str, missing: list[str]):
    """The engine ``name`` for the tokenizer; None where it cannot take the file under ``auto`` (an
    objcli[fast] engine that is not installed is noted in ``missing``), one line when asked by name."""
    from ..errors import ObjcliError

    try:
        return tokenizer.make_engine(name)
    except Unsupported as why:
        if isinstance(why, Missing) and "objcli[fast]" in str(why):
            missing.append(name)
        if requested != "auto":
            raise ObjcliError(
                f"--engine {requested}: {name} cannot encode {tokenizer.path.name} ({why}); pass --engine auto"
            ) from None
        return None


def _unprobed(tokenizer, engine, say) -> EngineChoice:
    """No engine passed a probe: a pre-release that nothing independent reads, said, or an error."""
    from ..errors import ObjcliError

    if engine is None:
        raise ObjcliError(
            f"tokenizer {tokenizer.path}: no installed engine can encode it; install one with: pip install 'objcli[hf]'"
        )
    say(
        f"engine {engine.name} {engine.version} is a pre-release and no independent reference reads "
        f"{tokenizer.path.name}; its tokens are unchecked (install the stable release beside it for a checked run)"
    )
    return EngineChoice(engine, "not probed: no independent reference reads this file")
