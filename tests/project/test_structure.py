"""The codebase stays readable: no module over ~400 lines, no function over ~60, no import
circle (every module imports on its own, in a fresh interpreter), a complexity limit (ruff C901)."""

import ast
import subprocess
import sys
from pathlib import Path

from paths import ROOT

PACKAGE = ROOT / "objcli"
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


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


def test_every_module_imports_on_its_own():
    """An import circle shows up as an ImportError when the module on the circle is imported first."""
    script = (
        "import importlib, sys\n"
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
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "objcli", "tests"], cwd=root, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout


STAGES = ("readers", "tokenizers", "objectives", "packing", "writers", "kernels", "order", "storage")
ORCHESTRATION = ("objcli.transform", "objcli.run", "objcli.cli", "objcli.cli_options", "objcli.commands",
                 "objcli.executors")


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
            back += [f"{_name(path)} -> {m}" for m in _imports(path)
                     if any(m == o or m.startswith(o + ".") for o in ORCHESTRATION)]
    assert not back
