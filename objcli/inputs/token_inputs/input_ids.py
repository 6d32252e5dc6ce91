"""Hugging Face datasets with a column of ids (``input_ids``, or the column ``--text-key`` names): a
``save_to_disk`` folder, or Arrow or Parquet files. Detected by content: a folder whose
``dataset_info.json`` has the column among its features, a Parquet or Arrow file whose schema holds it
as a list of integers (and no ``text`` column beside it, unless ``--text-key`` names the ids column).
A row's list is a document; other columns are not read."""

from __future__ import annotations

import json
import os

from ...errors import ObjcliError
from ..folders import holds_more_than_a_saved_dataset
from .base import InputSite, TokenFile, TokenInputFormat, register

TABLE_SUFFIXES = (".parquet", ".arrow")
DEFAULT_IDS = "input_ids"  # the column read when --text-key names none


@register
class InputIdsInput(TokenInputFormat):
    detection_rank = 30
    name = "input-ids"

    def detect(self, site: InputSite, ids_key: str) -> bool:
        folder = site.path.rstrip("/")
        if site.isfile(folder + "/state.json"):
            if not site.remote and holds_more_than_a_saved_dataset(folder):
                return False  # a folder of the user's files with a dataset among them: read as a folder
            return _names_feature(site, folder + "/dataset_info.json", ids_key)
        if site.path.endswith(TABLE_SUFFIXES) and site.isfile(site.path):
            return _holds_ids_column(site, ids_key)
        return False

    def files(self, site: InputSite) -> list[str]:
        folder = site.path.rstrip("/")
        if site.isfile(folder + "/state.json"):
            names = saved_data_files(site.text(folder + "/state.json"), site.name)
            return [folder + "/state.json", *(f"{folder}/{name}" for name in names)]
        return [site.path]

    def copy_root(self, path: str) -> str:
        return path.rsplit("/", 1)[0] if path.endswith(TABLE_SUFFIXES) else path.rstrip("/")

    def open(self, path: str, ids_key: str, eos: int | None) -> TokenFile:
        """A ``save_to_disk`` folder, or Arrow (stream or file) or Parquet files, by their column."""
        import pyarrow as pa

        from ...formats._arrow_columns import list_ragged, single_array

        if os.path.isdir(path):
            with open(os.path.join(path, "state.json"), encoding="utf-8") as f:
                files = [os.path.join(path, name) for name in saved_data_files(f.read(), path)]
        else:
            files = [path]
        tables = [_table(name, ids_key) for name in files]
        if any(ids_key not in t.column_names for t in tables):
            raise ValueError(f"no column {ids_key!r} (name the ids column with --text-key)")
        column = pa.chunked_array([c for t in tables for c in t.column(ids_key).chunks])
        if not _is_ids_type(column.type):
            raise ValueError(f"column {ids_key!r} is {column.type}, not a list of integers")
        ids = single_array(column)
        if ids.values.null_count:
            raise ValueError(f"column {ids_key!r} holds null ids")
        values, offsets = list_ragged(ids)
        if ids.null_count:
            raise ValueError(f"column {ids_key!r} holds null rows")
        return TokenFile(path, self.name, values, offsets)


def _table(name: str, ids_key: str):
    import pyarrow as pa

    from ...formats._arrow_columns import MissingColumn, read_parquet

    if name.endswith(".parquet"):
        try:
            return read_parquet(name, [ids_key])
        except MissingColumn as missing:
            raise ValueError(f"{missing} (name the ids column with --text-key)") from None
    try:
        return pa.ipc.open_stream(pa.memory_map(name)).read_all()
    except pa.ArrowInvalid:
        return pa.ipc.open_file(pa.memory_map(name)).read_all()


def _is_ids_type(kind) -> bool:
    import pyarrow as pa

    lists = pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
    return lists and pa.types.is_integer(kind.value_type)  # fixed-size: rows of one length (objcli's own)


def _names_feature(site: InputSite, info: str, ids_key: str) -> bool:
    try:
        return ids_key in json.loads(site.text(info)).get("features", {})
    except (OSError, ValueError, AttributeError):
        return False


def _holds_ids_column(site: InputSite, ids_key: str) -> bool:
    """Whether a Parquet or Arrow file's schema (read from its footer or head, not its data) has the
    column as a list of integers: a table of ids, not of text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with site.open(site.path) as f:
            if site.path.endswith(".parquet"):
                schema = pq.read_schema(f)
            else:
                try:
                    schema = pa.ipc.open_stream(f).schema
                except pa.ArrowInvalid:
                    f.seek(0)
                    schema = pa.ipc.open_file(f).schema
    except (OSError, pa.ArrowException, ValueError):
        return False  # not a table: the text reader says what is wrong with it
    index = schema.get_field_index(ids_key)
    if index < 0 or not _is_ids_type(schema.field(index).type):
        return False
    # Ids beside the text they came from: the text is read, unless --text-key named the ids column.
    return ids_key != DEFAULT_IDS or "text" not in schema.names


def saved_data_files(state: str, folder: str) -> list[str]:
    """The data files a ``save_to_disk`` folder's ``state.json`` names: plain file names inside the
    folder (datasets writes ``data-00000-of-00001.arrow``); anything else is one line, never a file
    read outside the folder."""
    from ...storage.manifest import is_plain_name

    try:
        entries = json.loads(state)["_data_files"]
        names = [entry["filename"] for entry in entries]
    except (ValueError, KeyError, TypeError):
        raise ObjcliError(
            f"input {folder}: its state.json lists no _data_files with a filename each (not datasets' "
            "save_to_disk layout); save the dataset again with save_to_disk"
        ) from None
    for name in names:
        if not isinstance(name, str) or not is_plain_name(name):
            raise ObjcliError(
                f"input {folder}: its state.json names data file {name!r}, not a file inside the folder; "
                "name each data file by its plain name beside state.json (as save_to_disk writes it)"
            )
    return names
