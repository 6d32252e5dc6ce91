"""Pretraining objectives, one file each, behind the registry (``options.Registry``).

Every module of this package is imported here, so a file that registers an objective
(``@register("NAME")``) is all a new one needs: ``--objective``, ``--help``, recipes and the options
page take it from the registry."""

from ..options import discover
from .base import REGISTRY, DocumentBatch, register

discover(__name__, __path__)

__all__ = ["REGISTRY", "DocumentBatch", "register"]
