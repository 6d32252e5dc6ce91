"""Rebuild the sample corpus in this folder from the CPython 3.11 standard library.

Everything here is real text written by people: the Python Language Reference
(shipped with CPython as ``pydoc_data.topics``), docstrings of standard-library
modules, and standard-library source code. All of it is under the PSF License
(see LICENSE-PSF.txt). The script is deterministic for a given CPython build:

    python sample_data/build_sample_data.py
    objcli train-tokenizer sample_data/prose.jsonl sample_data/code.jsonl \
        --vocab-size 8000 -o sample_data/tokenizer.model

The committed files were made with CPython 3.11.7.
"""

from __future__ import annotations

import ast
import json
import sys
import sysconfig
from pathlib import Path

HERE = Path(__file__).resolve().parent
STDLIB = Path(sysconfig.get_paths()["stdlib"])

# Pure-Python modules with a long history of human-written code and comments.
CODE_MODULES = [
    "argparse.py", "bisect.py", "calendar.py", "collections/__init__.py", "configparser.py",
    "csv.py", "dataclasses.py", "difflib.py", "enum.py", "fnmatch.py", "fractions.py",
    "functools.py", "getopt.py", "gettext.py", "glob.py", "heapq.py", "json/decoder.py",
    "json/encoder.py", "keyword.py", "linecache.py", "locale.py", "operator.py", "pprint.py",
    "queue.py", "random.py", "sched.py", "shlex.py", "statistics.py", "string.py",
    "textwrap.py", "tokenize.py", "uuid.py", "wave.py",
]
MIN_DOCSTRING_CHARS = 300


def reference_topics() -> list[dict]:
    from pydoc_data.topics import topics

    return [
        {"id": f"ref/{name}", "source": "Python Language Reference", "text": text.strip()}
        for name, text in sorted(topics.items())
    ]


def docstrings() -> list[dict]:
    records = []
    for path in sorted(STDLIB.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        nodes = [tree] + [
            n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef))
        ]
        for node in nodes:
            doc = ast.get_docstring(node)
            if doc and len(doc) >= MIN_DOCSTRING_CHARS:
                name = getattr(node, "name", "<module>")
                records.append(
                    {"id": f"doc/{path.stem}.{name}", "source": "CPython docstring", "text": doc}
                )
    return records


def code_files() -> list[dict]:
    return [
        {
            "id": f"code/{name}",
            "source": "CPython standard library",
            "text": (STDLIB / name).read_text(encoding="utf-8"),
        }
        for name in CODE_MODULES
    ]


def write_jsonl(path: Path, records: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


def main() -> None:
    reference = reference_topics()
    write_jsonl(HERE / "prose.jsonl", reference + docstrings())
    write_jsonl(HERE / "code.jsonl", code_files())
    # The same reference as plain text, one blank-line-separated paragraph per document.
    (HERE / "reference.txt").write_text(
        "\n\n".join(r["text"] for r in reference) + "\n", encoding="utf-8"
    )
    print(f"built from CPython {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
