#!/usr/bin/env bash
# Sets up everything on a fresh machine, then runs the demo or the tests.
#   ./run.sh demo    train a small model on the tpu device
#   ./run.sh test    C++ unit tests (CTest), then the Python tests (pytest) in
#                    Strict and Fused Eager, and the tests of errors and
#                    synchronization in Debug Eager
#   ./run.sh build   set up and build only
#   ./run.sh sanitize [python args]
#                    build the extension with AddressSanitizer and UBSan
#                    (build/sanitize) and run python with it (default: the
#                    Python tests in Strict Eager)
# Extra arguments after `test` go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)
VENV=${TORCH_TPU_VENV:-$ROOT/.venv}
BUILD=$ROOT/build/cmake


# Installs into the venv with uv (pinned; it links from its cache: seconds
# where pip unpacks 2 GB in minutes), or with pip where uv cannot be had or
# fails (TORCH_TPU_USE_PIP=1: pip only).
# uv reads no pip configuration: pip's find-links (the local CPU torch wheel)
# is passed on.
UV_VERSION=0.13.9
venv_install() {
  if [ -z "${UV:-}" ]; then
    UV=none
    if [ "${TORCH_TPU_USE_PIP:-0}" != 1 ] && "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
         "uv==$UV_VERSION" >/dev/null 2>&1; then
      UV=$VENV/bin/uv
    fi
  fi
  if [ "$UV" = none ]; then
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@"
    return
  fi
  local links=${PIP_FIND_LINKS:-$("$VENV/bin/python" -m pip config get global.find-links 2>/dev/null || true)}
  local args=()
  for link in $links; do args+=(--find-links "$link"); done
  "$UV" pip install -q --python "$VENV/bin/python" ${args[@]+"${args[@]}"} "$@" \
    || "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@"
}

setup() {
  # Build tools from Debian where missing (GoogleTest for the C++ tests, ccache).
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    if [ ! -e /usr/lib/x86_64-linux-gnu/libgtest.a ] && [ ! -e /usr/lib/aarch64-linux-gnu/libgtest.a ] \
       || ! command -v ccache >/dev/null; then
      export DEBIAN_FRONTEND=noninteractive
      apt-get install -y -q libgtest-dev ccache >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null && apt-get install -y -q libgtest-dev ccache >/dev/null; }
    fi
  fi
  if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV"; fi
  venv_install -r requirements.txt
  # TorchTitan's declared dependencies conflict with the pins above (see the file).
  venv_install --no-deps -r requirements-nodeps.txt
  # The extension builds against the installed torch (no build isolation).
  TORCH_TPU_BUILD_TESTS=ON "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    --no-build-isolation --no-deps -e .
}

case "${1:-}" in
  build)
    setup
    ;;
  demo)
    setup
    shift
    exec "$VENV/bin/python" -m torch_tpu.demo "$@"
    ;;
  test)
    setup
    shift
    cmake --build "$BUILD" -j "$(nproc)"
    (cd "$BUILD" && ctest --output-on-failure)
    # One pytest process per eager mode, each with an empty persistent
    # compilation cache of its own (tests/lazy/test_disk_cache.py tests the
    # cache in child processes with directories of their own). PyTorch's
    # AOTAutograd cache starts empty and is shared by the modes: the graphs
    # it holds do not depend on the eager mode, so the later passes load the
    # graphs of torch.compile's tests (tests/compile/test_warm_start.py
    # tests hits and misses).
    CACHE_ROOT=$(mktemp -d)
    trap 'rm -rf "$CACHE_ROOT"' EXIT
    # Debug Eager runs Strict's programs and waits after each: its values are
    # Strict's by construction, so its pass runs the tests of what it
    # changes (where errors surface, synchronization, the runtime's
    # bookkeeping). Arguments after `test` pick the tests in every mode.
    debug_tests=(tests/device tests/aten/indexing tests/aten/test_fallback.py tests/aten/optim
                 tests/lazy/test_cache.py tests/lazy/test_views.py tests/profiler
                 tests/models/test_regressions.py)
    status=0
    for mode in strict fused debug; do
      paths=(tests)
      case $mode in
        strict) echo "== pytest, Strict Eager"; mode_env=() ;;
        fused) echo "== pytest, Fused Eager"; mode_env=(TORCH_TPU_DEFER_AND_FUSE=1) ;;
        debug) echo "== pytest, Debug Eager (errors and synchronization)"
               mode_env=(TORCH_TPU_LAUNCH_BLOCKING=1); paths=("${debug_tests[@]}") ;;
      esac
      if [ $# -gt 0 ]; then paths=(); fi
      rc=0
      env "${mode_env[@]}" TORCH_TPU_COMPILATION_CACHE_DIR="$CACHE_ROOT/$mode" \
        TORCHINDUCTOR_CACHE_DIR="$CACHE_ROOT/torch" \
        "$VENV/bin/python" -m pytest -q ${paths[@]+"${paths[@]}"} "$@" || rc=$?
      if [ "$rc" != 0 ]; then
        echo "FAILED: pytest ($mode, exit $rc)"
        status=1
      fi
    done
    exit $status
    ;;
  sanitize)
    setup
    shift
    SAN=$ROOT/build/sanitize
    cmake -S "$ROOT" -B "$SAN" -G Ninja -DPYTHON_EXECUTABLE="$VENV/bin/python" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTORCH_TPU_BUILD_TESTS=OFF \
      -DTORCH_TPU_SANITIZE=address,undefined -DTORCH_TPU_EXTENSION_DIR="$SAN/lib" >/dev/null
    cmake --build "$SAN" --target _C -j "$(nproc)"
    # The interpreter is not instrumented: the runtimes are preloaded. Python
    # keeps objects alive until exit by design, so leak checking is off.
    export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:alloc_dealloc_mismatch=0:detect_odr_violation=0:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
    TORCH_TPU_EXTENSION=$(ls "$SAN"/lib/_C*.so)
    export TORCH_TPU_EXTENSION
    if [ $# = 0 ]; then set -- -m pytest -q tests; fi
    exec "$VENV/bin/python" "$@"
    ;;
  *)
    echo "usage: $0 demo|test|build|sanitize" >&2
    exit 2
    ;;
esac
