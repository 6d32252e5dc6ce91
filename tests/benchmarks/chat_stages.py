"""`make bench`, issue 27: CPU per conversation in each stage of a real ``objcli transform --objective
chat --workers 1`` run (one core, in this process), by wrapping the functions each stage calls and
counting each one's own CPU time (a stage called inside another is taken out of it). Run in a
process of its own, so it can be given the tokenizers pre-release:
``python tests/benchmarks/chat_stages.py DATA TOKENIZER OUT``; prints one JSON object."""

from __future__ import annotations

import json
import sys
import time


class Laps:
    """Exclusive CPU seconds per stage name."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.stack: list[list] = []

    def wrap(self, owner, name: str, stage: str) -> None:
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            frame = [time.process_time(), 0.0]  # started, time spent in stages inside
            self.stack.append(frame)
            try:
                return original(*args, **kwargs)
            finally:
                self.stack.pop()
                spent = time.process_time() - frame[0]
                self.seconds[stage] = self.seconds.get(stage, 0.0) + spent - frame[1]
                if self.stack:
                    self.stack[-1][1] += spent

        setattr(owner, name, timed)


def main(data: str, tokenizer: str, out: str) -> dict:
    from objcli.__main__ import _kept_heap, _no_blas_threads

    _no_blas_threads()  # the command's own process settings (its heap kept between batches), as a run has
    _kept_heap()  # them: stage_costs.py, where a trimmed heap made the packer cost 2-5x what a run pays
    import msgspec

    from objcli.cli import main as cli
    from objcli.formats import ShardSink
    from objcli.inputs.text_batches import _JsonRecords
    from objcli.objectives import chat, chat_spans
    from objcli.packing.best_fit import BestFitPacker
    from objcli.run import pipeline
    from objcli.tokenizers.chat_encode import spans_from_token_bytes  # noqa: F401 - imported before wrapping
    from objcli.tokenizers.engines import TokenizersEngine

    laps = Laps()

    class JsonShim:  # chat.py decodes each record with msgspec.json.decode
        decode = staticmethod(msgspec.json.decode)

    class MsgspecShim:
        json = JsonShim

    chat.msgspec = MsgspecShim
    laps.wrap(pipeline, "_run_partition_counted", "other (pipeline, reading files)")
    laps.wrap(_JsonRecords, "decode_block", "read JSON lines (check each record)")
    laps.wrap(JsonShim, "decode", "decode the record (msgspec)")
    laps.wrap(chat, "conversation_of", "check the messages")
    laps.wrap(chat, "render", "render the template (Jinja sandbox)")
    laps.wrap(chat_spans.ContentSpans, "spans", "find assistant spans in the text")
    laps.wrap(TokenizersEngine, "encode_batch", "encode (the library, 1 thread)")
    laps.wrap(chat._ChatPartition, "examples", "the rest of the chat step (token spans, labels)")
    laps.wrap(BestFitPacker, "_pack", "best-fit packing, segment ids, positions")
    laps.wrap(ShardSink, "write", "write rows (Arrow, sha256)")
    laps.wrap(ShardSink, "close", "close shards (fsync, rename)")
    try:
        cli(
            [
                "transform",
                data,
                "-t",
                tokenizer,
                "-o",
                out,
                "--overwrite",
                "-q",
                "--objective",
                "chat",
                "--seq-len",
                "4096",
                "--workers",
                "1",
            ],
            standalone_mode=False,
        )
    except SystemExit:
        pass
    records = sum(1 for line in open(data, "rb") if line.strip())
    return {stage: seconds / records * 1e6 for stage, seconds in laps.seconds.items()}


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
