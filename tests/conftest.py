"""Shared test set-up: nothing a test run measures or caches lands in the user's ~/.cache."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("TRANSFORMER_CACHE_DIR", str(tmp_path_factory.mktemp("transformer-cache")))
    yield
    mp.undo()
