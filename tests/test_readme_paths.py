"""Every repository path the README and the stack files name exists, and both name one Pulumi install link."""

import glob
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ["README.md", "Pulumi.dev.yaml", "Pulumi.prod.yaml"]
# A path into one of the repository's top-level folders; `<...>` placeholders are not paths.
PATH = re.compile(r"(?<![\w./-])((?:contract|components|capacity|policies|modelsync|tests|docs|benchmarks)/[\w./*-]*)")


def named_paths(document: str) -> list[str]:
    return [m.rstrip(".,:;)") for m in PATH.findall((ROOT / document).read_text())]


def exists(path: str) -> bool:
    """A file or folder (a glob may match), or `module.Name` of a module that exists."""
    if glob.glob(str(ROOT / path)):
        return True
    module, _, _name = path.rpartition(".")
    return bool(module) and (ROOT / f"{module}.py").is_file()


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_path_a_document_names_exists(document):
    assert [p for p in named_paths(document) if not exists(p)] == []


def test_the_readme_and_the_makefile_give_the_same_pulumi_install_link():
    makefile = re.search(r"PULUMI_INSTALL_URL := (\S+)", (ROOT / "Makefile").read_text())
    assert makefile is not None
    links = set(re.findall(r"https://www\.pulumi\.com/docs/[\w/.-]*install[\w/.-]*", (ROOT / "README.md").read_text()))
    assert links == {makefile.group(1)}
