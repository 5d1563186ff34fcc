import gc

import pytest

import nvsci


def live_handles():
    """The mock's live handles, after collecting what Python still holds."""
    gc.collect()
    return {k: v for k, v in nvsci.mock_handle_counts().items() if v}


@pytest.fixture(autouse=True)
def ledger():
    """Every test starts and ends with no live handle of the mock NvSci library: a stream,
    its frames and everything taken from them are freed once Python drops them."""
    assert live_handles() == {}, "handles left by an earlier test"
    yield
    assert live_handles() == {}, "the test left live handles of the mock"
