"""Text input formats, one module each (``base.py``: ``TextInputFormat`` and the registry; ``text_formats.py``
names and sniffs by it): each module registers its format (``@register``), and every module of this package
is imported here, so a new text format is one module and its test."""

from ...options import discover
from .base import BOM, TEXT_INPUTS, TextInputFormat, first_byte, register

discover(__name__, __path__)

__all__ = ["BOM", "TEXT_INPUTS", "TextInputFormat", "first_byte", "register"]
