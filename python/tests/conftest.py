import gc

import pytest

import nvsci


def live_handles():
    """The mock's live handles, after collecting what Python still holds."""
    gc.collect()
    return {k: v for k, v in nvsci.mock_handle_counts().items() if v}


@pytest.fixture(autouse=True)
def ledger():
    """Every test ends with the live handles of the mock NvSci library it started with (none,
    unless an earlier test failed and reported its own): a stream, its frames and everything
    taken from them are freed once Python drops them. Comparing against the start, not against
    none, keeps one failing test from failing every test after it."""
    before = live_handles()
    yield
    assert live_handles() == before, "the test left live handles of the mock"
