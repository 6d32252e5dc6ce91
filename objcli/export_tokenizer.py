"""``objcli export-tokenizer``: the run's tokenizer with every special objcli allocated past the model's
vocabulary added at its id, so a trainer's embedding size and any decoder downstream match the shards.

- SentencePiece: the ``.model`` with the pieces appended as USER_DEFINED (they decode to their text).
  A ``ModelProto`` keeps its pieces in a repeated field, and protobuf appends repeated entries in the
  order they appear, so the new entries are encoded by hand after the original bytes (no protobuf
  dependency).
- ``tokenizer.json``: the pieces added as special tokens at their ids, in the file's own JSON.
- tiktoken: the rank file as it is, and its side file with every special, the allocated ones included.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

from .errors import ObjcliError
from .manifest import read_manifest
from .show import load_output_tokenizer

USER_DEFINED = 4  # sentencepiece_model.proto: SentencePiece.Type


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def sentencepiece_with_pieces(model: bytes, pieces: list[str]) -> bytes:
    """``model`` (a serialized ModelProto) with ``pieces`` appended as USER_DEFINED, score 0."""
    extra = b""
    for piece in pieces:
        entry = _field(1, piece.encode("utf-8")) + b"\x15" + struct.pack("<f", 0.0) + b"\x18" + _varint(USER_DEFINED)
        extra += _field(1, entry)
    return model + extra


def export_tokenizer(folder: str, destination: str, tokenizer_path: str | None = None) -> dict:
    manifest = read_manifest(folder)
    tokenizer = load_output_tokenizer(manifest, tokenizer_path)
    added = sorted(manifest.special_tokens.added.items(), key=lambda item: item[1])
    if [i for _, i in added] != list(range(tokenizer.vocab_size, tokenizer.vocab_size + len(added))):
        raise ObjcliError(f"{folder}: the allocated special ids are not contiguous after the vocabulary; "
                          "the manifest was edited or is damaged")
    out = Path(destination)
    if out.exists() and not out.is_dir():
        raise ObjcliError(f"output {destination}: exists and is not a folder; choose a folder with -o")
    out.mkdir(parents=True, exist_ok=True)
    pieces = [piece for piece, _ in added]
    written = _WRITERS[tokenizer.kind](tokenizer, pieces, added, out)
    return {"path": str(written), "kind": tokenizer.kind, "vocab_size": tokenizer.vocab_size + len(added),
            "added": len(added)}


def _sentencepiece(tokenizer, pieces, added, out: Path) -> Path:
    path = out / "tokenizer.model"
    path.write_bytes(sentencepiece_with_pieces(tokenizer.path.read_bytes(), pieces))
    return path


def _huggingface(tokenizer, pieces, added, out: Path) -> Path:
    """The file's own JSON with the pieces appended to ``added_tokens`` at their ids (every release
    of the library reads that; 1.0 has no method to add tokens)."""
    document = json.loads(tokenizer.path.read_text(encoding="utf-8"))
    tokens = document.setdefault("added_tokens", [])
    for piece, token_id in added:
        if piece in tokenizer.ids:
            raise ObjcliError(f"tokenizer.json: {piece!r} is already id {tokenizer.ids[piece]}, not {token_id}")
        tokens.append({"id": token_id, "content": piece, "single_word": False, "lstrip": False, "rstrip": False,
                       "normalized": False, "special": True})
    path = out / "tokenizer.json"
    path.write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    config = tokenizer.path.with_name("tokenizer_config.json")
    if config.is_file():
        shutil.copyfile(config, out / config.name)
    return path


def _tiktoken(tokenizer, pieces, added, out: Path) -> Path:
    path = out / tokenizer.path.name
    shutil.copyfile(tokenizer.path, path)
    side = {"pattern": tokenizer.encoding._pat_str, "special_tokens": {**tokenizer.specials, **dict(added)},
            "bos": tokenizer.bos, "eos": tokenizer.eos}
    path.with_name(path.name + ".json").write_text(json.dumps(side, indent=2) + "\n", encoding="utf-8")
    return path


_WRITERS = {"sentencepiece": _sentencepiece, "huggingface": _huggingface, "tiktoken": _tiktoken}
