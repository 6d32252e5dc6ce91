"""`make bench`, issue 27: conversations with assistant-only loss, side by side in one run.

Llama 3's 128k tokenizer.json (converted from the published ranks, its special tokens included) with
Llama 3's chat template; conversations built from the real sample prose (system prompts sometimes,
one to four turns, short questions and long answers). Interleaved repeats of:

- ``transformers``: ``apply_chat_template(..., tokenize=True, return_assistant_tokens_mask=False)``
  per conversation, batched as a user would with ``datasets.map(num_proc=CORES)``;
- the tokenizer's own batched encode of the rendered texts (``tokenizers`` 0.x ``encode_batch`` on
  CORES threads, texts already rendered and in memory): the floor for anything exact;
- ``objcli transform --objective chat --workers CORES`` (the CLI: start-up, reading, rendering,
  encoding, masks, best-fit packing and writing included).

Then CPU time per stage of objcli's chat path on one core, best-fit's packing figures, and the
comparison again on 80,000 conversations (start-up paid once).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_engines import prerelease_env
from benchmarks import CORES, DATA, OUT, _last_cpu, _run_tree
from bpe_files import llama3_ranks, rank_file_to_tokenizer_json
from paths import CHAT_TEMPLATES, SAMPLE_DATA

TEMPLATE = CHAT_TEMPLATES / "llama3.jinja"


def llama3_chat_tokenizer() -> Path:
    from objcli.tokenizers.tiktoken_bpe import LLAMA3_PATTERN, _llama3_specials

    path = DATA / "chat" / "llama3" / "tokenizer.json"
    if not path.exists():
        rank_file_to_tokenizer_json(llama3_ranks(), LLAMA3_PATTERN, _llama3_specials(128_000), path)
        config = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "chat_template": TEMPLATE.read_text(),
            "bos_token": "<|begin_of_text|>",
            "eos_token": "<|eot_id|>",
            "model_max_length": 1 << 20,
        }
        (path.parent / "tokenizer_config.json").write_text(json.dumps(config))
    return path


def bench_conversations(count: int = 20_000) -> Path:
    """Conversations of real prose: a question of 40-400 characters, an answer of 100-2,500."""
    import numpy as np

    path = DATA / "chat" / f"conversations-{count}.jsonl"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    root = SAMPLE_DATA
    prose = " ".join(json.loads(line)["text"] for line in (root / "prose.jsonl").open())
    rng = np.random.default_rng(27)

    def piece(low, high):
        start = int(rng.integers(0, len(prose) - high))
        return prose[start : start + int(rng.integers(low, high))]

    with path.open("w") as f:
        for _ in range(count):
            messages = [{"role": "system", "content": piece(20, 200)}] if rng.random() < 0.3 else []
            for _ in range(int(rng.integers(1, 5))):
                messages += [
                    {"role": "user", "content": piece(40, 400)},
                    {"role": "assistant", "content": piece(100, 2500)},
                ]
            f.write(json.dumps({"messages": messages}) + "\n")
    return path


TRANSFORMERS = """
import json, sys, time, datasets, transformers
path, folder, procs = sys.argv[1], sys.argv[2], int(sys.argv[3])
datasets.disable_progress_bars()
tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
data = datasets.load_dataset("json", data_files=path, split="train", keep_in_memory=True)
def apply(example):
    ids = tokenizer.apply_chat_template(example["messages"], tokenize=True, return_dict=True)["input_ids"]
    return {"input_ids": ids}
data = data.map(apply, num_proc=procs, remove_columns=["messages"], keep_in_memory=True, load_from_cache_file=False)
print(json.dumps({"tokens": sum(map(len, data["input_ids"]))}))
"""

OWN_ENCODE = """
import json, os, sys, time
sys.path.insert(1, os.getcwd())
path, tokenizer_path, threads = sys.argv[1], sys.argv[2], sys.argv[3]
os.environ["RAYON_NUM_THREADS"] = threads
import msgspec, tokenizers
from objcli.tokenizers.chat_template import ChatTemplate, find_template
from pathlib import Path
source, variables, where = find_template(Path(tokenizer_path), None, "huggingface")
template = ChatTemplate(source, variables, "2024-07-26", where)
texts = [template.render(msgspec.json.decode(line)["messages"])[0] for line in open(path, "rb")]
library = tokenizers.Tokenizer.from_file(tokenizer_path)
best = cpu = 1e9
for _ in range(2):
    started, started_cpu = time.perf_counter(), time.process_time()
    tokens = sum(len(e.ids) for e in library.encode_batch(texts, add_special_tokens=False))  # specials matched
    best, cpu = min(best, time.perf_counter() - started), min(cpu, time.process_time() - started_cpu)
print(json.dumps({"seconds": best, "cpu": cpu, "tokens": tokens}))
"""


def _python(code: str, *args: str, env=None) -> dict:
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, env=env)
    return json.loads(result.stdout.strip().splitlines()[-1])


def _timed(command: list[str], env=None) -> dict:
    seconds, peak, stderr = _run_tree(command, env=env)
    return {"seconds": seconds, "cpu": _last_cpu[0], "stderr": stderr}


def stage_costs(path: Path, tokenizer: Path) -> dict[str, float]:
    """Microseconds of one core per conversation in each stage of a real ``--workers 1`` run on the
    tokenizers 1.0 pre-release (``chat_stages.py``)."""
    script = Path(__file__).parent / "chat_stages.py"
    result = subprocess.run(
        [sys.executable, str(script), str(path), str(tokenizer), str(OUT)],
        capture_output=True,
        text=True,
        check=True,
        env=prerelease_env(),
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def chat_table(repeats: int = 3) -> None:
    tokenizer = llama3_chat_tokenizer()
    data = bench_conversations()
    size = data.stat().st_size
    print(
        f"\nConversations, assistant-only loss (issue 27): {data.name}, {size / 1e6:.1f} MB, Llama 3 template and "
        f"128k tokenizer.json, {CORES} cores; interleaved x{repeats}:"
    )
    fast = prerelease_env()
    runs: dict[str, list[dict]] = {"transformers": [], "own": [], "own-fast": [], "objcli": [], "objcli-fast": []}
    command = [
        sys.executable,
        "-m",
        "objcli",
        "transform",
        str(data),
        "-t",
        str(tokenizer),
        "-o",
        str(OUT),
        "--overwrite",
        "-q",
        "--objective",
        "chat",
        "--seq-len",
        "4096",
        "--workers",
        str(CORES),
    ]
    for _ in range(repeats):
        started, cpu0 = time.perf_counter(), _children_cpu()
        _python(TRANSFORMERS, str(data), str(tokenizer.parent), str(CORES))
        runs["transformers"].append({"seconds": time.perf_counter() - started, "cpu": _children_cpu() - cpu0})
        runs["own"].append(_python(OWN_ENCODE, str(data), str(tokenizer), str(CORES)))
        runs["own-fast"].append(
            _python(
                OWN_ENCODE.replace(
                    "encode_batch(texts, add_special_tokens=False)",
                    "encode_batch(texts, add_special_tokens=False, encode_special_tokens=False)",
                ),
                str(data),
                str(tokenizer),
                str(CORES),
                env=fast,
            )
        )
        runs["objcli"].append(_timed(command))
        runs["objcli-fast"].append(_timed(command, env=fast))
    labels = {
        "transformers": f"transformers apply_chat_template, datasets.map(num_proc={CORES})",
        "own": f"tokenizers 0.x encode_batch of rendered texts, {CORES} threads",
        "own-fast": f"tokenizers 1.0 encode_batch of rendered texts, {CORES} threads",
        "objcli": f"objcli chat --workers {CORES}, stable tokenizers 0.x (CLI)",
        "objcli-fast": f"objcli chat --workers {CORES}, tokenizers 1.0 pre-release (CLI)",
    }
    print(f"{'':72} {'min s':>7} {'median s':>9} {'MB/s':>7} {'CPU s/MB':>9}")
    for key, label in labels.items():
        walls = [r["seconds"] for r in runs[key]]
        cpu = min(r["cpu"] for r in runs[key]) / (size / 1e6)
        print(f"{label:72} {min(walls):7.2f} {statistics.median(walls):9.2f} {size / 1e6 / min(walls):7.1f} {cpu:9.3f}")
    best = {k: min(r["seconds"] for r in v) for k, v in runs.items()}
    for engine, own, ours in (("0.x", "own", "objcli"), ("1.0", "own-fast", "objcli-fast")):
        print(
            f"tokenizers {engine}: objcli {best['transformers'] / best[ours]:.1f}x transformers (goal >= 10x); "
            f"{best[own] / best[ours]:.2f} of the library's own batched encode of the rendered texts (goal >= 0.7)"
        )
    print("CPU per conversation on one core, by stage, tokenizers 1.0 (microseconds; start-up, about 1 s, apart):")
    costs = stage_costs(data, tokenizer)
    for name, micros in sorted(costs.items(), key=lambda item: -item[1]):
        print(f"  {name:48} {micros:8.1f}")
    print(f"  {'all stages':48} {sum(costs.values()):8.1f}")
    packing_figures()
    scale_table()


def scale_table(count: int = 80_000, repeats: int = 2) -> None:
    """The same comparison on four times the conversations: objcli's start-up (about 1 s of the
    20,000-conversation run) is paid once, transformers' cost is per conversation."""
    tokenizer, data = llama3_chat_tokenizer(), bench_conversations(count)
    size = data.stat().st_size
    command = [
        sys.executable,
        "-m",
        "objcli",
        "transform",
        str(data),
        "-t",
        str(tokenizer),
        "-o",
        str(OUT),
        "--overwrite",
        "-q",
        "--objective",
        "chat",
        "--seq-len",
        "4096",
        "--workers",
        str(CORES),
    ]
    runs: dict[str, list[dict]] = {"transformers": [], "objcli-fast": []}
    for _ in range(repeats):
        started, cpu0 = time.perf_counter(), _children_cpu()
        _python(TRANSFORMERS, str(data), str(tokenizer.parent), str(CORES))
        runs["transformers"].append({"seconds": time.perf_counter() - started, "cpu": _children_cpu() - cpu0})
        runs["objcli-fast"].append(_timed(command, env=prerelease_env()))
    print(f"\n{data.name}, {size / 1e6:.1f} MB, same tokenizer, template and cores; interleaved x{repeats}:")
    print(f"{'':72} {'min s':>7} {'median s':>9} {'MB/s':>7} {'CPU s/MB':>9}")
    for key, label in (
        ("transformers", f"transformers apply_chat_template, datasets.map(num_proc={CORES})"),
        ("objcli-fast", f"objcli chat --workers {CORES}, tokenizers 1.0 pre-release (CLI)"),
    ):
        walls = [r["seconds"] for r in runs[key]]
        cpu = min(r["cpu"] for r in runs[key]) / (size / 1e6)
        print(f"{label:72} {min(walls):7.2f} {statistics.median(walls):9.2f} {size / 1e6 / min(walls):7.1f} {cpu:9.3f}")
    best = {k: min(r["seconds"] for r in v) for k, v in runs.items()}
    print(
        f"tokenizers 1.0, {count:,} conversations: objcli {best['transformers'] / best['objcli-fast']:.1f}x "
        "transformers (goal >= 10x)"
    )


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def packing_figures() -> None:
    """Best-fit on the bench mix at --seq-len 4096: conversations kept whole, padding."""
    manifest = json.loads((OUT / "manifest.json").read_text())
    t = manifest["totals"]
    fits = t["documents_written"] - t.get("conversations_truncated", 0)
    print(
        f"best-fit at --seq-len 4096: {t['rows']:,} rows, padding {100 * t['padding_fraction']:.2f}% (goal <= 3%), "
        f"{fits:,} of {t['documents_written']:,} conversations fit a row and {fits - t['documents_split']:,} "
        f"({100 * (fits - t['documents_split']) / max(fits, 1):.2f}%, goal >= 99%) were kept whole"
    )


if __name__ == "__main__":
    scale_table() if sys.argv[1:] == ["--scale"] else chat_table()
