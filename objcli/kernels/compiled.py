"""The compiled kernels (numba, ``nogil``, cached on disk) and when a run uses them: whenever numba
imports, unless ``OBJCLI_PURE_PYTHON=1``. Each has a twin in NumPy or a regular expression that
gives the same results (the tests hold them against each other), used otherwise."""

from __future__ import annotations

import importlib
import os
from functools import cache


def compiled(module: str):
    """``objcli.kernels.<module>``, or None: no numba, ``OBJCLI_PURE_PYTHON=1``, or no folder numba's
    cache can write to."""
    if os.environ.get("OBJCLI_PURE_PYTHON", "") not in ("", "0"):
        return None
    return _imported(module)


@cache
def _imported(module: str):
    try:
        return importlib.import_module(f"{__package__}.{module}")
    except (ImportError, RuntimeError, OSError):
        return None
