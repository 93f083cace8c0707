// Plugin discovery (FindPlugin): pure file-system search, no PJRT calls.
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
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

bool TpuPresent() {
  if (!Glob("/dev/accel[0-9]*").empty() || ::access("/dev/accel0", F_OK) == 0) return true;
  glob_t g{};
  bool found = false;
  if (::glob("/dev/vfio/[0-9]*", 0, nullptr, &g) == 0) found = g.gl_pathc > 0;
  ::globfree(&g);
  if (found) return true;
  // Google's PCI vendor id on a processing-accelerator device (class 0x12).
  if (::glob("/sys/bus/pci/devices/*/vendor", 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc && !found; ++i) {
      std::string vendor_path = g.gl_pathv[i];
      std::string class_path = vendor_path.substr(0, vendor_path.size() - 6) + "class";
      char vendor[16] = {0}, cls[16] = {0};
      if (FILE* f = std::fopen(vendor_path.c_str(), "r")) {
        if (!std::fgets(vendor, sizeof vendor, f)) vendor[0] = 0;
        std::fclose(f);
      }
      if (FILE* f = std::fopen(class_path.c_str(), "r")) {
        if (!std::fgets(cls, sizeof cls, f)) cls[0] = 0;
        std::fclose(f);
      }
      found = std::string(vendor).rfind("0x1ae0", 0) == 0 && std::string(cls).rfind("0x12", 0) == 0;
    }
  }
  ::globfree(&g);
  return found;
}

PluginChoice FindPlugin(const std::string& explicit_path, const std::string& platform,
                        const std::vector<std::string>& search_dirs) {
  return FindPlugins(explicit_path, platform, search_dirs).front();
}

std::vector<PluginChoice> FindPlugins(const std::string& explicit_path, const std::string& platform,
                                      const std::vector<std::string>& search_dirs,
                                      std::vector<PluginChoice>* skipped) {
  if (!explicit_path.empty()) {
    if (!IsFile(explicit_path)) {
      throw Error("TORCH_TPU_PLUGIN_PATH=" + explicit_path + " does not name an existing file",
                  kNotFound);
    }
    return {{explicit_path, ""}};
  }
  if (!platform.empty() && platform != "tpu" && platform != "cuda" && platform != "cpu") {
    throw Error("Unknown PJRT platform '" + platform + "' (expected tpu, cuda or cpu)",
                kInvalidArgument);
  }
  // In auto mode a CUDA plugin is only worth choosing when a GPU answers; when
  // the caller asks for "cuda" explicitly, let client creation report why the
  // GPU is unusable instead of claiming no plugin exists.
  const bool cuda_ok = platform == "cuda" || GpuPresent();
  const bool tpu_ok = platform == "tpu" || TpuPresent();
  std::vector<PluginChoice> found;
  for (const Candidate& c : kCandidates) {
    if (!platform.empty() && platform != c.platform) continue;
    const std::string p = c.platform;
    const bool usable = !(p == "cuda" && !cuda_ok) && !(p == "tpu" && !tpu_ok);
    for (const std::string& dir : search_dirs) {
      if (dir.empty()) continue;
      std::vector<std::string> hits = Glob(dir + "/" + c.pattern);
      if (!hits.empty()) {
        if (usable) {
          found.push_back({hits.front(), c.platform});
        } else if (skipped != nullptr) {
          skipped->push_back({hits.front(), c.platform});
        }
        break;  // one plugin per candidate: the first directory's
      }
    }
  }
  if (!found.empty()) return found;
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
