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

std::string DiskCache::PathFor(const std::string& identity, const std::string& key) const {
  const std::string both = identity + '\0' + key;
  char name[40];
  std::snprintf(name, sizeof(name), "%016llx%016llx",
                static_cast<unsigned long long>(Fnv1a(both, 14695981039346656037ULL)),
                static_cast<unsigned long long>(Fnv1a(both, 0x9e3779b97f4a7c15ULL)));
  return dir_ + "/" + name + ".xlaexe";
}

std::optional<std::string> DiskCache::Load(const std::string& identity,
                                           const std::string& key) const {
  if (dir_.empty()) return std::nullopt;
  const std::string path = PathFor(identity, key);
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;  // a plain miss
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t pos = sizeof(kMagic);
  std::string got_identity, got_key, exe;
  const bool ok = data.size() >= sizeof(kMagic) &&
                  std::memcmp(data.data(), kMagic, sizeof(kMagic)) == 0 &&
                  GetBlob(data, &pos, &got_identity) && GetBlob(data, &pos, &got_key) &&
                  GetBlob(data, &pos, &exe) && pos == data.size();
  if (!ok) {
    Warn("ignoring a corrupt or truncated compilation cache entry " + path +
         "; it will be rewritten");
    return std::nullopt;
  }
  if (got_identity != identity || got_key != key) {
    Warn("ignoring compilation cache entry " + path +
         " written by another plugin build or for another program; it will be rewritten");
    return std::nullopt;
  }
  return exe;
}

void DiskCache::Store(const std::string& identity, const std::string& key,
                      const std::string& executable) const {
  if (dir_.empty()) return;
  MakeDirs(dir_);
  std::string data(kMagic, sizeof(kMagic));
  PutU64(data, identity.size());
  data += identity;
  PutU64(data, key.size());
  data += key;
  PutU64(data, executable.size());
  data += executable;
  const std::string path = PathFor(identity, key);
  std::random_device rd;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) {
      Warn("cannot write the compilation cache in " + dir_ + ": " + std::strerror(errno));
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

}  // namespace tpu::lazy
