"""Pretraining objectives, one file each, behind a small registry.

Every module of this package is imported here, so a file that registers an objective
(``@register("NAME")``) is all a new one needs: ``--objective``, ``--help``, recipes and the options
page take it from the registry."""

import importlib
import pkgutil

from .base import REGISTRY, DocumentBatch, register

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["REGISTRY", "DocumentBatch", "register"]
