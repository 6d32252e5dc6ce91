"""Optional libraries of a test module (torch, transformers, datasets, s3fs, moto), imported when a
test first uses one, not when pytest collects the module: each test process collects every module,
and importing them all there cost about 5 s of CPU a process whether their tests ran there or not."""

import importlib
import importlib.util

import pytest


def requires(*names: str) -> pytest.MarkDecorator:
    """A module's ``pytestmark``: its tests skipped where one of the libraries is not installed."""
    missing = [name for name in names if importlib.util.find_spec(name.split(".")[0]) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)} (make test installs it)")


class lazily:  # noqa: N801 - it stands where a module's name stands
    """A module, imported on first use of one of its attributes."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str):
        # pytest asks every module-level object for `_mock_name` and `__wrapped__` while it collects;
        # answering those would import the library in every test process (4 s of CPU each).
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        return getattr(importlib.import_module(self._name), attribute)
