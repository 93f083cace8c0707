"""PJRT plugins other than the CPU one: version negotiation, libtpu on a
machine without a TPU (the tests marked `libtpu` run when the `libtpu` wheel
is installed: pip install libtpu), a plugin of another API major version."""

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
    r = _python("""
        import torch, torch_tpu
        print("available", torch.tpu.is_available())
        try:
            torch.tpu.init()
        except RuntimeError as e:
            print("error:", e)
    """, {"TORCH_TPU_PLUGIN_PATH": other_major_plugin})
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


libtpu_installed = pytest.mark.skipif(
    not glob.glob(os.path.join(os.path.dirname(os.path.dirname(torch_tpu.__file__)), "libtpu", "libtpu.so"))
    and not any(glob.glob(os.path.join(p, "libtpu", "libtpu.so")) for p in sys.path if p),
    reason="libtpu is not installed (pip install libtpu)")


def _libtpu_path():
    for p in sys.path:
        hits = glob.glob(os.path.join(p, "libtpu", "libtpu.so")) if p else []
        if hits:
            return hits[0]
    return None


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


@pytest.mark.libtpu
@libtpu_installed
def test_auto_mode_falls_back_to_cpu_with_one_warning():
    r = _python("""
        import warnings, torch, torch_tpu
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            x = (torch.ones(3, device="tpu") + 1).cpu()
            y = (torch.ones(3, device="tpu") * 2).cpu()
        print("values", x.tolist(), y.tolist())
        print("platform", torch_tpu._C._platform())
        print("warnings", sum("libtpu" in str(m.message) for m in w))
    """, {}, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "values [2.0, 2.0, 2.0] [2.0, 2.0, 2.0]" in r.stdout
    assert "platform cpu" in r.stdout and "warnings 1" in r.stdout


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
