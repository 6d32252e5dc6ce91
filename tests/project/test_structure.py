"""The codebase stays readable: no module over 342 lines, no function over 50, no import
circle (every module imports on its own, in a fresh interpreter), a complexity limit (ruff C901)."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

PACKAGE = ROOT / "objcli"
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_MODULE_LINES = 342
MAX_FUNCTION_LINES = 50


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_is_too_long():
    long = {_name(p): n for p in MODULES if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long


def test_no_function_is_too_long():
    long = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{_name(path)}.{node.name}: {length} lines")
    assert not long


@pytest.mark.heavy  # 14 s of CPU; the default run finds circles from the imports as written (below)
def test_every_module_imports_on_its_own():
    """An import circle shows up as an ImportError when the module on the circle is imported first."""
    script = (
        "import importlib, importlib.machinery, sys\n"
        # Each module's code compiled once (a module still runs afresh at each import): without bytecode
        # files (PYTHONDONTWRITEBYTECODE) every import compiled its source again, 22 s of CPU.
        "compiled, to_code = {}, importlib.machinery.SourceFileLoader.source_to_code\n"
        "def source_to_code(self, data, path, *, _optimize=-1):\n"
        "    if path not in compiled:\n"
        "        compiled[path] = to_code(self, data, path, _optimize=_optimize)\n"
        "    return compiled[path]\n"
        "importlib.machinery.SourceFileLoader.source_to_code = source_to_code\n"
        f"names = {[_name(p) for p in MODULES]!r}\n"
        "failed = []\n"
        "for name in names:\n"
        "    for loaded in [m for m in sys.modules if m == 'objcli' or m.startswith('objcli.')]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as error:\n"
        "        failed.append(f'{name}: {error!r}')\n"
        "print('\\n'.join(failed))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout + result.stderr


def test_ruff_passes_with_the_complexity_limit():
    """pyproject.toml selects C90 (mccabe, max-complexity 12) beside the usual rules."""
    root = PACKAGE.parent
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "objcli", "tests"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout


def test_every_line_is_as_ruff_format_writes_it():
    """One layout, lines of at most 120 characters (pyproject.toml), so the limits above count code, not width."""
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "objcli", "tests"],
        cwd=PACKAGE.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout


STAGES = ("inputs", "tokenizers", "images", "objectives", "stores", "packing", "formats", "kernels", "order")
STAGES += ("storage",)
ORCHESTRATION = (
    "objcli.transform",
    "objcli.run",
    "objcli.cli",
    "objcli.cli_options",
    "objcli.commands",
    "objcli.executors",
)


def _imports(path: Path) -> set[str]:
    """Every module a file imports (relative imports resolved), at any depth of the file."""
    package = _name(path) if path.name == "__init__.py" else _name(path).rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found |= {module} | {f"{module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def test_the_package_root_holds_the_run_and_its_configuration_only():
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= 10, root


def test_stage_packages_never_import_the_orchestration():
    """read → tokenize → objective → pack → order → write are libraries the run calls, never the
    other way round: nothing in a stage package imports transform, run/, the CLI, commands/ or executors/."""
    back = []
    for path in MODULES:
        stage = path.relative_to(PACKAGE).parts[0]
        if stage in STAGES:
            back += [
                f"{_name(path)} -> {m}"
                for m in _imports(path)
                if any(m == o or m.startswith(o + ".") for o in ORCHESTRATION)
            ]
    assert not back


def _objcli_imports(path: Path, modules: set[str]) -> set[str]:
    """The objcli modules a file imports (``from .x import name`` counts as ``x.name`` where that is a module)."""
    found = set()
    for name in _imports(path):
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != _name(path):
            found.add(name)
    return found


def _package(module: str) -> str:
    """The top-level part a module belongs to: ``objcli.formats`` for ``objcli.formats.arrow``."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (PACKAGE / parts[-1]).is_dir() else module


def test_no_import_circle_between_modules_or_packages():
    """Imports at any depth (inside functions too) form no circle between two modules, and no two parts of
    objcli (a stage package, orchestration, the root modules) import each other: each has a place in one
    order, so a module can be read, tested and moved knowing only what it imports."""
    modules = {_name(p) for p in MODULES}
    graph = {_name(p): _objcli_imports(p, modules) for p in MODULES}
    circles = []
    for start in graph:  # a depth-first search for a path back to the start
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    circles.append(" -> ".join([*path, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    assert not circles, circles[:5]
    packages: dict[str, set[str]] = {}
    for module, imported in graph.items():
        packages.setdefault(_package(module), set()).update(_package(m) for m in imported)
    mutual = sorted(f"{a} <-> {b}" for a in packages for b in packages[a] if a < b and a in packages.get(b, ()))
    assert not mutual


def test_no_objective_reads_the_configuration_the_packer_or_the_format():
    """Objectives get a narrow context (objectives/base.ObjectiveContext): the run resolves policy once."""
    readers = []
    for path in (PACKAGE / "objectives").glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = _imports(path)
        readers += [f"{path.name} imports {m}" for m in imported if m.startswith(("objcli.config", "objcli.packing"))]
        readers += [
            f"{path.name}:{node.lineno} reads .{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr in ("config", "packing", "output_format", "remainder")
        ]
    assert not readers


def test_the_transform_module_is_setup_run_finish():
    assert len((PACKAGE / "transform.py").read_text().splitlines()) <= 250


def test_tests_are_shaped_like_the_package():
    """A folder of tests for every stage package, the helpers in support/, the benchmarks in benchmarks/, and no
    test file loose at the top."""
    tests = PACKAGE.parent / "tests"
    folders = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    assert set(STAGES) <= folders and {"support", "benchmarks"} <= folders
    assert sorted(p.name for p in tests.glob("*.py")) == ["conftest.py"]
