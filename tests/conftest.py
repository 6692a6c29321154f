"""Fixtures shared by the whole suite."""

import os

import pytest


@pytest.fixture(scope="session")
def require_external():
    """`require(what, available, hint)`: skip a test whose external part (ZooKeeper, Java,
    PySpark) is missing, except under CI, where a missing part is a failure: CI must run
    every test, not quietly skip the ones that prove conformance."""

    def require(what: str, available: bool, hint: str) -> None:
        if available:
            return
        message = f"{what} is not available: {hint}"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI is set, so this test must run, not skip)")
        pytest.skip(message)

    return require
