"""Fixtures: each stack evaluated once per session under Pulumi mocks."""

from __future__ import annotations

import pytest

from tests.harness import StackRun, run_program


@pytest.fixture(scope="session")
def dev() -> StackRun:
    return run_program("dev")


@pytest.fixture(scope="session")
def prod() -> StackRun:
    return run_program("prod")


@pytest.fixture(scope="session", params=["dev", "prod"])
def stack(request: pytest.FixtureRequest, dev: StackRun, prod: StackRun) -> StackRun:
    return {"dev": dev, "prod": prod}[request.param]
