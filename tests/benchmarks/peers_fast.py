"""The binding rows of ``bench_peers.py``: objcli ``--format megatron`` against the fastest peer,
Megatron-LM's ``preprocess_data_fast.py --use-gigatoken``, on every shape (the other peers, 10-50x
slower, take minutes a shape). Needs ``MEGATRON_LM``, as bench_peers.py does.

    MEGATRON_LM=/path/to/Megatron-LM python peers_fast.py [REPEATS] [SHAPE...]
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

from bench_peers import PEER_LIMIT_S, megatron_tool, objcli_megatron, one_file, same_ids, tokenizer_folder
from bench_shapes import corpora, tokenizers


def main(repeats: int, only: tuple[str, ...]) -> None:
    checkout = Path(os.environ["MEGATRON_LM"])
    tokenizer = tokenizer_folder(tokenizers()["32k tokenizer.json"][0])
    print(f"{'shape':9} {'MB':>5} {'objcli min/med s':>17} {'peer min/med s':>15} {'peer / objcli':>14}  ids")
    for shape, (paths, _about) in corpora().items():
        if only and shape not in only:
            continue
        source = one_file(shape, paths)
        ours, theirs, ids = [], [], ""
        for _ in range(repeats):  # interleaved
            run = objcli_megatron(source, tokenizer)
            ours.append(run["seconds"])
            peer = megatron_tool(checkout, "preprocess_data_fast.py", source, tokenizer, "--use-gigatoken")
            theirs.append(peer["seconds"])
            ids = f"stopped at {PEER_LIMIT_S} s" if peer.get("stopped") else same_ids(run["prefix"], peer["prefix"])
        ratio = statistics.median(theirs) / statistics.median(ours)
        print(
            f"{shape:9} {source.stat().st_size / 1e6:5.0f} {min(ours):8.2f}/{statistics.median(ours):<8.2f}"
            f"{min(theirs):7.2f}/{statistics.median(theirs):<7.2f} {ratio:13.2f}x  {ids}"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2, tuple(sys.argv[2:]))
