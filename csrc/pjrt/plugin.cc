// Plugin discovery (FindPlugin): pure file-system search, no PJRT calls.
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "pjrt/pjrt.h"

namespace tpu::pjrt {
namespace {

constexpr int kInvalidArgument = 3;
constexpr int kNotFound = 5;

bool IsFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Files matching a glob pattern, highest name first: with several CUDA plugin
// versions installed side by side (xla_cuda12, xla_cuda13) the newest wins.
std::vector<std::string> Glob(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      if (IsFile(g.gl_pathv[i])) out.emplace_back(g.gl_pathv[i]);
    }
  }
  ::globfree(&g);
  std::sort(out.rbegin(), out.rend());
  return out;
}

struct Candidate {
  const char* platform;
  const char* pattern;  // relative to a search dir; may contain wildcards
};

// In order of preference.
constexpr Candidate kCandidates[] = {
    {"tpu", "libtpu/libtpu.so"},
    {"cuda", "jax_plugins/xla_cuda*/xla_cuda_plugin.so"},
    {"cuda", "xla_plugins/xla_cuda*_pjrt/*.so"},
    {"cpu", "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"},
};

// /dev/nvidia0 is a character device, so test existence, not regular-file-ness.
bool GpuPresent() { return ::access("/dev/nvidia0", F_OK) == 0; }

}  // namespace

PluginChoice FindPlugin(const std::string& explicit_path, const std::string& platform,
                        const std::vector<std::string>& search_dirs) {
  if (!explicit_path.empty()) {
    if (!IsFile(explicit_path)) {
      throw Error("TORCH_TPU_PLUGIN_PATH=" + explicit_path + " does not name an existing file",
                  kNotFound);
    }
    return {explicit_path, ""};
  }
  if (!platform.empty() && platform != "tpu" && platform != "cuda" && platform != "cpu") {
    throw Error("Unknown PJRT platform '" + platform + "' (expected tpu, cuda or cpu)",
                kInvalidArgument);
  }
  // In auto mode a CUDA plugin is only worth choosing when a GPU answers; when
  // the caller asks for "cuda" explicitly, let client creation report why the
  // GPU is unusable instead of claiming no plugin exists.
  const bool cuda_ok = platform == "cuda" || GpuPresent();
  for (const Candidate& c : kCandidates) {
    if (!platform.empty() && platform != c.platform) continue;
    if (std::string(c.platform) == "cuda" && !cuda_ok) continue;
    for (const std::string& dir : search_dirs) {
      if (dir.empty()) continue;
      std::vector<std::string> hits = Glob(dir + "/" + c.pattern);
      if (!hits.empty()) return {hits.front(), c.platform};
    }
  }
  std::string searched;
  for (const std::string& dir : search_dirs) searched += (searched.empty() ? "" : ", ") + dir;
  if (searched.empty()) searched = "no directories";
  std::string what = platform.empty() ? std::string("No PJRT plugin found")
                                      : "No PJRT plugin for platform '" + platform + "' found";
  throw Error(what +
                  ". Install the XLA CPU plugin with `pip install xla-cpu-pjrt==0.0.1`, or set "
                  "TORCH_TPU_PLUGIN_PATH to a PJRT plugin .so (searched: " +
                  searched + ")",
              kNotFound);
}

}  // namespace tpu::pjrt
