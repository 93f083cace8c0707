"""Tools that run beside the user API and are never imported by it:
``python -m torch_tpu.tools.validate`` (tiny models of every family on tpu
against CPU)."""
