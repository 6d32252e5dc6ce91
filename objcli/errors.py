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
