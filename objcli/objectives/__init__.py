"""Pretraining objectives, one file each, behind a small registry."""

from . import bart, chat, clm, contrastive, fim, mlm, mtp, pairs, prefix_lm, span_corruption, ul2  # noqa: F401  (registers)
from .base import REGISTRY, DocumentBatch, register

__all__ = ["REGISTRY", "DocumentBatch", "register"]
