"""Small adapters that let libraries which name devices themselves accept
the tpu device. Each is installed at import only when its library is."""

import importlib.util


def install() -> None:
    if importlib.util.find_spec("safetensors") is not None:
        from . import safetensors as _safetensors

        _safetensors.install()
