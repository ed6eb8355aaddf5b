"""A suite for gpuwatch's pytest plugin (tests/e2e/pytest_test.cc), run under
`gpuwatch run` and without it. The test file states what each test does to
device memory; the e2e test asserts what the plugin makes of it."""
import ctypes
import gc

import pytest

from suite_cuda import cudart, free, kept_by_library, malloc

KEPT = []  # what the suite leaks stays referenced: the leak is the device's


def test_clean():
    free(malloc(4 << 20))  # peak 4 MiB, nothing left


def test_leaks():
    pointer = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(pointer), 1 << 20) == 0  # SUITE:leak
    KEPT.append(pointer.value)


@pytest.fixture
def scratch():
    held = []
    yield held
    for pointer in held:  # freed by the test's own teardown: not a leak
        free(pointer)


def test_freed_by_fixture(scratch):
    scratch.append(malloc(2 << 20))


@pytest.fixture(scope="module")
def weights():
    pointer = malloc(8 << 20)  # shared by the module's tests: not the first one's leak
    yield pointer
    free(pointer)


def test_uses_weights(weights):
    assert weights


def test_uses_weights_too(weights):
    assert weights


@pytest.fixture
def leaky_fixture():
    KEPT.append(malloc(512 << 10))  # SUITE:fixture_leak
    yield


def test_fixture_leaks(leaky_fixture):
    pass


@pytest.mark.gpuwatch(max_leak="2MiB")
def test_leak_within_its_limit():
    KEPT.append(malloc(1 << 20))


@pytest.mark.gpuwatch(max_peak="1MiB")
def test_peak_over_its_limit():
    free(malloc(3 << 20))


@pytest.mark.gpuwatch(max_leak="512KiB")
@pytest.mark.parametrize("blocks", [1, 2, 3])
def test_parametrised(blocks):
    for _ in range(blocks):
        KEPT.append(malloc(256 << 10))  # SUITE:parametrised


@pytest.fixture
def broken_fixture():
    KEPT.append(malloc(1 << 20))
    raise RuntimeError("the fixture fails")


def test_setup_error(broken_fixture):
    pass


def test_fails_and_leaks():
    KEPT.append(malloc(1 << 20))
    assert 1 + 1 == 3


def test_kept_by_a_library():
    KEPT.append(kept_by_library(3 << 20))  # SUITE:kept


class Cycle:
    """Device memory held by garbage: freed when the cycle is collected."""

    def __init__(self, nbytes):
        self.pointer = malloc(nbytes)
        self.itself = self

    def __del__(self):
        free(self.pointer)


def test_garbage_is_not_a_leak():
    gc.disable()  # only gpuwatch's plugin collects it (conftest.py enables again)
    Cycle(6 << 20)
