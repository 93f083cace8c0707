"""Entry point for ``torch.backends`` autoloading (``import torch`` calls it)."""


def load():
    import torch_tpu  # noqa: F401
