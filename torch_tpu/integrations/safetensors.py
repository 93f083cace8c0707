"""safetensors' readers (``safe_open``, ``safetensors.torch.load_file``) take
a device but parse it themselves and know only in-tree devices. With
``device="tpu"`` (or ``"tpu:0"``, ``torch.device("tpu")``) the file is read on
the host, as for CPU, and each tensor is copied to tpu as it is taken;
every other device goes to safetensors unchanged."""

from typing import Optional

import torch


def _tpu_device(device) -> Optional[torch.device]:
    if isinstance(device, (str, torch.device)):
        d = torch.device(device)
        if d.type == "tpu":
            return d
    return None


class _Slice:
    def __init__(self, inner, device):
        self._inner, self._device = inner, device

    def __getitem__(self, index):
        return self._inner[index].to(self._device)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _OnTpu:
    """A safe_open handle whose tensors land on tpu."""

    def __init__(self, inner, device):
        self._inner, self._device = inner, device

    def __enter__(self):
        self._inner.__enter__()
        return self

    def __exit__(self, *exc):
        return self._inner.__exit__(*exc)

    def get_tensor(self, name):
        return self._inner.get_tensor(name).to(self._device)

    def get_tensors(self):
        return {k: self.get_tensor(k) for k in self._inner.keys()}

    def get_slice(self, name):
        return _Slice(self._inner.get_slice(name), self._device)

    def __getattr__(self, name):  # keys, metadata, offset_keys, ...
        return getattr(self._inner, name)


def install() -> None:
    import safetensors
    import safetensors.torch as st

    original = safetensors.safe_open
    if getattr(original, "_torch_tpu_wrapped", False):
        return

    def safe_open(filename, framework, device="cpu", *args, **kwargs):
        dev = _tpu_device(device)
        if dev is None:
            return original(filename, framework, device, *args, **kwargs)
        return _OnTpu(original(filename, framework, "cpu", *args, **kwargs), dev)

    safe_open._torch_tpu_wrapped = True
    safe_open.__doc__ = original.__doc__
    safetensors.safe_open = safe_open
    st.safe_open = safe_open  # what load_file calls
