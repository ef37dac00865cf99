"""The docs site builds with `mkdocs build --strict` (mkdocs.yml turns every broken link, missing page and
missing anchor into a warning, which strict fails on), and its Reference pages are what the code gives now."""

from __future__ import annotations

import subprocess
import sys

from scripts.docs_reference import stale
from tests.docs.pages import REPO


def test_the_site_builds_strictly_with_no_broken_link_or_anchor(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "settings" / "index.html").is_file()


def test_the_generated_reference_pages_are_what_the_code_gives_now():
    assert stale(REPO) == [], "stale: run .venv/bin/python scripts/docs_reference.py"
