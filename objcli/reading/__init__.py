"""Reading objcli's outputs as trainers do: ``Rows`` (every output, plans made on read), and in
``objcli.reading.torch_rows`` the PyTorch datasets over it (the ``train`` extra)."""

from .reader import Rows

__all__ = ["Rows"]
