"""Reading the text column (or a text field of struct columns) of a Parquet input, in batches."""

from __future__ import annotations

import io
from collections.abc import Iterator

from ..errors import ObjcliError
from ..storage.remote import is_url, open_input
from .pieces import Piece, open_piece
from .records import RecordLog


def _parquet_text_path(schema, key: str, path: str) -> list[str]:
    """Check that ``key`` names a text column, or a text field of struct columns (``meta.body.text``;
    a column whose own name has dots wins); returns the field names inside the top-level column."""
    import pyarrow as pa

    names = [key] if key in schema.names else key.split(".")
    if names[0] not in schema.names:
        raise ObjcliError(
            f"input {path}: no column '{names[0]}' (columns: {', '.join(schema.names)}); "
            "choose the text column with --text-key"
        )
    field_type = schema.field(names[0]).type
    for depth, name in enumerate(names[1:], start=1):
        fields = (
            [field_type.field(i).name for i in range(field_type.num_fields)] if pa.types.is_struct(field_type) else []
        )
        if name not in fields:
            parent = ".".join(names[:depth])
            what = f"fields: {', '.join(fields)}" if fields else f"it is {field_type}, not a struct"
            raise ObjcliError(f"input {path}: column '{parent}' has no field '{name}' ({what}); fix --text-key")
        field_type = field_type.field(name).type
    if not (pa.types.is_string(field_type) or pa.types.is_large_string(field_type)):
        raise ObjcliError(
            f"input {path}: column '{key}' is {field_type}, not text; choose a string column with --text-key"
        )
    return names[1:]


def parquet_records(parquet_file, log: RecordLog) -> Iterator[list[str]]:
    """Every row as the JSON text of a record (conversations: ``messages`` is a list of structs)."""
    import msgspec

    total, done = max(parquet_file.metadata.num_rows, 1), 0
    for batch in parquet_file.iter_batches(batch_size=8192):
        rows = batch.to_pylist()
        log.read += len(rows)
        log.kept(range(done, done + len(rows)))
        done += len(rows)
        log.piece_fraction = done / total  # progress: the share of the file's rows read
        yield [msgspec.json.encode(row).decode("utf-8") for row in rows]


def parquet_texts(piece: Piece, key: str | None, log: RecordLog) -> Iterator[list[str]]:
    """The text column ``key`` in batches; with no key, whole rows as JSON records."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = piece.input.path
    source = (
        io.BytesIO(open_piece(piece).read()) if piece.input.is_stream else open_input(path) if is_url(path) else path
    )
    try:
        parquet_file = pq.ParquetFile(source)
    except (pa.ArrowInvalid, OSError) as error:
        raise ObjcliError(f"input {path}: not a readable Parquet file ({error})") from None
    if key is None:
        yield from parquet_records(parquet_file, log)
        return
    inner = _parquet_text_path(parquet_file.schema_arrow, key, path)
    row = 0
    for batch in parquet_file.iter_batches(batch_size=8192, columns=[key]):
        column = pc.struct_field(batch.column(0), inner) if inner else batch.column(0)
        log.read += len(column)
        if log.records is not None:
            valid = column.is_valid().to_pylist() if column.null_count else [True] * len(column)
            log.kept(row + i for i, ok in enumerate(valid) if ok)
        if column.null_count:
            first_null = int(pc.index(pc.is_null(column), True).as_py())
            for _ in range(column.null_count):
                log.skip("null_text", f"{path}: row {row + first_null}", f"column '{key}' is null")
            column = column.drop_null()
        texts = column.to_pylist()
        row += len(batch)
        log.piece_fraction = row / max(parquet_file.metadata.num_rows, 1)  # progress: the share of rows read
        yield texts
