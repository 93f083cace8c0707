// The client create options torch_tpu sets on purpose for each platform's
// plugin, read from the environment (no PJRT calls here).
#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "pjrt/pjrt.h"

namespace tpu::pjrt {
namespace {

constexpr int kInvalidArgument = 3;

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// torchrun's LOCAL_RANK / LOCAL_WORLD_SIZE, when more than one process runs
// on this host; {-1, 0} otherwise.
std::pair<int, int> LocalProcess() {
  const char* rank = Env("LOCAL_RANK");
  const char* size = Env("LOCAL_WORLD_SIZE");
  if (rank == nullptr || size == nullptr) return {-1, 0};
  const int r = std::atoi(rank), n = std::atoi(size);
  if (n <= 1 || r < 0 || r >= n) return {-1, 0};
  return {r, n};
}

bool ParseBool(const char* name, const char* v) {
  const std::string s(v);
  if (s == "1" || s == "true" || s == "True" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "False" || s == "no") return false;
  throw Error(std::string(name) + "=" + s + " is not a boolean (use 1 or 0)", kInvalidArgument);
}

NamedOption Bool(const char* name, bool b) {
  NamedOption o;
  o.kind = NamedOption::kBool;
  o.name = name;
  o.b = b;
  return o;
}

void CudaOptions(ClientOptions* opts) {
  // PyTorch users expect memory on demand, not 75% of the GPU taken at start.
  const char* pre = Env("TORCH_TPU_CUDA_PREALLOCATE");
  opts->platform_options.push_back(
      Bool("preallocate", pre != nullptr && ParseBool("TORCH_TPU_CUDA_PREALLOCATE", pre)));
  // The most the plugin's allocator may take (with preallocation off it
  // grows up to this); the rest stays for cuBLAS/cuDNN workspaces and other
  // processes.
  float fraction = 0.9f;
  if (const char* f = Env("TORCH_TPU_CUDA_MEMORY_FRACTION")) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(f, &end);
    if (errno != 0 || end == f || *end != '\0' || !(v > 0.0 && v <= 1.0)) {
      throw Error(std::string("TORCH_TPU_CUDA_MEMORY_FRACTION=") + f +
                      " must be a number in (0, 1], the share of GPU memory torch_tpu may use",
                  kInvalidArgument);
    }
    fraction = static_cast<float>(v);
  }
  NamedOption mf;
  mf.kind = NamedOption::kFloat;
  mf.name = "memory_fraction";
  mf.f = fraction;
  opts->platform_options.push_back(mf);
  if (const char* a = Env("TORCH_TPU_CUDA_ALLOCATOR")) {
    const std::string s(a);
    if (s != "default" && s != "bfc" && s != "platform" && s != "cuda_async") {
      throw Error("TORCH_TPU_CUDA_ALLOCATOR=" + s +
                      " is not an allocator of the CUDA plugin (use default, bfc, platform or "
                      "cuda_async)",
                  kInvalidArgument);
    }
    NamedOption o;
    o.kind = NamedOption::kString;
    o.name = "allocator";
    o.s = s;
    opts->platform_options.push_back(o);
  }
  // Under torchrun each process owns GPU LOCAL_RANK: a client over every GPU
  // would make a CUDA context (and an allocator) on each, in every process.
  const auto [rank, size] = LocalProcess();
  if (size > 1) opts->visible_devices = {rank};
}

}  // namespace

std::vector<std::pair<std::string, std::string>> TpuTopologyEnv(int local_rank, int local_world_size) {
  if (local_world_size <= 1 || local_rank < 0 || local_rank >= local_world_size) return {};
  // The chips of one host, one per process, in libtpu's x,y,z order: the
  // host shapes of v4/v5p (2x2x1) and v5e/v6e (2x2, 2x4).
  std::string bounds;
  switch (local_world_size) {
    case 2: bounds = "1,2,1"; break;
    case 4: bounds = "2,2,1"; break;
    case 8: bounds = "2,4,1"; break;
    default:
      throw Error("torch_tpu: one TPU chip per process needs LOCAL_WORLD_SIZE of 2, 4 or 8 (got " +
                      std::to_string(local_world_size) +
                      "); set TPU_PROCESS_BOUNDS for this host's chip layout",
                  kInvalidArgument);
  }
  constexpr int kBasePort = 8476;
  std::string addresses;
  for (int i = 0; i < local_world_size; ++i) {
    addresses += (i ? "," : "") + std::string("localhost:") + std::to_string(kBasePort + i);
  }
  return {{"TPU_VISIBLE_CHIPS", std::to_string(local_rank)},
          {"TPU_CHIPS_PER_PROCESS_BOUNDS", "1,1,1"},
          {"TPU_PROCESS_BOUNDS", bounds},
          {"TPU_PROCESS_PORT", std::to_string(kBasePort + local_rank)},
          {"TPU_PROCESS_ADDRESSES", addresses},
          {"CLOUD_TPU_TASK_ID", std::to_string(local_rank)}};
}

ClientOptions PlatformClientOptions(const PluginChoice& choice) {
  ClientOptions opts;
  const std::string base = choice.path.substr(choice.path.find_last_of('/') + 1);
  const bool cuda = choice.platform == "cuda" ||
                    (choice.platform.empty() && base.find("cuda") != std::string::npos);
  const bool tpu = choice.platform == "tpu" ||
                   (choice.platform.empty() && base.find("libtpu") != std::string::npos);
  if (cuda) CudaOptions(&opts);
  if (tpu) {
    // libtpu takes its topology from the environment. One host only: a job
    // over several hosts (WORLD_SIZE > LOCAL_WORLD_SIZE) gets its layout
    // from the TPU VM's metadata, or from the variables set by the user.
    const auto [rank, size] = LocalProcess();
    const char* world = Env("WORLD_SIZE");
    const bool one_host = world == nullptr || std::atoi(world) == size;
    if (size > 1 && one_host && Env("TPU_PROCESS_BOUNDS") == nullptr) {
      for (const auto& [k, v] : TpuTopologyEnv(rank, size)) ::setenv(k.c_str(), v.c_str(), 0);
    }
  }
  return opts;
}

}  // namespace tpu::pjrt
