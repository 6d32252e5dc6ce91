"""Accounting for records that cannot become documents.

One policy for every reader: a bad record is skipped and counted under a reason, and the first
example of each reason is kept so the run can warn once with file and line; under ``--strict``
the first bad record is fatal.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..errors import BadRecord

SKIP_FIXES = {
    "invalid_utf8": "re-encode the file as UTF-8 or pass without --strict to skip such records",
    "bad_json": "fix the JSON on that line or pass without --strict to skip such records",
    "not_an_object": "each JSON record must be an object; pass without --strict to skip others",
    "missing_field": "choose the text field with --text-key",
    "not_a_string": "the text field must be a string; pass without --strict to skip others",
    "null_text": "fill the text column or pass without --strict to skip null rows",
    "empty_text": "drop empty documents upstream or pass without --strict to skip them",
    "empty_document": "a tokenized input's document with no token (two EOS ids in a row); pass without --strict",
    "binary": "a binary file among the inputs (--text-unit file reads a folder's every file); leave it out or "
    "pass without --strict to skip such files",
}


@dataclass
class RecordLog:
    strict: bool = False
    read: int = 0  # documents seen: records (blank lines are not records), or pieces of cut ones
    cut: int = 0  # records longer than --max-document-chars, cut into several documents
    skipped: Counter = field(default_factory=Counter)
    first_example: dict[str, str] = field(default_factory=dict)
    # How far the partition's input has been read, for progress: its finished pieces' bytes, and the
    # share read of the piece in hand (of its bytes: compressed ones for a compressed file).
    pieces_done_bytes: int = 0
    piece_bytes: int = 0
    piece_fraction: float = 0.0
    # With --provenance: each returned text's record, counted in the piece being read (its line, row
    # or array element), appended in the order the texts come (``read_piece`` takes them).
    records: list[int] | None = None

    def kept(self, indices) -> None:
        """The records of the texts a reader returns, when the run records where they come from."""
        if self.records is not None:
            self.records.extend(indices)

    @property
    def input_bytes(self) -> int:
        return self.pieces_done_bytes + int(min(1.0, self.piece_fraction) * self.piece_bytes)

    def skip(self, reason: str, where: str, detail: str) -> None:
        fix = SKIP_FIXES[reason]
        if self.strict:
            raise BadRecord(reason, where, detail, fix)
        self.skipped[reason] += 1
        self.first_example.setdefault(reason, f"{where}: {detail}")

    @property
    def documents(self) -> int:
        """Records that became documents."""
        return self.read - sum(self.skipped.values())


# Conversation records (--objective chat) that do not fit the layout or the template.
CONVERSATION_SKIPS = {
    "no_messages",
    "bad_message",
    "unknown_role",
    "non_string_content",
    "no_assistant_message",
    "template_error",
    "empty_completion",
    "non_text_content",
    "prompt_only",
    "preference_pair",
    "history_rewritten",
    "content_not_found",
    "bad_tools",
}


def every_record_bad(totals: dict, records_hint: str = "") -> str | None:
    """The error for a run in which every record was a bad one: an empty output with exit status 0
    would hide a wrong ``--text-key``, a JSON array in a ``.json`` file, a field that is never text,
    a chat template that raises on every conversation (``records_hint``: what the objective's records
    depend on, its options named)."""
    read = totals["documents_read"]
    bad = {
        reason: n
        for reason, n in totals["skipped_by_reason"].items()
        if reason in SKIP_FIXES or reason in CONVERSATION_SKIPS
    }
    if not read or sum(bad.values()) < read:
        return None
    reasons = ", ".join(f"{n:,} {reason}" for reason, n in bad.items())
    if bad.keys() & CONVERSATION_SKIPS:
        return f"inputs: every record read ({read:,}) was skipped ({reasons}); {records_hint}"
    return (
        f"inputs: every record read ({read:,}) was skipped ({reasons}); check the input format and "
        "--text-key against the first skipped record named above"
    )


def why_no_rows(totals: dict, seq_len: int, hint: str | None = None) -> str:
    """The warning for a run that wrote no row although its records were fine (``hint``: the option
    that keeps a partial row, where the objective has one)."""
    if not totals["documents_read"]:
        return "no document was read: the inputs hold no record; the output is empty"
    dropped = totals.get("tokens_dropped", 0)
    if dropped:
        return (
            f"no row was written: each partition's tokens ({dropped:,} in all) fill less than one --seq-len "
            f"{seq_len} row, and a partial last row is dropped; pass {hint + ' or ' if hint else ''}a smaller --seq-len"
        )
    reasons = ", ".join(f"{n:,} {reason}" for reason, n in totals["skipped_by_reason"].items()) or "none skipped"
    return f"no row was written ({totals['documents_read']:,} documents read; {reasons}); the output is empty"
