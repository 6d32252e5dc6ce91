"""UL2's denoisers (REFERENCE §7): what one is (span corruption with its mean span and density, or
a prefix LM with its target fraction, a mode token and a rate), the paper's presets, and a mixture
read from a TOML file of ``[[denoiser]]`` tables (``--mixture``), and each one's lengths in a row (``Budget``)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import tomllib

from ..errors import ObjcliError
from ..kernels.spans import example_lengths
from .common import check_density


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
            label = (
                f"S-{self.noise_density:g}"
                if self.kind == "prefix"
                else f"{'R' if self.noise_density < 0.5 and self.mean_span < 12 else 'X'}-"
                f"{self.mean_span:g}-{self.noise_density:g}"
            )
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
class Budget:
    """Lengths of one denoiser's examples: raw tokens, inputs part (EOS included), targets."""

    raw: int
    inputs: int  # the most (the S denoiser's split varies)
    targets: int  # the most
    mode: np.ndarray
    min_split: int = 0  # S denoiser: the fewest raw tokens on the inputs side


def span_decoder_budget(budget: int, d: Denoiser) -> int:
    """Largest raw length whose inputs + targets fit in ``budget`` tokens."""
    raw = 2
    while raw < budget * 4 and sum(example_lengths(raw + 1, d.noise_density, d.mean_span)) <= budget:
        raw += 1
    if sum(example_lengths(raw, d.noise_density, d.mean_span)) > budget:
        raise ObjcliError(f"--seq-len {budget}: too small for denoiser {d.name}; choose a larger --seq-len")
    return raw


def prefix_budget(raw: int, d: Denoiser, mode: np.ndarray, seq_len: int) -> Budget:
    """The S denoiser: L = ``raw`` tokens split at k uniform in [min_split, L - 1]."""
    if raw < 2:
        raise ObjcliError(f"--seq-len {seq_len}: too small for denoiser {d.name}")
    min_split = min(raw - 1, max(1, round((1 - 2 * d.noise_density) * (raw - 1))))
    return Budget(raw, raw, raw - min_split + 1, mode, min_split)
