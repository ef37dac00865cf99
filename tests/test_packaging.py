"""`pip install '.[tools]'` carries everything the commands need: their data files and their imports
(issue 25, item 11: `plan` crashed without optuna and the GPU prices, `compare` lost its references)."""

import ast
import fnmatch
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGES = ("capacity", "contract", "modelsync")


def packaged(path: Path) -> bool:
    """Is this non-Python file matched by `[tool.setuptools.package-data]` of a package above it?"""
    data = PYPROJECT["tool"]["setuptools"]["package-data"]
    for parent in path.relative_to(ROOT).parents:
        package = ".".join(parent.parts)
        if (ROOT / parent / "__init__.py").is_file() and package in data:
            relative = path.relative_to(ROOT / parent).as_posix()
            if any(fnmatch.fnmatch(relative, pattern) for pattern in data[package]):
                return True
    return False


def data_files() -> list[Path]:
    return [
        p
        for package in PACKAGES
        for p in (ROOT / package).rglob("*")
        if p.is_file()
        and p.suffix not in (".py", ".pyc")
        and "__pycache__" not in p.parts
        and p.name != "requirements.txt"
    ]


def test_every_data_file_of_the_tools_is_in_the_package_data():
    assert data_files()  # the engine's datasheets at least
    assert [str(p.relative_to(ROOT)) for p in data_files() if not packaged(p)] == []


def third_party_imports(package: str) -> set[str]:
    names = set()
    for source in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in PACKAGES}


def declared(*extras: str) -> set[str]:
    """The distributions the base install and these extras name (normalised, no version or marker)."""
    project = PYPROJECT["project"]
    requirements = [*project["dependencies"], *(r for e in extras for r in project["optional-dependencies"][e])]
    return {re.split(r"[<>=;\[ ]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def test_every_module_the_capacity_commands_import_is_declared_by_the_capacity_extras():
    by_module = importlib.metadata.packages_distributions()
    needed = {d.lower().replace("_", "-") for m in third_party_imports("capacity") for d in by_module.get(m, [m])}
    assert needed - declared("capacity", "capacity-extras") == set()
