import gc


def pytest_unconfigure(config):
    gc.enable()  # test_garbage_is_not_a_leak disabled it
