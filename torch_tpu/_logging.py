"""Compile logs through Python ``logging``, switched on by TORCH_TPU_LOGS
(in the style of TORCH_LOGS) or ``set_logs``.

Loggers (children of ``torch_tpu``):
  ``torch_tpu.compiles``       every compile and persistent-cache load;
  ``torch_tpu.recompiles``     programs compiled again, with the cause
                               (new shape, dtype, precision, attributes)
                               and the user's line;
  ``torch_tpu.slow_compiles``  compiles past the slow threshold (while one
                               runs, a line on stderr every threshold
                               seconds says it is still compiling).
"""

from __future__ import annotations

import logging
import os
import sys
import traceback

from . import _C

__all__ = ["set_logs"]

_NAMES = ("compiles", "recompiles", "slow_compiles")
_root = logging.getLogger("torch_tpu")
_loggers = {n: logging.getLogger(f"torch_tpu.{n}") for n in _NAMES}
_enabled: dict[str, int] = {}  # name -> level
_slow_seconds = 10.0
_handler: logging.Handler | None = None
_PACKAGE_DIRS = tuple(
    os.path.dirname(m.__file__) + os.sep
    for m in (sys.modules["torch"], sys.modules[__package__])
    if getattr(m, "__file__", None)
)


def _user_line() -> str:
    """The innermost frame outside torch and torch_tpu: "file.py:12"."""
    for frame in reversed(traceback.extract_stack()):
        if not frame.filename.startswith(_PACKAGE_DIRS) and not frame.filename.startswith("<frozen"):
            return f"{frame.filename}:{frame.lineno}"
    return "?"


def _on_compile(name: str, tier: str, cause: str | None, seconds: float) -> None:
    where = None
    if "compiles" in _enabled:
        what = "loaded from the persistent cache" if tier == "disk" else "compiled"
        where = where or _user_line()
        _loggers["compiles"].log(_enabled["compiles"], "%s %s in %.3f s (%s)", what, name, seconds, where)
    if cause is not None and "recompiles" in _enabled:
        where = where or _user_line()
        _loggers["recompiles"].log(_enabled["recompiles"], "recompiling %s: %s%s (%s)", name, cause,
                                   ", loaded from the persistent cache" if tier == "disk" else "",
                                   where)
    if tier != "disk" and seconds >= _slow_seconds and "slow_compiles" in _enabled:
        where = where or _user_line()
        _loggers["slow_compiles"].log(max(_enabled["slow_compiles"], logging.WARNING),
                                      "slow compile: %s took %.1f s%s (%s)", name, seconds,
                                      f" ({cause})" if cause else "", where)


def set_logs(compiles: bool | int = False, recompiles: bool | int = False,
             slow_compiles: bool | int = False, slow_seconds: float | None = None) -> None:
    """Switches the compile logs on (True, or a logging level) or off, as
    ``torch._logging.set_logs`` does for TORCH_LOGS. Records go to the
    ``torch_tpu`` logger; a stderr handler is added to it when it has none."""
    global _slow_seconds, _handler
    if slow_seconds is not None:
        _slow_seconds = float(slow_seconds)
    _enabled.clear()
    for name, value in (("compiles", compiles), ("recompiles", recompiles),
                        ("slow_compiles", slow_compiles)):
        if value is True:
            _enabled[name] = logging.INFO
        elif value:
            _enabled[name] = int(value)
    for name, lg in _loggers.items():
        if name in _enabled:
            lg.setLevel(min(_enabled[name], lg.level or logging.INFO))
    if _enabled and not _root.handlers and _handler is None:
        _handler = logging.StreamHandler()
        _handler.setFormatter(logging.Formatter("[%(name)s] %(levelname)s %(message)s"))
        _root.addHandler(_handler)
        _root.setLevel(min(_enabled.values()))
        _root.propagate = False
    _C._set_compile_log(_on_compile if _enabled else None, _slow_seconds)


def _from_env(value: str, slow_seconds: str) -> None:
    """TORCH_TPU_LOGS: "compiles,recompiles", "+recompiles" (DEBUG), "all"."""
    if not value.strip():
        return
    kwargs = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        level = logging.DEBUG if item.startswith("+") else logging.INFO
        item = item.lstrip("+-")
        names = _NAMES if item == "all" else (item,)
        for n in names:
            if n not in _NAMES:
                raise ValueError(f"TORCH_TPU_LOGS: unknown log '{n}'; known: "
                                 f"{', '.join(_NAMES)}, all")
            kwargs[n] = level
    set_logs(**kwargs, slow_seconds=float(slow_seconds))
