"""Writes this folder's datatrove and ``datasets.map`` files from ``corpus.jsonl`` with the tools
themselves (the Megatron-LM files come from its ``tools/preprocess_data.py``: README.md).

    .venv/bin/python tests/data/token_files/make_token_files.py   # with objcli[bench]: datatrove, datasets
"""

import json
import os
import shutil
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLE = HERE.parent.parent.parent / "sample_data"


def main() -> None:
    import datasets
    import sentencepiece as spm
    from datatrove.data import Document
    from datatrove.pipeline.tokens.tokenizer import DocumentTokenizer

    os.chdir(SAMPLE.parent)  # datatrove writes the tokenizer's path into its metadata: a relative one
    texts = [json.loads(line)["text"] for line in (HERE / "corpus.jsonl").read_text().splitlines()]
    with tempfile.TemporaryDirectory() as folder:  # datatrove writes into a folder of its own
        step = DocumentTokenizer(
            folder,
            tokenizer_name_or_path="sample_data/llama-style/tokenizer.json",
            eos_token="<|end_of_text|>",
            shuffle_documents=False,
            save_filename="corpus",
        )
        step.run((Document(text=t, id=str(i)) for i, t in enumerate(texts)), rank=0, world_size=1)
        for path in Path(folder).glob("*.ds*"):
            shutil.copy(path, HERE / path.name.replace("00000_", ""))
    sp = spm.SentencePieceProcessor(model_file=str(SAMPLE / "tokenizer.model"))
    mapped = datasets.Dataset.from_dict({"text": texts, "id": list(range(len(texts)))}).map(
        lambda row: {"input_ids": sp.encode(row["text"])}, remove_columns=["text"]
    )
    shutil.rmtree(HERE / "mapped", ignore_errors=True)
    mapped.save_to_disk(str(HERE / "mapped"))
    mapped.to_parquet(str(HERE / "mapped.parquet"))


if __name__ == "__main__":
    main()
