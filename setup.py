"""Builds the C++ core (csrc/) with CMake into torch_tpu/_C.so.

Install without build isolation, against the torch already installed:
    pip install --no-build-isolation -e .
"""

import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.environ.get("TORCH_TPU_BUILD_DIR", os.path.join(ROOT, "build", "cmake"))
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build_dir, *gen,
                               f"-DPYTHON_EXECUTABLE={sys.executable}",
                               "-DCMAKE_BUILD_TYPE=Release", "-DTORCH_TPU_BUILD_EXTENSION=ON",
                               f"-DTORCH_TPU_BUILD_TESTS={os.environ.get('TORCH_TPU_BUILD_TESTS', 'OFF')}"])
        jobs = os.environ.get("MAX_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "_C", "-j", jobs])
        # CMake writes the module into torch_tpu/; copy it where setuptools
        # wants it when that is elsewhere (a regular, non-editable build).
        built = os.path.join(ROOT, "torch_tpu", "_C" + sysconfig.get_config_var("EXT_SUFFIX"))
        dst = self.get_ext_fullpath(ext.name)
        if os.path.abspath(dst) != built:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(built, dst)


setup(ext_modules=[Extension("torch_tpu._C", sources=[])], cmdclass={"build_ext": CMakeBuild})
