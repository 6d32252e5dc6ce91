"""``--weights`` and ``--max-epochs`` as written (``web=0.7,code=0.3``, ``code=2B``, ``code=4``): parsed and
checked against the sources' names, each mistake one line (``mixture.py`` turns them into rates)."""

from __future__ import annotations

import re

from ..errors import ObjcliError

BUDGET_UNITS = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}


def parse_weights(spec: str, names: list[str]) -> tuple[str, dict[str, float]]:
    """``web=0.7,code=0.3`` -> ("share", {…}) (normalised); ``web=5B,code=2B`` -> ("budget", tokens)."""
    values: dict[str, float] = {}
    kinds = set()
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, value = part.partition("=")
        match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kKmMbBtT]?)", value.strip())
        if name not in names or name in values or not match or float(match.group(1)) <= 0:
            raise ObjcliError(
                f"--weights {spec}: '{part}' must be SOURCE=SHARE (web=0.7) or SOURCE=TOKENS (code=2B), "
                f"once for each source ({', '.join(names)})"
            )
        if not match.group(2) and float(match.group(1)) > 1000:  # web=100000 meant a budget: say which
            raise ObjcliError(
                f"--weights {spec}: '{part}' has no unit, so it reads as a share, and a share over 1000 is "
                f"surely a token count; give the budget its unit ({name}={_with_unit(float(match.group(1)))}), "
                "or shares such as web=0.7,code=0.3"
            )
        kinds.add("budget" if match.group(2) else "share")  # a budget has a unit: 2B, 500M
        values[name] = float(match.group(1)) * BUDGET_UNITS[match.group(2).lower()]
    if set(values) != set(names) or len(kinds) != 1:
        raise ObjcliError(
            f"--weights {spec}: give every source ({', '.join(names)}) either a share of the output "
            "(web=0.7,code=0.3) or a token budget (web=5B,code=2B), not both"
        )
    kind = kinds.pop()
    if kind == "share":
        total = sum(values.values())
        values = {name: v / total for name, v in values.items()}
    return kind, values


def _with_unit(tokens: float) -> str:
    """100000 -> 100K, 2500000000 -> 2.5B: a token count as a budget is written."""
    for unit in ("T", "B", "M", "K"):
        scale = BUDGET_UNITS[unit.lower()]
        if tokens >= scale:
            return f"{tokens / scale:g}{unit}"
    return f"{tokens:g}"


def parse_epochs(spec: str, names: list[str]) -> dict[str, float]:
    """``--max-epochs code=4,web=1.5`` -> the most copies of each document of those sources."""
    caps: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, value = part.partition("=")
        match = re.fullmatch(r"\d+(?:\.\d+)?", value.strip())
        if name not in names or name in caps or not match or float(value) <= 0:
            raise ObjcliError(
                f"--max-epochs {spec}: '{part}' must be SOURCE=COPIES (code=4), a positive number, once for a "
                f"source of --source ({', '.join(names)})"
            )
        caps[name] = float(value)
    return caps
