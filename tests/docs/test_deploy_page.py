"""The Deploy page says, before any command, what each committed stack costs per hour, the GPU quota it
needs, its region and how long a replica takes to start, computed from the stack's own settings."""

from __future__ import annotations

from tests.docs.facts import table
from tests.docs.pages import REPO, read


def test_the_deploy_page_quotes_what_each_stack_costs_needs_and_takes():
    page = read("getting-started/deploy.md")
    assert table(REPO) in page, "print tests.docs.facts.table(REPO) and paste it into the page"
    assert page.index(table(REPO)) < page.index("```bash"), "the numbers come before the first command"
