"""``python -m torch_tpu.info``: what torch_tpu runs on, in the manner of
``python -m torch.utils.collect_env``: versions, the PJRT plugin and its C
API version, the devices and their memory, the eager mode, the matmul
precision, the persistent compilation cache, and the environment variables
in effect. Exits with status 1, naming the fix, when no tpu device can be
used.
"""

from __future__ import annotations

import os
import platform
import sys


def _client_options(info):
    """The create options torch_tpu passed to the plugin (see README, Plugins)."""
    import torch

    from torch_tpu import _C

    opts = dict(_C._platform_client_options(info["platform"], info["path"]))
    if info["platform"] == "cpu":
        opts["cpu_device_count"] = torch.tpu.device_count()
    return opts


def _dir_size(path: str) -> tuple[int, int]:
    entries = total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
                entries += 1
            except OSError:
                pass
    return entries, total


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def collect() -> tuple[list[tuple[str, str]], str | None]:
    """(label, value) rows, and the error that makes the device unusable
    (None when it works)."""
    import torch

    import torch_tpu
    from torch_tpu import _C
    from torch_tpu._env import VARIABLES

    rows = [
        ("torch", torch.__version__),
        ("torch_tpu", _version("torch_tpu")),
        ("jax (optional)", _version("jax")),
        ("Python", sys.version.split()[0]),
        ("OS", f"{platform.system()} {platform.release()} ({platform.machine()})"),
        ("CPU cores", str(os.cpu_count())),
    ]
    error = None
    try:
        torch.tpu.init()
        info = _C._plugin_info()
        rows += [
            ("PJRT plugin", info["path"]),
            ("plugin platform", f"{info['platform']} (version {info['platform_version']})"),
            ("PJRT C API", "%d.%d" % tuple(info["api_version"])),
            ("plugin attributes", ", ".join(f"{k} {v}" for k, v in sorted(info["attributes"].items()))
             or "(none)"),
            ("client options", ", ".join(
                f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                for k, v in _client_options(info).items()) or "(plugin defaults)"),
        ]
        n = torch.tpu.device_count()
        for i in range(n):
            props = torch.tpu.get_device_properties(i)
            free, total = torch.tpu.mem_get_info(i)
            rows.append((f"tpu:{i}", f"{props.name}, {total / 2**30:.1f} GiB "
                                     f"({free / 2**30:.1f} GiB free to this process)"))
    except Exception as e:  # noqa: BLE001 - reported, with the fix
        error = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        rows.append(("device", f"unusable: {error}"))
    rows += [
        ("eager mode", torch_tpu.get_eager_mode().name),
        ("matmul precision", torch_tpu.Precision(_C._current_precision()).name),
        ("CPU fallback", "on" if _C._cpu_fallback_enabled() else "off"),
    ]
    cache = torch_tpu._cache_dir()
    if cache:
        entries, size = _dir_size(cache) if os.path.isdir(cache) else (0, 0)
        rows.append(("compilation cache", f"{cache} ({entries} files, {size / 2**20:.1f} MiB)"))
    else:
        rows.append(("compilation cache", "off"))
    env = [(v.name, os.environ[v.name]) for v in VARIABLES if v.name in os.environ]
    env += sorted((k, v) for k, v in os.environ.items()
                  if k in ("XLA_FLAGS", "PJRT_DEVICE", "LOCAL_RANK", "WORLD_SIZE",
                           "TORCH_DEVICE_BACKEND_AUTOLOAD", "TORCH_LOGS"))
    rows.append(("environment", ", ".join(f"{k}={v}" for k, v in env) or "(no torch_tpu variables set)"))
    return rows, error


def main() -> int:
    rows, error = collect()
    width = max(len(label) for label, _ in rows)
    print("torch_tpu environment")
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")
    if error is not None:
        print("\nNo tpu device can be used. Install a PJRT plugin (the CPU plugin: pip install "
              "xla-cpu-pjrt; a TPU: pip install libtpu; an NVIDIA GPU: pip install "
              "jax-cuda13-pjrt), or point TORCH_TPU_PLUGIN_PATH at a plugin .so, or unset "
              "TORCH_TPU_PLATFORM if it names a platform this machine lacks.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
