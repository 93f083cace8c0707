"""Build times of the extension: a fresh build with no compiler cache, then
an incremental one after one op file is touched.

    .venv/bin/python benchmarks/build_time.py [--jobs N] [--touch FILE]

The build goes to a temporary folder (the package's own _C is left alone),
with the flags of the user build (setup.py: Release) and ccache disabled,
so that every object is compiled. Prints one line per build.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(cmd, env, log):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    if r.returncode:
        sys.exit(f"failed: {' '.join(cmd)} (see {log.name})")
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    p.add_argument("--touch", default="csrc/aten/pointwise/activations.cc",
                   help="the op file touched for the incremental build")
    args = p.parse_args()
    env = dict(os.environ, CCACHE_DISABLE="1")
    build = tempfile.mkdtemp(prefix="torch_tpu_build_")
    log = open(os.path.join(build, "build.log"), "w")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    _run(["cmake", "-S", ROOT, "-B", build, *gen, f"-DPYTHON_EXECUTABLE={sys.executable}",
          "-DCMAKE_BUILD_TYPE=Release", "-DTORCH_TPU_BUILD_TESTS=OFF",
          f"-DTORCH_TPU_EXTENSION_DIR={build}/out"], env, log)
    target = ["cmake", "--build", build, "--target", "_C", "-j", str(args.jobs)]
    fresh = _run(target, env, log)
    n = sum(1 for d, _, fs in os.walk(os.path.join(build, "CMakeFiles", "_C.dir"))
            for f in fs if f.endswith(".o"))
    print(f"fresh build of _C, no ccache, -j{args.jobs}: {fresh:.1f} s ({n} objects)")
    os.utime(os.path.join(ROOT, args.touch))
    incr = _run(target, env, log)
    print(f"incremental build after touching {args.touch}: {incr:.1f} s")
    shutil.rmtree(build, ignore_errors=True)


if __name__ == "__main__":
    main()
