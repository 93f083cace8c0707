"""Small adapters that let libraries which name devices themselves accept
the tpu device. Each is installed only when its library is: at import for
safetensors, and when the library's module is first imported for the others
(a post-import hook), so ``import torch`` does not import them."""

import importlib.abc
import importlib.util
import sys


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Runs a function on a module right after its first import (and, where
    asked, one on its spec right before)."""

    def __init__(self):
        self.hooks = {}
        self.before = {}

    def find_spec(self, fullname, path=None, target=None):
        hook = self.hooks.get(fullname)
        if hook is None:
            return None
        # Find the real spec with the other finders, then wrap its loader.
        self.hooks.pop(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.hooks.setdefault(fullname, hook)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        exec_module = loader.exec_module
        hooks, befores = self.hooks, self.before

        def exec_then_hook(module):
            # Popped here, not in find_spec: importlib.util.find_spec (an
            # availability check) finds specs that are never executed.
            before = befores.pop(fullname, None)
            if before is not None:
                before(spec)
            exec_module(module)
            if hooks.pop(fullname, None) is not None:
                hook(module)

        loader.exec_module = exec_then_hook
        return spec


_finder = _PostImportFinder()


def when_imported(name, hook, before=None) -> None:
    """Call hook(module) once module `name` is imported (now if it is), and
    before(spec) right before it is (unless it already is)."""
    if name in sys.modules:
        hook(sys.modules[name])
        return
    _finder.hooks[name] = hook
    if before is not None:
        _finder.before[name] = before
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def install() -> None:
    if importlib.util.find_spec("safetensors") is not None:
        from . import safetensors as _safetensors

        _safetensors.install()
    from . import accelerate as _accelerate

    when_imported("accelerate.state", _accelerate.install)
    from . import fbgemm as _fbgemm

    when_imported("fbgemm_gpu", _fbgemm.install)
    from . import torchvision as _torchvision

    when_imported("torchvision", _torchvision.install, before=_torchvision.before_import)
