"""Weighted sources: ``--source web=data/web/ --source code=data/code/ --weights web=0.7,code=0.3``.

Each source is read in partitions of its own, so every row comes from one source, recorded in a
``source`` column (role ``category``; ``stats`` shows the realised mixture). A source's *rate* is how
many copies of each of its documents the output holds on average:

- ``--weights web=0.7,code=0.3``: shares of the output's tokens; the output keeps about the size of
  the inputs, so ``rate = weight x (all sources' tokens) / (this source's tokens)``;
- ``--weights web=5B,code=2B``: token budgets; ``rate = budget / (this source's tokens)``.

A source's tokens are estimated before the run: its text bytes (a first pass reads every document,
without tokenizing) times its tokens per byte, measured by tokenizing its first MiB of text.

Each document gets ``floor(rate)`` copies, plus one more when a uniform keyed to (seed, source, its
text) falls below the fractional part: downsampling is a keyed selection, upsampling repeats whole
documents. Copy j of a partition's documents is read in pass j over the partition (memory stays
one batch), at later positions of the partition's stream, so its random draws (masks, spans, FIM
points) are its own. Every pass reads the partition again: its documents count as read each time,
and those not copied in that pass as skipped (``mixture_not_sampled``), so read = written + skipped
still holds; the manifest's ``mixture`` gives each source's rate, documents and copies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ObjcliError
from ..kernels.rng import derive_rng
from .mixture_specs import parse_epochs, parse_weights
from .splits import NAME

SAMPLE_CHARS = 1 << 20  # text tokenized per source to measure its tokens per byte
NOT_SAMPLED = "mixture_not_sampled"


@dataclass(frozen=True)
class Mixture:
    """A run's sources as the command line gives them (``--source``, ``--weights``, ``--max-epochs``,
    ``--text-key``), parsed and checked once (``TransformConfig.mixture``); a run of plain INPUTS has
    none (``sources`` empty)."""

    sources: dict[str, tuple[str, ...]]  # name -> its paths, in first-seen order
    kind: str = ""  # "share" (of the output's tokens) or "budget" (tokens); "" without --weights
    weights: dict[str, float] | None = None  # shares normalised to 1, or budgets in tokens
    max_epochs: dict[str, float] | None = None
    text_key: str = "text"

    @classmethod
    def parse(cls, source: tuple[str, ...], weights: str = "", max_epochs: str = "", text_key: str = "text"):
        sources = {name: tuple(paths) for name, paths in parse_sources(tuple(source)).items()}
        names = list(sources)
        if "," in text_key or "=" in text_key:
            check_text_keys(text_key, names)
        kind, values = parse_weights(weights, names) if weights else ("", {})
        return cls(sources, kind, values, parse_epochs(max_epochs, names), text_key)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.sources)

    @property
    def paths(self) -> list[str]:
        """Every source's paths, source after source."""
        return [path for paths in self.sources.values() for path in paths]

    def source_of(self, path: str) -> str:
        return next((name for name, paths in self.sources.items() if path in paths), "")

    def text_key_of(self, source: str = "") -> str:
        """The field a source's text is in: ``--text-key content`` for every source, ``code=content``
        for one (the others read ``text``), ``body,code=content`` a default and one source's own."""
        own = {name: key for name, key, _ in _text_key_parts(self.text_key) if name is not None}
        defaults = [key for name, key, _ in _text_key_parts(self.text_key) if name is None]
        return own.get(source, defaults[-1] if defaults else "text")

    def names_text_key(self, source: str) -> bool:
        """Whether ``--text-key`` names a field for this source: its own, or one for every source."""
        return any(name in (None, source) for name, _, _ in _text_key_parts(self.text_key))

    def ids_key(self, source: str = "") -> str:
        """The column of a Hugging Face dataset's ids: the source's ``--text-key`` field where it names
        one, else input_ids."""
        key = self.text_key_of(source)
        return key if key != "text" else "input_ids"

    @classmethod
    def of_text_key(cls, text_key: str) -> Mixture:
        """The text keys of a recorded configuration (a manifest's), no sources checked."""
        return cls({}, text_key=text_key)


def parse_sources(specs: tuple[str, ...]) -> dict[str, list[str]]:
    """``("web=a/", "code=b/", "web=c.jsonl")`` -> {web: [a/, c.jsonl], code: [b/]}, in first-seen order."""
    sources: dict[str, list[str]] = {}
    for spec in specs:
        name, equals, path = spec.partition("=")
        if not equals or not NAME.fullmatch(name) or not path:
            raise ObjcliError(
                f"--source {spec}: give NAME=PATH (web=data/web/) with a lower-case name; repeat "
                "--source for more sources or more paths of one source"
            )
        sources.setdefault(name, []).append(path)
    return sources


def blend_shares(mixture: Mixture, partition_sources: dict[int, str]) -> dict[int, tuple[str, float]]:
    """A mixture a trainer blends (Megatron): each partition's source and that source's share of the
    output's tokens (budgets become their shares: the trainer's step count sets the tokens)."""
    total = sum(mixture.weights.values())
    return {index: (source, mixture.weights[source] / total) for index, source in partition_sources.items()}


def run_blend(config, partitions) -> dict[int, tuple[str, float]] | None:
    """The blend of a run whose format blends its sources (None otherwise): by its plan's partitions."""
    if not (config.source and config.format.blends_sources):
        return None
    return blend_shares(config.mixture, {p.index: p.source for p in partitions})


def manifest_blend(manifest) -> dict[int, tuple[str, float]] | None:
    """The same blend from a finished output's manifest (what verify and the rebuilds check against)."""
    config = manifest.config
    if not config.get("source"):
        return None
    mixture = Mixture.parse(tuple(config["source"]), config["weights"])
    return blend_shares(mixture, {p["index"]: p.get("source", "") for p in manifest.partitions})


def _text_key_parts(spec: str) -> list[tuple[str | None, str, str]]:
    """``--text-key``'s parts as (source or None for the default, field, the part as written)."""
    parts = []
    for part in spec.split(","):
        name, equals, key = part.partition("=")
        parts.append((name.strip(), key.strip(), part) if equals else (None, part.strip(), part))
    return parts


def check_text_keys(spec: str, names: list[str]) -> None:
    """Every SOURCE=KEY of ``--text-key`` names a source of the run, once, with a key."""
    parts = _text_key_parts(spec)
    empty = next((part for _, key, part in parts if not key), None)
    if empty is not None:
        raise ObjcliError(f"--text-key {spec}: '{empty}' names no field; give KEY or SOURCE=KEY (code=content)")
    named = [name for name, _, _ in parts if name is not None]
    if named and not names:
        raise ObjcliError(
            f"--text-key {spec}: SOURCE=KEY names a --source's own field; without --source give the field alone"
        )
    unknown = [n for n in named if n not in names] + [n for n in set(named) if named.count(n) > 1]
    if unknown or len(parts) - len(named) > 1:
        raise ObjcliError(
            f"--text-key {spec}: give one field for every source and SOURCE=KEY once for a source of its own "
            f"({', '.join(names)})"
        )


def exact_cut(uniform: np.ndarray, chars: np.ndarray, tokens: np.ndarray, wanted: float) -> list[list]:
    """The documents to take so that their tokens add up to within one small document of ``wanted``, as
    levels ``[threshold, most characters]``: a document is taken where its keyed uniform is below the
    first level's threshold, or between two levels' thresholds and no longer than the second's characters.

    Taken in the order of their uniforms, the first level stops before the first document that would pass
    ``wanted``; a long tail (one document of 300,000 tokens) would stop it far short. Each next level goes
    on past it over the documents short enough to fit what is left (characters: what the run knows of a
    document before it is encoded), until nothing is left or none fits."""
    order = np.argsort(uniform, kind="stable")
    u, c, t = uniform[order], chars[order], tokens[order]
    levels, start, left = [], 0, float(wanted)
    while start < len(u) and len(levels) < MAX_LEVELS:
        fits = _fitting_chars(c[start:], t[start:], left)
        if fits is None:
            break
        ends = np.cumsum(np.where(c[start:] <= fits, t[start:], 0))
        stop = start + int(np.searchsorted(ends, left, side="right"))  # before the first that would pass
        # stop > start: a document that fits is at most what is left, so the first one never passes it.
        threshold = 1.0 if stop >= len(u) else float((u[stop - 1] + u[stop]) / 2)  # halfway: no rounding moves one
        levels.append([threshold, None if fits >= c.max() else int(fits)])
        left -= float(ends[stop - start - 1])
        start = stop
    return levels


def _fitting_chars(chars: np.ndarray, tokens: np.ndarray, left: float) -> int | None:
    """The most characters below which every document has at most ``left`` tokens (None: none fits)."""
    if not len(chars):
        return None
    by_chars = np.argsort(chars, kind="stable")
    too_long = np.flatnonzero(np.maximum.accumulate(tokens[by_chars]) > left)
    if not len(too_long):
        return int(chars.max())
    if too_long[0] == 0:
        return None
    first = chars[by_chars[too_long[0]]]
    fits = int(first) - 1  # shorter than the first document too long: every one of those fits
    return fits if fits >= chars[by_chars[0]] else None


def taken(uniform: np.ndarray, chars: np.ndarray, levels) -> np.ndarray:
    """Whether each document is taken by a cut's levels (``exact_cut``)."""
    chosen = np.zeros(len(uniform), dtype=bool)
    low = 0.0
    for threshold, most in levels:
        inside = (uniform >= low) & (uniform < threshold)
        chosen |= inside if most is None else inside & (chars <= most)
        low = threshold
    return chosen


def source_rates(kind: str, values: dict[str, float], natural_tokens: dict[str, float]) -> dict[str, float]:
    """Each source's copies per document, from its estimated tokens."""
    for name, tokens in natural_tokens.items():
        if tokens <= 0:
            raise ObjcliError(f"--source {name}: holds no text; check its paths, or leave it out of --weights")
    if kind == "budget":
        return {name: values[name] / natural_tokens[name] for name in values}
    total = sum(natural_tokens.values())
    return {name: values[name] * total / natural_tokens[name] for name in values}


MAX_LEVELS = 16  # levels of a cut: each leaves less than the longest document that fits
MOST_COPIES = 100  # more copies of every document than this is a mistake, not a mixture
MANY_COPIES = 4  # past about four epochs, repeated data stops helping (Muennighoff et al., 2023)


def check_repeats(mixture: dict[str, dict], warn=None) -> None:
    """A share or budget that needs a source's every document many times over: a warning from
    MANY_COPIES, an error past MOST_COPIES (a budget in the wrong unit, a source that is mostly empty)."""
    for name, share in mixture.items():
        rate = share["rate"]
        if "capped_from" in share and warn:
            warn(
                f"source {name}: its share or budget needs {share['capped_from']:.2f} copies of each document; "
                f"capped at --max-epochs {name}={rate:g}, so it holds fewer tokens than asked"
            )
        tokens = share.get("estimated_tokens", share.get("counted_tokens"))
        if rate > MOST_COPIES:
            raise ObjcliError(
                f"--weights: source {name} holds about {tokens:,} tokens, so its share "
                f"needs {rate:,.0f} copies of every document (at most {MOST_COPIES}); lower its weight or "
                "budget, or give it more text"
            )
        if rate > MANY_COPIES and warn:
            warn(
                f"source {name}: every document is written about {rate:.1f} times to reach its share; repeated data "
                f"helps little past {MANY_COPIES} epochs"
            )


def mixture_totals(mixture: dict[str, dict], partitions, results) -> dict[str, dict]:
    """The manifest's ``mixture``: per source, what was asked and estimated, the rate, and the documents
    written (copies included) out of those read (every pass)."""
    out = {}
    for name, share in mixture.items():
        mine = [r for p, r in zip(partitions, results) if p.source == name]
        out[name] = {
            **share,
            "documents_read": sum(r.documents_read for r in mine),
            "documents_written": sum(r.documents_written for r in mine),
        }
    return out


def passes(rate: float) -> int:
    return max(1, math.ceil(rate))


class MixtureDraws:
    """Each document's keyed uniform in a mixture: keyed to its place (seed, source, partition, its number
    there in reading order), so identical texts are drawn apart and a run draws them alike whatever its
    batches, workers or document shuffle (the draws are made before it)."""

    def __init__(self, seed: int, source: str, partition: int):
        self.rng = derive_rng(seed, partition, 0, f"mixture:{source}")

    def next(self, count: int) -> np.ndarray:
        return self.rng.random(count)


def copies(uniform: np.ndarray, chars: np.ndarray, rate: float, cut) -> np.ndarray:
    """Copies of each document: ``floor(rate)``, plus one where its cut (``exact_cut``'s levels; None:
    the fraction of ``rate`` as one threshold, for sources whose tokens are estimated) takes it."""
    whole = math.floor(rate)
    levels = cut if cut is not None else [[rate - whole, None]]
    return whole + taken(uniform, chars, levels).astype(np.int64)
