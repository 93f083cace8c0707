// The persistent compile cache: serialized executables on disk, keyed by
// the program's structural key and the plugin's identity. Entries are
// written atomically (temp file + rename); an entry that is corrupt,
// truncated or from another plugin is ignored with a warning and rewritten.
#pragma once

#include <optional>
#include <string>
#include <vector>

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

  // The file name of (identity, key)'s entry in the directory.
  static std::string EntryName(const std::string& identity, const std::string& key);
  struct Stored {
    std::string identity, key, executable;
  };
  // Reads the entry file `name` quietly: nullopt if it is missing or not a
  // valid entry (the load that needs it warns).
  std::optional<Stored> Read(const std::string& name) const;
  // Moves the entry file `name` aside (to `name`.unloadable, replacing an
  // older one): the plugin refused its executable, so no process loads it
  // again, and its bytes stay for a bug report. Returns the new path.
  std::string SetAside(const std::string& name) const;

  // The start-up manifest of one program: the entries it asked for first,
  // in order, so that its next start can load them ahead of use.
  // `manifest` names it (a hash of the identity and the program).
  std::vector<std::string> ReadManifest(const std::string& manifest) const;
  void WriteManifest(const std::string& manifest, const std::vector<std::string>& names) const;

 private:
  std::string dir_;
};

// A 32-hex-digit name for a string (two 64-bit FNV-1a hashes).
std::string HashName(const std::string& s);

}  // namespace tpu::lazy
