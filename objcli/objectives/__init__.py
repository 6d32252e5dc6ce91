"""Pretraining objectives, one file each, behind the registry (``options.Registry``).

Every module of this package is imported here the first time ``REGISTRY`` is asked for, so a file that
registers an objective (``@register("NAME")``) is all a new one needs: ``--objective``, ``--help``,
recipes and the options page take it from the registry."""

from ..options import discover
from .base import DocumentBatch, register


def __getattr__(name: str):
    """``REGISTRY``, every objective in it: the package's modules imported when it is first asked for, so a
    module that needs no objective (``objcli.reading``, a store's kinds) imports none."""
    if name != "REGISTRY":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .base import REGISTRY

    discover(__name__, __path__)
    globals()["REGISTRY"] = REGISTRY
    return REGISTRY


__all__ = ["REGISTRY", "DocumentBatch", "register"]
