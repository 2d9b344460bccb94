"""Let the CUDA-only torchvision wheel import beside the CPU build of torch.

PyPI's torchvision 0.28 (the only one pairing with torch 2.13) is a CUDA build: its `_C.so` fails to load on CPU torch,
and `import torchvision` then dies on `operator torchvision::nms does not exist`. transformers' video processors need
torchvision's pure-Python transforms only, so defining the two op schemas that torchvision registers fake kernels for is
enough. vLLM imports torchvision in subprocesses it spawns, so this module is installed as a `.pth` hook into the venv
(scripts/setup_env.sh): the fix runs lazily, in every interpreter, the first time torchvision is imported.

This file is standalone (no package imports) because it is copied into site-packages.
"""

from __future__ import annotations

import importlib.abc
import sys

_LIBS: list = []  # keep torch.library.Library objects alive; dropping them unregisters the schemas


def _real_ops_load(torch) -> bool:
    """Try torchvision's own compiled ops first (a matching CPU build needs no shim)."""
    import glob
    import importlib.util
    import os

    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return False
    for folder in spec.submodule_search_locations:
        for path in glob.glob(os.path.join(folder, "_C*.so")):
            try:
                torch.ops.load_library(path)
                return True
            except OSError:
                return False
    return False


def apply() -> None:
    import torch

    try:
        torch._C._dispatch_find_schema_or_throw("torchvision::nms", "")
        return  # already defined (real ops loaded, or shim applied)
    except RuntimeError:
        pass
    if _real_ops_load(torch):
        return
    lib = torch.library.Library("torchvision", "FRAGMENT")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _LIBS.append(lib)


class _Finder(importlib.abc.MetaPathFinder):
    """Runs `apply()` once, just before torchvision is first imported; imports nothing otherwise."""

    def find_spec(self, name, path=None, target=None):
        if name == "torchvision":
            sys.meta_path.remove(self)
            try:
                apply()
            except Exception:  # never break an import because of the shim
                pass
        return None


def install() -> None:
    if "torchvision" in sys.modules:
        return
    if not any(isinstance(f, _Finder) or type(f).__name__ == "_Finder" for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


install()
