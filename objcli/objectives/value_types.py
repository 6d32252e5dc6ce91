"""The type of a value column from the records' own JSON values (``rows.ColumnSpec.value_type``'s
grammar: ``"string"``, ``"int64"``, ``"float64"``, ``"bool"``, ``"null"``, ``("list", item)``,
``("struct", ((name, type), …))``), so a column keeps every record's values as they are: nested
records, lists, booleans, numbers. One column holds one type, as Arrow, Parquet and ``datasets`` do
(``datasets``' own JSON loader infers it the same way): ``null`` joins any type, an integer and a
float make a float, two records join their fields (one without a field reads it back as null), and
anything else is a clash, said in one line naming the field. An object with no fields anywhere in
its column is written as null: Parquet has no struct without fields."""

from __future__ import annotations

from ..errors import ObjcliError
from ..rows import fold_value_type

NULL = "null"
MAX_DEPTH = 64  # deeper values are a record's counted skip (``too_deep``): no reader walks them
_INT64 = (-(2**63), 2**63 - 1)


class TooDeep(ValueError):
    """A value nested deeper than ``MAX_DEPTH``."""


def type_of(value, depth: int = 0):
    """The type of one JSON value (see the module)."""
    if depth > MAX_DEPTH:
        raise TooDeep(f"a value nested deeper than {MAX_DEPTH} levels")
    if value is None:
        return NULL
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64" if _INT64[0] <= value <= _INT64[1] else "float64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        item = NULL
        for element in value:
            item = unify(item, type_of(element, depth + 1))
        return ("list", item)
    if isinstance(value, dict):
        return ("struct", tuple((str(k), type_of(v, depth + 1)) for k, v in value.items()))
    raise TypeError(f"not a JSON value: {type(value).__name__}")


_NAMES = {"string": "a string", "int64": "an integer", "float64": "a number", "bool": "a boolean"}


def _name(value_type) -> str:
    if isinstance(value_type, str):
        return _NAMES[value_type]
    return {"list": "a list", "struct": "an object"}[value_type[0]]


def unify(a, b, where: str = "value"):
    """The one type that holds values of both types; ``Clash`` when there is none."""
    if a == b:
        return a
    if a == NULL:
        return b
    if b == NULL:
        return a
    if {a, b} == {"int64", "float64"}:
        return "float64"
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0]:
        if a[0] == "list":
            return ("list", unify(a[1], b[1], f"{where}[]"))
        fields = dict(a[1])
        for name, kind in b[1]:
            fields[name] = unify(fields.get(name, NULL), kind, f"{where}.{name}")
        return ("struct", tuple(fields.items()))
    raise Clash(where, _name(a), _name(b))


class Clash(ObjcliError):
    def __init__(self, where: str, first: str, second: str):
        self.where = where
        super().__init__(
            f"{where}: records hold {first} here and {second} there, and a column holds one type; "
            "make the records agree (or drop the field from the ones that differ)"
        )


def writable(value_type):
    """The type as a row format writes it: an object without fields anywhere becomes null."""
    return fold_value_type(
        value_type, str, lambda item: ("list", item), lambda fields: ("struct", fields) if fields else NULL
    )


def fitted(value, value_type):
    """A value as its column's type holds it: an object written as null where the column has no fields."""
    if value is None or value_type == NULL:
        return None
    if isinstance(value_type, str):
        return value
    if value_type[0] == "list":
        return [fitted(v, value_type[1]) for v in value]
    return {name: fitted(value.get(name), kind) for name, kind in value_type[1]}
