"""User-facing errors: one line that says what failed, where, and how to fix it."""

INTERRUPTED = "interrupted; rerun the same command to go on (an output folder keeps its finished partitions)"


class ObjcliError(Exception):
    """An error the user can act on. The CLI prints ``str(error)`` and exits with status 1."""


class BadRecord(ObjcliError):
    """A record that cannot become a document (raised under ``--strict``; counted otherwise)."""

    def __init__(self, reason: str, where: str, detail: str, fix: str):
        self.reason = reason
        self.where = where
        self.detail = detail
        self.fix = fix
        super().__init__(f"{where}: {detail}; {fix}")

    def __reduce__(self):  # a worker's error reaches the main process by pickle
        return (type(self), (self.reason, self.where, self.detail, self.fix))


# The extra of objcli that installs each optional module (pyproject.toml's optional-dependencies):
# a module missing at run time is one line naming what to install, never "rerun" (a rerun fails the same way).
EXTRA_OF_MODULE = {
    "tokenizers": "hf",
    "huggingface_hub": "hf",
    "regex": "hf",
    "quicktok_v1": "fast",
    "numba": "fast",
    "tiktoken": "tiktoken",
    "s3fs": "s3",
    "gcsfs": "gcs",
    "distributed": "dask",
    "dask": "dask",
    "matplotlib": "plot",
}


def missing_module(error: BaseException, where: str = "") -> ObjcliError | None:
    """The one line for an optional module that is not installed (None for any other error)."""
    if not isinstance(error, ModuleNotFoundError) or not error.name:
        return None
    top = error.name.split(".")[0]
    extra = EXTRA_OF_MODULE.get(top)
    how = f"pip install 'objcli[{extra}]'" if extra else f"pip install {top}"
    prefix = f"{where}: " if where else ""
    return ObjcliError(f"{prefix}the Python module '{top}' is not installed; install it with: {how}")
