"""Every environment variable torch_tpu reads, in one sorted registry.

Each is read once, at import. ``stable`` variables keep their meaning across
releases; ``experimental`` ones may change.
"""

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class _Var:
    name: str
    default: str
    stability: str
    doc: str


VARIABLES = (
    _Var("TORCH_TPU_ALLOW_EXCESS_PRECISION", "0", "stable",
         "1: the default of torch.backends.tpu.allow_excess_precision: XLA may keep a "
         "bfloat16/float16 intermediate of a fused or compiled program at higher precision "
         "instead of rounding it after each op as PyTorch does (read by the C++ runtime)."),
    _Var("TORCH_TPU_CACHE_PREFETCH", "1", "stable",
         "At start-up, a background thread loads from the persistent compilation cache the "
         "executables the same script asked for first in its last run, ahead of use; '0' "
         "turns this off (executables are then loaded when first needed)."),
    _Var("TORCH_TPU_COMPILATION_CACHE_DIR", "", "stable",
         "Directory of the persistent compilation cache (default: "
         "$XDG_CACHE_HOME/torch_tpu or ~/.cache/torch_tpu); 'off' disables it."),
    _Var("TORCH_TPU_CPU_FALLBACK", "0", "stable",
         "1: ops without a tpu lowering run on the CPU (warning once per op) instead of "
         "raising NotImplementedError."),
    _Var("TORCH_TPU_CUDA_ALLOCATOR", "", "stable",
         "CUDA plugin: its allocator, 'default', 'bfc', 'platform' or 'cuda_async' (read by "
         "the C++ runtime)."),
    _Var("TORCH_TPU_CUDA_MEMORY_FRACTION", "0.9", "stable",
         "CUDA plugin: the most GPU memory its allocator grows to, as a share (read by the "
         "C++ runtime)."),
    _Var("TORCH_TPU_CUDA_PREALLOCATE", "0", "stable",
         "CUDA plugin: 1 lets it take its memory at start (off: memory on demand, as PyTorch "
         "does; read by the C++ runtime)."),
    _Var("TORCH_TPU_DONATE", "1", "stable",
         "An op that updates a tensor in place (optimizer steps, add_, x[i] = v) reuses the "
         "memory of the tensor's old value when nothing else holds it (buffer donation); '0' "
         "turns this off (read by the C++ runtime)."),
    _Var("TORCH_TPU_DEFER_AND_FUSE", "0", "stable",
         "1: start in Fused Eager mode (EagerMode.DEFER_AND_FUSE)."),
    _Var("TORCH_TPU_DIST_CHECK", "1", "stable",
         "tpu_dist: before each collective the ranks compare what they are about to run "
         "through the store and raise on every rank if it differs; '0' turns the check off "
         "(it costs one store round trip per collective)."),
    _Var("TORCH_TPU_DIST_ENGINE", "", "experimental",
         "tpu_dist collectives: 'host' (through the host with Gloo) or 'xla' (StableHLO "
         "collectives); default: what the plugin supports ('host' on the CPU plugin)."),
    _Var("TORCH_TPU_EXECUTABLE_CACHE_SIZE", "2048", "stable",
         "Compiled executables kept in memory (read by the C++ runtime); past it the least "
         "recently used are dropped and loaded again from the persistent cache or recompiled "
         "when asked for."),
    _Var("TORCH_TPU_EXTENSION", "", "experimental",
         "Path of the torch_tpu._C extension module to load instead of the package's (the "
         "sanitizer build of ./run.sh sanitize sets it)."),
    _Var("TORCH_TPU_INDEX_CHECKS", "1", "stable",
         "Ops that take indices (indexing, gather/scatter, embedding, nll_loss, ...) check "
         "them on the device and raise the error CPU raises at the next read of a tpu value "
         "(Debug Eager: at the op); '0' skips the device checks (out-of-range indices are "
         "then clamped or dropped by XLA)."),
    _Var("TORCH_TPU_LAUNCH_BLOCKING", "0", "stable",
         "1: start in Debug Eager mode (EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING)."),
    _Var("TORCH_TPU_LOGS", "", "stable",
         "Logs through Python logging under the 'torch_tpu' logger, in the style of "
         "TORCH_LOGS: a comma-separated list of 'compiles' (every compile and persistent-cache "
         "load, with its time), 'recompiles' (a program compiled again, with the cause and the "
         "user's line), 'slow_compiles' (compiles past TORCH_TPU_SLOW_COMPILE_SECONDS, with "
         "progress on stderr while they run), or 'all'; a '+' prefix logs at DEBUG level."),
    _Var("TORCH_TPU_MAX_PENDING_OPS", "2048", "experimental",
         "Fused Eager: ops recorded before a flush is forced."),
    _Var("TORCH_TPU_OP_LINES", "1", "stable",
         "Fused Eager records, for each op, the user's line that issued it, so that a batch "
         "that fails later names it; '0' skips this (about a microsecond per op)."),
    _Var("TORCH_TPU_PLATFORM", "", "stable",
         "Restrict plugin discovery to 'tpu', 'cuda' or 'cpu' (default: the best found)."),
    _Var("TORCH_TPU_PLUGIN_PATH", "", "stable",
         "Path of a PJRT plugin .so to use instead of discovery."),
    _Var("TORCH_TPU_QUICK_COMPILE_ELEMENTS", "1024", "experimental",
         "CPU plugin: programs whose tensors hold at most this many elements are compiled "
         "without LLVM's optimizations and with XLA's elemental emitters (read by the C++ "
         "runtime); '0' compiles every program fully."),
    _Var("TORCH_TPU_SLOW_COMPILE_SECONDS", "10", "stable",
         "With TORCH_TPU_LOGS on: a compile that takes longer is logged as slow, and while it "
         "runs a line on stderr says so every this many seconds."),
)


class _Env:
    def __init__(self):
        for v in VARIABLES:
            setattr(self, v.name[len("TORCH_TPU_"):].lower(), os.environ.get(v.name, v.default))


env = _Env()
