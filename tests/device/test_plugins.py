"""PJRT plugins other than the CPU one: version negotiation, libtpu and the
CUDA plugin on a machine without their device (the tests marked `libtpu` and
`cuda_plugin` run when those wheels are installed: pip install libtpu
jax-cuda13-pjrt), a plugin of another API major version, and the create
options and environment torch_tpu sets for each platform."""

import glob
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import torch_tpu
from torch_tpu import _C


def _python(code, env_extra, timeout=180):
    env = dict(os.environ, **env_extra)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _init_in_child(env_extra, timeout=180):
    """torch.tpu.is_available() and torch.tpu.init()'s error, in a fresh process."""
    return _python("""
        import torch, torch_tpu
        print("available", torch.tpu.is_available())
        try:
            torch.tpu.init()
        except RuntimeError as e:
            print("error:", e)
    """, env_extra, timeout=timeout)


def _pjrt_header_dir():
    import xla_plugins.xla_cpu_pjrt as p  # the CPU plugin's wheel carries the C API header

    return os.path.join(os.path.dirname(p.__file__), "include")


@pytest.fixture(scope="module")
def other_major_plugin(tmp_path_factory):
    """A plugin .so whose PJRT_Api says version 99.0."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the fake plugin")
    d = tmp_path_factory.mktemp("fake_plugin")
    src = d / "fake.c"
    src.write_text(textwrap.dedent("""
        #include <string.h>
        #include "pjrt_c_api.h"
        static PJRT_Api api;
        const PJRT_Api* GetPjrtApi(void) {
          memset(&api, 0, sizeof api);
          api.struct_size = PJRT_Api_STRUCT_SIZE;
          api.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
          api.pjrt_api_version.major_version = 99;
          api.pjrt_api_version.minor_version = 3;
          return &api;
        }
    """))
    so = d / "libfake_pjrt.so"
    subprocess.run([cc, "-shared", "-fPIC", "-I", _pjrt_header_dir(), str(src), "-o", str(so)],
                   check=True, capture_output=True)
    return str(so)


def test_plugin_of_another_major_version_is_refused(other_major_plugin):
    with pytest.raises(RuntimeError, match=r"libfake_pjrt\.so implements PJRT C API 99\.3, but "
                                           r"this build uses API 0\.\d+ \(major versions must match\)"):
        _C._probe_plugin(other_major_plugin)
    r = _init_in_child({"TORCH_TPU_PLUGIN_PATH": other_major_plugin})
    assert "available False" in r.stdout, r.stdout + r.stderr
    assert "PJRT C API 99.3" in r.stdout and "major versions must match" in r.stdout


def test_cpu_plugin_attributes_are_read():
    info = _C._plugin_info()
    attrs = info["attributes"]
    assert attrs["stablehlo_current_version"].count(".") == 2
    assert "stablehlo_minimum_version" in attrs
    probe = _C._probe_plugin(info["path"])
    assert probe["api_version"] == tuple(info["api_version"])
    assert probe["attributes"] == attrs


def _installed(pattern):
    """The first file matching `pattern` under a sys.path entry, or None."""
    for p in sys.path:
        hits = sorted(glob.glob(os.path.join(p, pattern))) if p else []
        if hits:
            return hits[-1]
    return None


def _libtpu_path():
    return _installed(os.path.join("libtpu", "libtpu.so"))


def _cuda_plugin_path():
    return _installed(os.path.join("jax_plugins", "xla_cuda*", "xla_cuda_plugin.so"))


libtpu_installed = pytest.mark.skipif(_libtpu_path() is None,
                                      reason="libtpu is not installed (pip install libtpu)")
cuda_plugin_installed = pytest.mark.skipif(
    _cuda_plugin_path() is None, reason="no CUDA PJRT plugin (pip install jax-cuda13-pjrt)")
no_gpu = pytest.mark.skipif(os.path.exists("/dev/nvidia0"), reason="this machine has a GPU")


@pytest.mark.libtpu
@libtpu_installed
def test_libtpu_loads_and_negotiates_without_a_tpu():
    r = _python(f"""
        import torch_tpu
        print(torch_tpu._C._probe_plugin({_libtpu_path()!r}))
    """, {"TPU_SKIP_MDS_QUERY": "1"}, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    probe = eval(r.stdout.strip().splitlines()[-1])  # noqa: S307 - our own repr
    assert probe["api_version"][0] == 0 and probe["api_version"][1] >= 81
    assert "stablehlo_current_version" in probe["attributes"]


def _check_auto_mode_uses_cpu_with_one_warning(plugin_word):
    r = _python(f"""
        import warnings, torch, torch_tpu
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            x = (torch.ones(3, device="tpu") + 1).cpu()
            y = (torch.ones(3, device="tpu") * 2).cpu()
        print("values", x.tolist(), y.tolist())
        print("platform", torch_tpu._C._platform())
        print("warnings", sum({plugin_word!r} in str(m.message) for m in w))
    """, {}, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "values [2.0, 2.0, 2.0] [2.0, 2.0, 2.0]" in r.stdout
    assert "platform cpu" in r.stdout and "warnings 1" in r.stdout, r.stdout


@pytest.mark.libtpu
@libtpu_installed
def test_auto_mode_falls_back_to_cpu_with_one_warning():
    _check_auto_mode_uses_cpu_with_one_warning("libtpu")


@pytest.mark.libtpu
@libtpu_installed
def test_forced_tpu_platform_is_unavailable_with_the_fix_named():
    r = _python("""
        import time, torch, torch_tpu
        t = time.time()
        print("available", torch.tpu.is_available())
        try:
            torch.tpu.init()
        except RuntimeError as e:
            print("error:", e)
        print("seconds", round(time.time() - t))
    """, {"TORCH_TPU_PLATFORM": "tpu"}, timeout=120)
    assert "available False" in r.stdout, r.stdout + r.stderr[-2000:]
    assert "TORCH_TPU_PLATFORM=tpu" in r.stdout and "unset it" in r.stdout
    assert int(r.stdout.split("seconds")[-1]) < 60  # no minutes of metadata queries


@pytest.mark.cuda_plugin
@cuda_plugin_installed
def test_cuda_plugin_loads_and_negotiates():
    probe = _C._probe_plugin(_cuda_plugin_path())
    assert probe["api_version"][0] == 0 and probe["api_version"][1] >= 81
    assert "stablehlo_current_version" in probe["attributes"]
    assert "cuda_version" in probe["attributes"]


@pytest.mark.cuda_plugin
@cuda_plugin_installed
@no_gpu
def test_cuda_plugin_without_a_gpu_auto_mode_uses_cpu_with_one_warning():
    _check_auto_mode_uses_cpu_with_one_warning("cuda")


@pytest.mark.cuda_plugin
@cuda_plugin_installed
@no_gpu
def test_forced_cuda_platform_without_a_gpu_is_unavailable_and_our_options_are_accepted():
    # The plugin checks the names and types of the create options before it
    # looks for a GPU ("Unexpected option name passed to PJRT_Client_Create"),
    # so failing on the missing GPU shows the options torch_tpu sets (memory
    # on demand, memory fraction, allocator, torchrun's visible device) pass.
    r = _init_in_child({"TORCH_TPU_PLATFORM": "cuda", "TORCH_TPU_CUDA_ALLOCATOR": "cuda_async",
          "TORCH_TPU_CUDA_MEMORY_FRACTION": "0.5", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"},
        timeout=120)
    assert "available False" in r.stdout, r.stdout + r.stderr[-2000:]
    assert "No visible GPU devices" in r.stdout and "Unexpected option" not in r.stdout
    assert "TORCH_TPU_PLATFORM=cuda" in r.stdout and "unset it" in r.stdout


def test_cuda_client_options_from_the_environment(monkeypatch):
    for k in ("TORCH_TPU_CUDA_PREALLOCATE", "TORCH_TPU_CUDA_MEMORY_FRACTION",
              "TORCH_TPU_CUDA_ALLOCATOR", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    # Memory on demand by default, as PyTorch users expect; no options for the CPU plugin.
    assert _C._platform_client_options("cuda") == pytest.approx(
        {"preallocate": False, "memory_fraction": 0.9})
    assert _C._platform_client_options("cpu") == {}
    assert _C._platform_client_options("", "/x/jax_plugins/xla_cuda13/xla_cuda_plugin.so")[
        "preallocate"] is False
    monkeypatch.setenv("TORCH_TPU_CUDA_PREALLOCATE", "1")
    monkeypatch.setenv("TORCH_TPU_CUDA_MEMORY_FRACTION", "0.25")
    monkeypatch.setenv("TORCH_TPU_CUDA_ALLOCATOR", "platform")
    monkeypatch.setenv("LOCAL_RANK", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert _C._platform_client_options("cuda") == {
        "preallocate": True, "memory_fraction": 0.25, "allocator": "platform", "visible_devices": [2]}
    for var, value, message in [
        ("TORCH_TPU_CUDA_ALLOCATOR", "slab", "use default, bfc, platform or cuda_async"),
        ("TORCH_TPU_CUDA_MEMORY_FRACTION", "1.5", r"must be a number in \(0, 1\]"),
        ("TORCH_TPU_CUDA_MEMORY_FRACTION", "half", r"must be a number in \(0, 1\]"),
        ("TORCH_TPU_CUDA_PREALLOCATE", "maybe", "is not a boolean"),
    ]:
        with monkeypatch.context() as m:
            m.setenv(var, value)
            with pytest.raises(RuntimeError, match=f"{var}={value} .*{message}"):
                _C._platform_client_options("cuda")


def test_tpu_topology_under_torchrun_is_one_chip_per_process():
    env = _C._tpu_topology_env(1, 4)
    assert env == {
        "TPU_VISIBLE_CHIPS": "1", "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_BOUNDS": "2,2,1", "TPU_PROCESS_PORT": "8477",
        "TPU_PROCESS_ADDRESSES": "localhost:8476,localhost:8477,localhost:8478,localhost:8479",
        "CLOUD_TPU_TASK_ID": "1"}
    assert _C._tpu_topology_env(7, 8)["TPU_PROCESS_BOUNDS"] == "2,4,1"
    assert _C._tpu_topology_env(0, 1) == {}  # not under torchrun: libtpu's defaults
    with pytest.raises(RuntimeError, match="LOCAL_WORLD_SIZE of 2, 4 or 8 .*set TPU_PROCESS_BOUNDS"):
        _C._tpu_topology_env(0, 3)


def test_tpu_topology_is_set_in_the_environment_only_where_the_user_did_not():
    r = _python("""
        import ctypes
        from torch_tpu import _C
        _C._platform_client_options("tpu")
        getenv = ctypes.CDLL(None).getenv  # the C environment libtpu reads
        getenv.restype = ctypes.c_char_p
        print({k: getenv(k.encode()).decode() for k in ("TPU_VISIBLE_CHIPS", "TPU_PROCESS_BOUNDS",
                                                        "TPU_PROCESS_PORT", "CLOUD_TPU_TASK_ID")})
    """, {"LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "4", "TPU_PROCESS_PORT": "9000"},
        timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert eval(r.stdout.strip().splitlines()[-1]) == {  # noqa: S307 - our own repr
        "TPU_VISIBLE_CHIPS": "3", "TPU_PROCESS_BOUNDS": "2,2,1", "TPU_PROCESS_PORT": "9000",
        "CLOUD_TPU_TASK_ID": "3"}
