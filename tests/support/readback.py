"""Slow, obvious readers the tests compare objcli's output with: the documents of some inputs as the
library's readers give them, each encoded on its own, and Megatron's index read from its spec."""

import struct
from pathlib import Path

import numpy as np
import sentencepiece as spm

from objcli.inputs import ReadOptions, RecordLog, cut_partitions, group_members, read_documents, text_files


def text_inputs(specs, requested="auto", warn=None, text_unit="line"):
    """The text files some inputs name, as a run finds and describes them (the door, then each file)."""
    members = group_members(specs, requested, "input_ids", text_unit, warn)
    assert all(m.kind.name == "TEXT" for m in members), members
    return text_files(members, requested, warn)


def expected_documents(inputs, **options):
    """Documents in order, read with the library's readers (tested on their own in test_readers)."""
    opts = ReadOptions(**options)
    texts = []
    for partition in cut_partitions(text_inputs([str(i) for i in inputs]), 1 << 40, opts.text_unit):
        texts += [t for b in read_documents(partition, opts, RecordLog()) for t in b]
    return texts


def expected_stream(texts, tokenizer_path, eos: bool = True):
    """Each document encoded on its own (not batched), followed by EOS where ``eos``: the slow, obvious way."""
    sp = spm.SentencePieceProcessor(model_file=str(tokenizer_path))
    stream = []
    for text in texts:
        stream += sp.encode(text) + ([sp.eos_id()] if eos else [])
    return stream


def stream_of(files, tokenizer_path, eos: bool) -> list[int]:
    """The documents of ``files`` as one stream of ids (``expected_stream``)."""
    return expected_stream(expected_documents(files), tokenizer_path, eos)


def megatron_read(prefix: Path):
    """A small reader of the Megatron-LM indexed dataset layout (REFERENCE §11), written from the spec."""
    idx = prefix.with_suffix(".idx").read_bytes()
    assert idx[:9] == b"MMIDIDX\x00\x00"
    (version,) = struct.unpack_from("<Q", idx, 9)
    (code,) = struct.unpack_from("<B", idx, 17)
    count, doc_count = struct.unpack_from("<QQ", idx, 18)
    lengths = struct.unpack_from(f"<{count}i", idx, 34)
    pointers = struct.unpack_from(f"<{count}q", idx, 34 + 4 * count)
    doc_index = struct.unpack_from(f"<{doc_count}q", idx, 34 + 12 * count)
    assert len(idx) == 34 + 12 * count + 8 * doc_count
    dtype = {8: np.uint16, 4: np.int32}[code]
    data = np.fromfile(prefix.with_suffix(".bin"), dtype=dtype)
    itemsize = np.dtype(dtype).itemsize
    sequences = [data[p // itemsize : p // itemsize + n].tolist() for p, n in zip(pointers, lengths)]
    return version, code, sequences, list(doc_index)


def fill_sentinels(inputs, labels, sentinels):
    """Undo span corruption: each input sentinel becomes the label span it names."""
    spans, current = {}, None
    for token in labels[:-1]:
        if token in sentinels:
            current = token
            spans[current] = []
        else:
            spans[current].append(token)
    return [t for token in inputs[:-1] for t in (spans[token] if token in sentinels else [token])]


def output_rows(folder) -> list[dict]:
    """Every row of an output, in order, as plain lists, read back through its format (any format)."""
    import numpy as np

    from objcli.reading.shards import iter_rows

    return [{k: np.asarray(v).tolist() for k, v in row.items()} for _, row in iter_rows(folder)]
