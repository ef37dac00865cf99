"""Every repository path the README, the docs pages and the stack files name exists, and the docs and the
Makefile name one Pulumi install link."""

import glob
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [
    "README.md",
    "Pulumi.dev.yaml",
    "Pulumi.prod.yaml",
    # docs/architecture.md's tree names paths relative to their folder; tests/test_architecture_doc.py checks it.
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md") if p.name != "architecture.md"),
]
# A path into one of the repository's top-level folders; `<...>` placeholders are not paths.
PATH = re.compile(r"(?<![\w./-])((?:contract|components|capacity|policies|modelsync|tests|docs|benchmarks)/[\w./*-]*)")


# A quoted output (a ```text block) shows what a command printed, where a table may cut a long path.
OUTPUT_BLOCK = re.compile(r"^(\s*)```text\n.*?^\1```", re.S | re.M)


def named_paths(document: str) -> list[str]:
    text = OUTPUT_BLOCK.sub("", (ROOT / document).read_text())
    return [m.rstrip(".,:;)") for m in PATH.findall(text)]


def exists(path: str) -> bool:
    """A file or folder (a glob may match), or `module.Name` of a module that exists."""
    if glob.glob(str(ROOT / path)):
        return True
    module, _, _name = path.rpartition(".")
    return bool(module) and (ROOT / f"{module}.py").is_file()


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_path_a_document_names_exists(document):
    assert [p for p in named_paths(document) if not exists(p)] == []


def test_the_docs_and_the_makefile_give_the_same_pulumi_install_link():
    makefile = re.search(r"PULUMI_INSTALL_URL := (\S+)", (ROOT / "Makefile").read_text())
    assert makefile is not None
    text = "".join((ROOT / document).read_text() for document in DOCUMENTS if document.endswith(".md"))
    links = set(re.findall(r"https://www\.pulumi\.com/docs/[\w/.-]*install[\w/.-]*", text))
    assert links == {makefile.group(1)}
