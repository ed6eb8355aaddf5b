"""`gpuwatch run` puts this folder first on PYTHONPATH: Python imports this
file at start-up, which runs any other sitecustomize on the path (the one it
hides), then gpuwatch.torch_hooks.install(), with PyTorch's blocks when
GPUWATCH_TORCH_BLOCKS=1 (`gpuwatch run --torch-blocks`). A failure costs one
line on stderr, never the program."""


def _chain():
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def _install():
    import os

    import gpuwatch.torch_hooks
    gpuwatch.torch_hooks.install(blocks=os.environ.get("GPUWATCH_TORCH_BLOCKS") == "1")


for _step in (_chain, _install):
    try:
        _step()
    except Exception as _e:  # noqa: BLE001 - never the program's failure
        import sys
        sys.stderr.write(f"gpuwatch: sitecustomize: {_step.__name__[1:]} failed "
                         f"({type(_e).__name__}: {_e}); carrying on\n")
