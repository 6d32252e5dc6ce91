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
import os
import struct
from pathlib import Path

from ..errors import ObjcliError
from ..storage.manifest import read_manifest
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


class _Targets:
    """The files an export writes: each is refused if it exists (unless ``overwrite``), and always if
    it is one of the run's own tokenizer files (the output would no longer verify, nor the run
    repeat); each is written under a temporary name and renamed."""

    def __init__(self, tokenizer, overwrite: bool):
        own = [
            tokenizer.path,
            tokenizer.path.with_name(tokenizer.path.name + ".json"),
            tokenizer.path.with_name("tokenizer_config.json"),
        ]
        self.own = {p.resolve() for p in own if p.exists()}
        self.overwrite = overwrite

    def write(self, path: Path, data: bytes) -> Path:
        if path.resolve() in self.own:
            raise ObjcliError(f"output {path}: is the run's own tokenizer file; write the export to another folder")
        if path.exists() and not self.overwrite:
            raise ObjcliError(f"output {path}: exists; pass --overwrite to replace it, or choose another folder")
        temporary = path.with_name(f".{path.name}.objcli-tmp")
        try:
            temporary.write_bytes(data)
            os.replace(temporary, path)
        except OSError as error:
            temporary.unlink(missing_ok=True)
            raise ObjcliError(
                f"output {path}: {error.strerror or error}; free space or choose another folder"
            ) from None
        return path


def export_tokenizer(folder: str, destination: str, tokenizer_path: str | None = None, overwrite: bool = False) -> dict:
    manifest = read_manifest(folder)
    tokenizer = load_output_tokenizer(manifest, tokenizer_path)
    added = sorted(manifest.special_tokens.added.items(), key=lambda item: item[1])
    if [i for _, i in added] != list(range(tokenizer.vocab_size, tokenizer.vocab_size + len(added))):
        raise ObjcliError(
            f"{folder}: the allocated special ids are not contiguous after the vocabulary; "
            "the manifest was edited or is damaged"
        )
    out = Path(destination)
    if out.exists() and not out.is_dir():
        raise ObjcliError(f"output {destination}: exists and is not a folder; choose a folder with -o")
    out.mkdir(parents=True, exist_ok=True)
    pieces = [piece for piece, _ in added]
    targets = _Targets(tokenizer, overwrite)
    written = _WRITERS[tokenizer.kind](tokenizer, pieces, added, targets, out)
    if tokenizer.kind == "huggingface":
        _write_config(tokenizer, manifest.special_tokens.pieces, targets, out)
    return {
        "path": str(written),
        "kind": tokenizer.kind,
        "vocab_size": tokenizer.vocab_size + len(added),
        "added": len(added),
    }


def _sentencepiece(tokenizer, pieces, added, targets: _Targets, out: Path) -> Path:
    return targets.write(out / "tokenizer.model", sentencepiece_with_pieces(tokenizer.path.read_bytes(), pieces))


def _huggingface(tokenizer, pieces, added, targets: _Targets, out: Path) -> Path:
    """The file's own JSON with the pieces appended to ``added_tokens`` at their ids (every release
    of the library reads that; 1.0 has no method to add tokens)."""
    document = json.loads(tokenizer.path.read_text(encoding="utf-8"))
    tokens = document.setdefault("added_tokens", [])
    for piece, token_id in added:
        if piece in tokenizer.ids:
            raise ObjcliError(f"tokenizer.json: {piece!r} is already id {tokenizer.ids[piece]}, not {token_id}")
        tokens.append(
            {
                "id": token_id,
                "content": piece,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
        )
    return targets.write(out / "tokenizer.json", (json.dumps(document, ensure_ascii=False, indent=2) + "\n").encode())


def _write_config(tokenizer, pieces: dict[str, str], targets: _Targets, out: Path) -> Path:
    """The tokenizer's ``tokenizer_config.json`` (or a new one) naming the run's specials: a collator
    that pads (``DataCollatorWithPadding``, TRL's) reads ``pad_token`` from it, and the shards' pad is
    the run's (allocated, or given with --pad-token), not necessarily the file's."""
    source = tokenizer.path.with_name("tokenizer_config.json")
    config = json.loads(source.read_text(encoding="utf-8")) if source.is_file() else {}
    if "pad" in pieces:  # bos and eos stay the file's: a chat config's eos is its end of turn
        config["pad_token"] = pieces["pad"]
    return targets.write(out / source.name, (json.dumps(config, ensure_ascii=False, indent=2) + "\n").encode())


def _tiktoken(tokenizer, pieces, added, targets: _Targets, out: Path) -> Path:
    side = {
        "pattern": tokenizer.pattern,
        "special_tokens": {**tokenizer.specials, **dict(added)},
        "bos": tokenizer.bos,
        "eos": tokenizer.eos,
    }
    path = targets.write(out / tokenizer.path.name, tokenizer.path.read_bytes())
    targets.write(path.with_name(path.name + ".json"), (json.dumps(side, indent=2) + "\n").encode())
    return path


_WRITERS = {"sentencepiece": _sentencepiece, "huggingface": _huggingface, "tiktoken": _tiktoken}
