"""``--objective chat``'s options (``chat.py``): which tokens carry loss, what an overlong conversation
loses, what an assistant turn is, and where images come from."""

from __future__ import annotations

from dataclasses import dataclass

from ..options import Options, option
from .chat_parts import PARTS, parse_parts
from .common import chat_template_option, template_date_option

LOSS_ON = ("assistant", "last-assistant", "all")
OVERLONG = ("truncate", "drop")
ASSISTANT_SPANS = ("turn", "content")
TURNS = ("together", "each")


@dataclass(frozen=True)
class ChatOptions(Options):
    messages_key: str = option("messages", "JSON field (Parquet column) of a record's list of messages.")
    chat_template: str | None = chat_template_option()
    loss_on: str = option(
        "assistant", "Tokens that carry loss: every assistant turn, the last, or all.", choices=LOSS_ON
    )
    overlong: str = option(
        "truncate",
        "Too long: cut after the last turn that fits, or drop.",
        choices=OVERLONG,
    )
    template_date: str = template_date_option()
    assistant_span: str = option(
        "turn", "Without generation markers: the whole turn, or content + end.", choices=ASSISTANT_SPANS
    )
    turns: str = option("together", "One example per conversation, or one per assistant turn.", choices=TURNS)
    assistant_parts: str = option(",".join(PARTS), "Turn parts that carry loss, comma-separated.")
    processor: str | None = option(None, "The model's processor folder: images expanded as it expands them.")
    media_dir: str | None = option(None, "Folder (or URL) that relative image paths are below [default: as given].")

    def __post_init__(self):
        super().__post_init__()
        parts = parse_parts(self.assistant_parts)
        object.__setattr__(self, "assistant_parts", ",".join(p for p in PARTS if p in parts))  # one spelling

    @property
    def learned_parts(self) -> frozenset[str]:
        return frozenset(self.assistant_parts.split(","))
