"""``python -m objcli.docs``: rewrite ``options.md`` from the code."""

from pathlib import Path

from . import options_reference

Path(__file__).with_name("options.md").write_text(options_reference(), encoding="utf-8")
