"""The one line a run prints when it ends: counts, throughput, and what a user should know about the
output (splits, tokens dropped, the BOS/EOS policy, partitions kept from an interrupted run)."""

from __future__ import annotations

from dataclasses import dataclass

from ..formats import FORMATS
from ..inputs.pieces import STDIN


@dataclass
class Summary:
    manifest: dict
    seconds: float
    output: str
    kept: int = 0  # partitions an earlier run of the same configuration had finished
    already_complete: bool = False  # the folder held this run, finished: nothing was done
    appended: bool = False  # --append: the kept partitions are the output's own
    defaulted: tuple[str, ...] = ()  # options the command left at their defaults that the summary names

    @property
    def totals(self) -> dict:
        return self.manifest["totals"]

    def line(self) -> str:
        """One line, for logs and pipes."""
        if self.already_complete:
            return self._nothing_to_do()
        return "objcli: " + "; ".join(text for _, text in self.parts())

    def lines(self) -> str:
        """The same facts on a few labelled lines, for a person at a terminal."""
        if self.already_complete:
            return self._nothing_to_do()
        parts = self.parts()
        width = max(len(label) for label, _ in parts)
        return "objcli: done\n" + "\n".join(
            f"  {label:<{width}}  {text.removeprefix(label + ': ')}" for label, text in parts
        )

    def _nothing_to_do(self) -> str:
        t = self.totals
        return (
            f"objcli: {self.output} already holds this run, complete and checked ({t['documents_read']:,} "
            f"documents, {t['rows']:,} rows, {t['shards']} shards); nothing to do"
        )

    def parts(self) -> list[tuple[str, str]]:
        """(label, text) of each fact the summary gives, in order."""
        t = self.totals
        mb = t["text_bytes"] / 1e6
        skipped = ""
        if t["documents_skipped"]:
            reasons = ", ".join(f"{n} {r}" for r, n in t["skipped_by_reason"].items())
            skipped = f" ({reasons})"
        where = "stdout" if self.output == STDIN else self.output
        parts = [
            (
                "documents",
                f"{t['documents_read']:,} documents read, {t['documents_written']:,} written, "
                f"{t['documents_skipped']:,} skipped{skipped}{self._cut()}",
            ),
            (
                "rows",
                f"{t['rows']:,} rows{self._row_length()}, {t['tokens']:,} tokens, "
                f"padding {100 * t['padding_fraction']:.1f}%, {t['mean_segments_per_row']:.2f} segments/row, "
                f"{t['documents_split']:,} documents split ({100 * t['split_fraction']:.1f}%)",
            ),
            (
                "output",
                f"{t['shards']} shards{self._shuffled()} -> {where} in {self.seconds:.1f}s "
                f"({mb / max(self.seconds, 1e-9):.1f} MB/s, {t['tokens'] / max(self.seconds, 1e-9):,.0f} tokens/s)",
            ),
        ]
        optional = [
            ("splits", self._splits()),
            ("dropped", self._dropped()),
            ("boundaries", self._boundaries()),
            ("resumed", self._resumed()),
        ]
        return parts + [(label, text) for label, text in optional if text]

    def _row_length(self) -> str:
        """The row length, said even when --seq-len was left at its default (a forgotten one is seen)."""
        config = self.manifest["config"]
        stored = FORMATS.get(config.get("output_format"))
        if stored is None or stored.whole_documents or "seq_len" not in config:
            return ""
        from ..objectives import REGISTRY

        name = config.get("objective")
        objective = REGISTRY.named(name) if name in REGISTRY.names() else None
        if objective is not None and not objective.uses_seq_len:  # prompts: --max-prompt-length bounds them
            return ""
        bounds = f"; it bounds {objective.seq_len_bounds}" if objective is not None and objective.seq_len_bounds else ""
        default = f", the default{bounds}: give --seq-len to choose" if "seq_len" in self.defaulted else ""
        return f" (--seq-len {config['seq_len']}{default})"

    def _cut(self) -> str:
        cut = self.totals.get("long_documents_cut", 0)  # the partitions' counters, summed by the manifest
        if not cut:
            return ""
        limit = self.manifest["config"].get("max_document_chars")
        return (
            f", {cut:,} over --max-document-chars {limit:,} cut into pieces" if limit else f", {cut:,} cut into pieces"
        )

    def _shuffled(self) -> str:
        return " of shuffled rows" if self.manifest["config"].get("shuffle_rows") else ""

    def _splits(self) -> str:
        splits = self.manifest.get("splits")
        if not splits:
            return ""
        return "splits: " + ", ".join(f"{name} {s['rows']:,} rows" for name, s in splits.items())

    def _dropped(self) -> str:
        dropped = self.totals.get("tokens_dropped", 0)
        if not dropped:
            return ""
        from ..objectives.base import remainder_hint

        count = len(self.manifest["partitions"])
        hint = remainder_hint(self.manifest["config"])
        keeps = f"; {hint} keeps them" if hint else ""
        return (
            f"{dropped:,} tokens dropped (the partial last row of each partition, {count} partition"
            f"{'s' if count != 1 else ''}{keeps})"
        )

    def _boundaries(self) -> str:
        """The BOS/EOS policy applied, as a reader of the summary needs it (BOS may come from the
        tokenizer's own template)."""
        config, pieces = self.manifest["config"], self.manifest["special_tokens"]["pieces"]
        from ..objectives import REGISTRY

        declared = REGISTRY.named(config["objective"]).boundaries if config.get("objective") else None
        if declared:
            return declared
        bos = pieces.get("bos", "") if config.get("bos") else ""
        eos = pieces.get("eos", "") if config.get("eos") else ""
        return f"documents as {bos}…{eos}" if bos or eos else "documents without BOS or EOS"

    def _resumed(self) -> str:
        partitions = len(self.manifest["partitions"])
        if not self.kept:
            return ""
        if self.appended:
            new = partitions - self.kept
            return f"appended: {new} new partition{'s' if new != 1 else ''} after the output's {self.kept}"
        return f"resumed: {self.kept} of {partitions} partitions kept from the interrupted run"
