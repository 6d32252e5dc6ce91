"""UL2 mixture of denoisers (REFERENCE §7), chosen per example with configurable rates.

Each denoiser plans its own raw length, so rows stay exact-length: in the encoder-decoder layout
every row has ``input_ids`` of exactly ``--seq-len`` (mode token included) and ``labels`` of the
denoiser's planned targets length. Span denoisers (R, X) are T5 span corruption with their
(mean span, noise density); the S denoiser is a prefix LM whose inputs fill the row and whose
target is the fraction r of the raw example: prefix k = seq_len - mode - 1 tokens, target
round(k * r / (1 - r)) tokens.

Decoder layout: one row ``mode + inputs + targets`` (the encoder-decoder parts back to back),
padded to ``--seq-len``; ``labels`` = -100 except on the targets; ``prefix_lengths`` = the length
of ``mode + inputs``, over which attention is bidirectional.

A ``denoiser`` column holds each row's index into the table recorded in the manifest
(``config.objective_options.denoisers``); the observed counts are in the partition counters.
The tail of a partition too short for the next example is dropped (counted).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import tomllib

from ..errors import ObjcliError
from ..kernels import IGNORE
from ..kernels.ragged import lengths_to_offsets
from ..kernels.spans import corrupt_spans, example_lengths, random_spans, span_counts
from ..options import Options, option
from ..rng import derive_rng
from ..rows import ColumnSpec, Ragged, RowBatch
from .base import DocumentBatch, Objective, PartitionTransform, register
from .common import check_density, extra_ids_option, layout_option, plan_or_fail
from .stream import TokenStream

MODE_TOKENS = ("text", "special", "none")


@dataclass(frozen=True)
class Denoiser:
    kind: str  # "span" (R and X denoisers) or "prefix" (S)
    noise_density: float  # span: fraction of noise; prefix: fraction of the example that is target
    mean_span: float = 0.0  # span denoisers only
    mode: str = ""
    rate: float = 1.0
    name: str = ""

    def __post_init__(self):
        if self.kind not in ("span", "prefix"):
            raise ObjcliError(f"denoiser {self.name or '?'}: kind '{self.kind}' must be span or prefix")
        if self.kind == "span":
            check_density(self.noise_density, self.mean_span)
        elif not 0 < self.noise_density < 1:
            raise ObjcliError(f"denoiser {self.name or '?'}: noise_density must be between 0 and 1 (exclusive)")
        if self.rate < 0:
            raise ObjcliError(f"denoiser {self.name or '?'}: rate must not be negative")
        if not self.name:
            label = f"S-{self.noise_density:g}" if self.kind == "prefix" else f"{'R' if self.noise_density < 0.5 and self.mean_span < 12 else 'X'}-{self.mean_span:g}-{self.noise_density:g}"
            object.__setattr__(self, "name", label)


def _r(mu, r, rate=1.0):
    return Denoiser("span", r, mu, "[NLU]", rate)


def _x(mu, r, rate=1.0):
    return Denoiser("span", r, mu, "[NLG]", rate)


def _s(r=0.25, rate=1.0):
    return Denoiser("prefix", r, 0.0, "[S2S]", rate)


PRESETS = {
    # The UL2 paper's seven denoisers; uniform rates, as the public implementations use.
    "ul2": (_r(3, 0.15), _r(8, 0.15), _s(), _x(3, 0.5), _x(8, 0.5), _x(64, 0.15), _x(64, 0.5)),
    # The common three-denoiser simplification.
    "ul2-3": (_r(3, 0.15, 0.5), _s(rate=0.25), _x(32, 0.5, 0.25)),
    # UL2R (levanter): S half of the time, the three span denoisers share the rest.
    "ul2r": (_r(3, 0.15, 1 / 6), _x(32, 0.15, 1 / 6), _x(3, 0.5, 1 / 6), _s(rate=0.5)),
}
KNOWN_FIELDS = {f.name for f in fields(Denoiser)}


def load_mixture(spec: str) -> tuple[Denoiser, ...]:
    """A preset name, or a TOML file of ``[[denoiser]]`` tables with the fields of :class:`Denoiser`."""
    if spec in PRESETS:
        return PRESETS[spec]
    path = Path(spec)
    if not path.is_file():
        raise ObjcliError(f"--mixture {spec}: neither a preset ({', '.join(PRESETS)}) nor a TOML file")
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ObjcliError(f"mixture file {path}: not valid TOML ({error})") from None
    extra = set(table) - {"denoiser"}
    if extra or not isinstance(table.get("denoiser"), list) or not table["denoiser"]:
        raise ObjcliError(f"mixture file {path}: expected only [[denoiser]] tables (found: {', '.join(sorted(table))})")
    denoisers = []
    for number, entry in enumerate(table["denoiser"], 1):
        unknown = set(entry) - KNOWN_FIELDS
        if unknown:
            raise ObjcliError(
                f"mixture file {path}: denoiser {number} has unknown field '{sorted(unknown)[0]}' "
                f"(known: {', '.join(sorted(KNOWN_FIELDS))})"
            )
        if "kind" not in entry or "noise_density" not in entry:
            raise ObjcliError(f"mixture file {path}: denoiser {number} needs 'kind' and 'noise_density'")
        denoisers.append(Denoiser(**entry))
    return tuple(denoisers)


@dataclass(frozen=True)
class Ul2Options(Options):
    mixture: str = option("ul2", "Preset (ul2, ul2-3, ul2r) or a TOML file of [[denoiser]] tables.")
    mode_tokens: str = option("text", "[NLU]/[NLG]/[S2S] as text, one special id each, or none.", choices=MODE_TOKENS)
    layout: str = layout_option("encdec")
    extra_ids: int | None = extra_ids_option()
    denoisers: tuple[Denoiser, ...] = field(default=(), compare=False)

    def __post_init__(self):
        super().__post_init__()
        denoisers = self.denoisers or load_mixture(self.mixture)
        if sum(d.rate for d in denoisers) <= 0:
            raise ObjcliError(f"--mixture {self.mixture}: the rates sum to zero")
        if len({d.name for d in denoisers}) != len(denoisers):
            raise ObjcliError(f"--mixture {self.mixture}: denoiser names must be unique")
        object.__setattr__(self, "denoisers", tuple(denoisers))


@dataclass(frozen=True)
class _Plan:
    """Lengths of one denoiser's examples: raw tokens, inputs part (EOS included), targets."""

    raw: int
    inputs: int
    targets: int
    mode: np.ndarray


def _plan_span_decoder(budget: int, d: Denoiser) -> int:
    """Largest raw length whose inputs + targets fit in ``budget`` tokens."""
    raw = 2
    while raw < budget * 4 and sum(example_lengths(raw + 1, d.noise_density, d.mean_span)) <= budget:
        raw += 1
    if sum(example_lengths(raw, d.noise_density, d.mean_span)) > budget:
        raise ObjcliError(f"--seq-len {budget}: too small for denoiser {d.name}; choose a larger --seq-len")
    return raw


@register("ul2")
class Ul2(Objective):
    options_type = Ul2Options
    default_eos = False  # as T5 span corruption

    def __init__(self, config, tokenizer):
        super().__init__(config, tokenizer)
        o = self.options
        self.eos_id = tokenizer.resolve("eos")
        self.join_bos = tokenizer.resolve("bos") if config.bos else None
        self.join_eos = self.eos_id if config.eos else None
        self.pad_id = tokenizer.resolve("pad") if o.layout == "decoder" or config.packing != "none" else None
        self.denoisers = o.denoisers
        rates = np.array([d.rate for d in self.denoisers], dtype=np.float64)
        self.rates = rates / rates.sum()
        self.plans = [self._plan(d, self._mode_ids(d, tokenizer)) for d in self.denoisers]
        needed = max(
            [span_counts(p.raw, d.noise_density, d.mean_span)[1] for d, p in zip(self.denoisers, self.plans) if d.kind == "span"],
            default=0,
        )
        self.sentinels = np.array(tokenizer.resolve_sentinels(needed, o.extra_ids) if needed else [], dtype=np.int32)
        self.vocab_size = tokenizer.total_vocab_size

    def _mode_ids(self, d: Denoiser, tokenizer) -> np.ndarray:
        if self.options.mode_tokens == "none" or not d.mode:
            return np.zeros(0, dtype=np.int32)
        if self.options.mode_tokens == "special":
            return np.array([tokenizer.resolve(f"mode {d.mode}", d.mode)], dtype=np.int32)
        return tokenizer.encode([d.mode])[0]

    def _plan(self, d: Denoiser, mode: np.ndarray) -> _Plan:
        seq_len, m = self.config.seq_len, len(mode)
        if self.options.layout == "encdec":
            if d.kind == "span":
                raw, targets = plan_or_fail(seq_len - m, d.noise_density, d.mean_span, f"--seq-len minus the {d.name} mode token,")
                return _Plan(raw, seq_len - m, targets, mode)
            prefix = seq_len - m - 1
            target = max(1, round(prefix * d.noise_density / (1 - d.noise_density)))
            if prefix < 1:
                raise ObjcliError(f"--seq-len {seq_len}: too small for denoiser {d.name}")
            return _Plan(prefix + target, prefix + 1, target + 1, mode)
        if d.kind == "span":
            raw = _plan_span_decoder(seq_len - m, d)
            inputs, targets = example_lengths(raw, d.noise_density, d.mean_span)
            return _Plan(raw, inputs, targets, mode)
        raw = seq_len - m - 2
        if raw < 2:
            raise ObjcliError(f"--seq-len {seq_len}: too small for denoiser {d.name}")
        target = max(1, min(raw - 1, round(raw * d.noise_density)))
        return _Plan(raw, raw - target + 1, target + 1, mode)

    @classmethod
    def packers(cls, options) -> tuple[str, ...]:
        return ("none", "best-fit") if options.layout == "decoder" else ("none", "trim-and-pack")

    def example_columns(self) -> list[ColumnSpec]:
        top, seq_len = self.vocab_size - 1, self.config.seq_len
        index = ColumnSpec("denoiser", "scalar", 0, len(self.denoisers) - 1, "index into the mixture table",
                           role="category", categories=tuple(d.name for d in self.denoisers))
        if self.options.layout == "encdec":
            return [
                ColumnSpec("input_ids", "fixed", 0, top, "mode token(s) + corrupted inputs + EOS"),
                ColumnSpec("labels", "ragged", 0, top, "targets + EOS (length planned per denoiser)", role="labels",
                           family="labels"),
                index,
            ]
        return [
            ColumnSpec("input_ids", "fixed", 0, top, "mode + inputs + targets, padded"),
            ColumnSpec("labels", "fixed", IGNORE, top, "-100 except on the targets", role="labels"),
            ColumnSpec("prefix_lengths", "scalar", 1, seq_len, "bidirectional attention over positions < k",
                       role="prefix_length"),
            index,
        ]

    def partition_transform(self, partition_index: int):
        return _Ul2Partition(self, partition_index)


class _Ul2Partition(PartitionTransform):
    def __init__(self, objective: Ul2, partition: int):
        self.o = objective
        self.partition = partition
        self.counters: Counter = Counter()
        self.stream = TokenStream(objective.join_bos, objective.join_eos, self.counters)
        self.raw_lengths = np.array([p.raw for p in objective.plans], dtype=np.int64)

    def _rng(self, first_example: int, step: str) -> np.random.Generator:
        return derive_rng(self.o.config.seed, self.partition, first_example, f"ul2/{step}")

    def _denoise(self, d: Denoiser, plan: _Plan, tokens: np.ndarray, first_example: int):
        """(inputs part, targets part) as 2-D arrays for this denoiser's examples."""
        rows = len(tokens)
        eos = np.full((rows, 1), self.o.eos_id, dtype=tokens.dtype)
        if d.kind == "prefix":
            split = plan.inputs - 1
            return np.concatenate([tokens[:, :split], eos], axis=1), np.concatenate([tokens[:, split:], eos], axis=1)
        nonnoise, noise = random_spans(
            rows, plan.raw, d.noise_density, d.mean_span,
            self._rng(first_example, f"{d.name}/noise"), self._rng(first_example, f"{d.name}/nonnoise"),
        )
        return corrupt_spans(tokens, nonnoise, noise, self.o.sentinels, self.o.eos_id)

    def examples(self, batch: DocumentBatch) -> RowBatch | None:
        self.stream.extend(batch)
        most = len(self.stream) // int(self.raw_lengths.min())
        if most == 0:
            return None
        first_example = self.stream.examples_taken
        choice = self._rng(first_example, "denoiser").choice(len(self.o.denoisers), size=most, p=self.o.rates)
        ends = np.cumsum(self.raw_lengths[choice])
        rows = int(np.searchsorted(ends, len(self.stream), side="right"))
        if rows == 0:
            return None
        choice, ends = choice[:rows], ends[:rows]
        starts = ends - self.raw_lengths[choice]
        tokens, first, doc_ids = self.stream.take(int(ends[-1]))
        self.stream.count_split_at(first, doc_ids, starts)
        self.stream.examples_taken += rows
        documents = np.add.reduceat(first.astype(np.int64), starts)
        return self._assemble(tokens, starts, choice, documents, first_example)

    def _assemble(self, tokens, starts, choice, documents, first_example) -> RowBatch:
        o, rows = self.o, len(choice)
        seq_len = o.config.seq_len
        decoder = o.options.layout == "decoder"
        target_lengths = np.array([p.targets for p in o.plans])[choice]
        input_ids = np.full((rows, seq_len), o.pad_id if decoder else 0, dtype=np.int32)
        if decoder:
            labels = np.full((rows, seq_len), IGNORE, dtype=np.int32)
            prefix_lengths = np.zeros(rows, dtype=np.int32)
        else:
            label_offsets = np.concatenate([[0], np.cumsum(target_lengths)])
            label_values = np.empty(int(label_offsets[-1]), dtype=np.int32)
        used = np.zeros(rows, dtype=np.int64)
        for index, (d, plan) in enumerate(zip(o.denoisers, o.plans)):
            members = np.flatnonzero(choice == index)
            if not len(members):
                continue
            self.counters[f"denoiser {d.name}"] += len(members)
            examples = tokens[starts[members, None] + np.arange(plan.raw)]
            inputs, targets = self._denoise(d, plan, examples, first_example)
            head = np.concatenate([np.broadcast_to(plan.mode, (len(members), len(plan.mode))), inputs], axis=1)
            width = head.shape[1]
            input_ids[members, :width] = head
            if decoder:
                input_ids[members, width : width + targets.shape[1]] = targets
                labels[members, width : width + targets.shape[1]] = targets
                prefix_lengths[members] = width
                used[members] = width + targets.shape[1]
            else:
                label_values[label_offsets[members, None] + np.arange(targets.shape[1])] = targets
                used[members] = width + targets.shape[1]
        index_column = choice.astype(np.int32)
        if decoder:  # examples of their own lengths: the packer pads them, or packs several in a row
            inside = np.arange(seq_len)[None, :] < used[:, None]
            offsets = lengths_to_offsets(used)
            columns = {"input_ids": Ragged(input_ids[inside], offsets), "labels": Ragged(labels[inside], offsets),
                       "prefix_lengths": prefix_lengths, "denoiser": index_column}
            padding = seq_len - used
        else:
            columns = {"input_ids": input_ids, "labels": Ragged(label_values, label_offsets), "denoiser": index_column}
            padding = np.zeros(rows, dtype=np.int64)
        return RowBatch(columns, tokens=used, padding=padding, documents=documents)

    def finish(self) -> RowBatch | None:
        if len(self.stream):
            self.stream.drop_rest()
        return None
