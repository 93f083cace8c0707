#include "lazy/disk_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "lazy/modes.h"

namespace tpu::lazy {

namespace {

constexpr char kMagic[8] = {'T', 'P', 'U', 'X', 'C', '0', '1', '\n'};

uint64_t Fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

void MakeDirs(const std::string& path) {
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    ::mkdir(cur.c_str(), 0755);
  }
}

void PutU64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }

bool GetU64(const std::string& in, size_t* pos, uint64_t* v) {
  if (*pos + 8 > in.size()) return false;
  std::memcpy(v, in.data() + *pos, 8);
  *pos += 8;
  return true;
}

bool GetBlob(const std::string& in, size_t* pos, std::string* out) {
  uint64_t n;
  if (!GetU64(in, pos, &n) || *pos + n > in.size()) return false;
  out->assign(in, *pos, n);
  *pos += n;
  return true;
}

}  // namespace

void DiskCache::Configure(std::string dir) { dir_ = std::move(dir); }

std::string HashName(const std::string& s) {
  char name[40];
  std::snprintf(name, sizeof(name), "%016llx%016llx",
                static_cast<unsigned long long>(Fnv1a(s, 14695981039346656037ULL)),
                static_cast<unsigned long long>(Fnv1a(s, 0x9e3779b97f4a7c15ULL)));
  return name;
}

std::string DiskCache::EntryName(const std::string& identity, const std::string& key) {
  return HashName(identity + '\0' + key) + ".xlaexe";
}

namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

bool Parse(const std::string& data, DiskCache::Stored* out) {
  size_t pos = sizeof(kMagic);
  return data.size() >= sizeof(kMagic) && std::memcmp(data.data(), kMagic, sizeof(kMagic)) == 0 &&
         GetBlob(data, &pos, &out->identity) && GetBlob(data, &pos, &out->key) &&
         GetBlob(data, &pos, &out->executable) && pos == data.size();
}

// Writes `data` to `path` through a temporary file and a rename, so that a
// reader sees the old file or the new one, never a part.
void WriteAtomically(const std::string& dir, const std::string& path, const std::string& data) {
  MakeDirs(dir);
  std::random_device rd;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) {
      Warn("cannot write the compilation cache in " + dir + ": " + std::strerror(errno));
      return;
    }
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!f) {
      ::unlink(tmp.c_str());
      return;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) ::unlink(tmp.c_str());
}

}  // namespace

std::optional<std::string> DiskCache::Load(const std::string& identity,
                                           const std::string& key) const {
  if (dir_.empty()) return std::nullopt;
  const std::string path = dir_ + "/" + EntryName(identity, key);
  std::optional<std::string> data = ReadFile(path);
  if (!data) return std::nullopt;  // a plain miss
  Stored got;
  if (!Parse(*data, &got)) {
    Warn("ignoring a corrupt or truncated compilation cache entry " + path +
         "; it will be rewritten");
    return std::nullopt;
  }
  if (got.identity != identity || got.key != key) {
    Warn("ignoring compilation cache entry " + path +
         " written by another plugin build or for another program; it will be rewritten");
    return std::nullopt;
  }
  return std::move(got.executable);
}

std::optional<DiskCache::Stored> DiskCache::Read(const std::string& name) const {
  if (dir_.empty()) return std::nullopt;
  std::optional<std::string> data = ReadFile(dir_ + "/" + name);
  Stored got;
  if (!data || !Parse(*data, &got)) return std::nullopt;
  return got;
}

std::string DiskCache::SetAside(const std::string& name) const {
  if (dir_.empty()) return "";
  const std::string from = dir_ + "/" + name, to = from + ".unloadable";
  if (::rename(from.c_str(), to.c_str()) != 0) return "";
  return to;
}

void DiskCache::Store(const std::string& identity, const std::string& key,
                      const std::string& executable) const {
  if (dir_.empty()) return;
  std::string data(kMagic, sizeof(kMagic));
  PutU64(data, identity.size());
  data += identity;
  PutU64(data, key.size());
  data += key;
  PutU64(data, executable.size());
  data += executable;
  WriteAtomically(dir_, dir_ + "/" + EntryName(identity, key), data);
}

std::vector<std::string> DiskCache::ReadManifest(const std::string& manifest) const {
  std::vector<std::string> names;
  if (dir_.empty()) return names;
  std::ifstream f(dir_ + "/" + manifest + ".startup");
  std::string line;
  while (std::getline(f, line)) {
    // Only entry names: a damaged manifest cannot point outside the directory.
    if (line.size() == 32 + 7 && line.compare(32, 7, ".xlaexe") == 0 &&
        line.find_first_not_of("0123456789abcdef") == 32)
      names.push_back(line);
  }
  return names;
}

void DiskCache::WriteManifest(const std::string& manifest,
                              const std::vector<std::string>& names) const {
  if (dir_.empty() || names.empty()) return;
  std::string data;
  for (const std::string& n : names) data += n + "\n";
  WriteAtomically(dir_, dir_ + "/" + manifest + ".startup", data);
}

}  // namespace tpu::lazy
