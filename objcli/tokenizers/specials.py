"""The special tokens of a run: each role's id and piece, and the ids objcli allocated past the vocabulary."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SpecialTokens:
    """Role -> id for every special token a run uses, and which ids were allocated by objcli."""

    ids: dict[str, int] = field(default_factory=dict)
    pieces: dict[str, str] = field(default_factory=dict)
    added: dict[str, int] = field(default_factory=dict)  # piece -> allocated id
    sentinels: list[int] = field(default_factory=list)  # id of <extra_id_i> at index i

    def __getitem__(self, role: str) -> int:
        return self.ids[role]

    def get(self, role: str) -> int | None:
        return self.ids.get(role)

    def to_json(self) -> dict:
        return {"ids": self.ids, "pieces": self.pieces, "added": self.added, "sentinels": self.sentinels}
