// The persistent compile cache: serialized executables on disk, keyed by
// the program's structural key and the plugin's identity. Entries are
// written atomically (temp file + rename); an entry that is corrupt,
// truncated or from another plugin is ignored with a warning and rewritten.
#pragma once

#include <optional>
#include <string>

namespace tpu::lazy {

class DiskCache {
 public:
  // `dir` empty disables the cache.
  void Configure(std::string dir);
  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }
  // The serialized executable for (identity, key), if a valid entry exists.
  std::optional<std::string> Load(const std::string& identity, const std::string& key) const;
  void Store(const std::string& identity, const std::string& key,
             const std::string& executable) const;

 private:
  std::string PathFor(const std::string& identity, const std::string& key) const;
  std::string dir_;
};

}  // namespace tpu::lazy
