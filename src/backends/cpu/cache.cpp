#include "backends/cpu/cache.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>

#include "backends/cpu/abi.h"
#include "ingot/error.h"
#include "runtime/atomic_file.h"

namespace ingot::cpu {
namespace {

std::string unique_suffix() {
  static std::atomic<unsigned> counter{0};
  return std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
         std::to_string(reinterpret_cast<uintptr_t>(&counter) ^ static_cast<uintptr_t>(::time(nullptr)));
}

bool file_exists(const std::string& p) { return ::access(p.c_str(), R_OK) == 0; }

void write_plain(const std::string& path, const std::string& contents) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  INGOT_CHECK(fd >= 0, "CpuBackend: cannot write '", path, "': ", std::strerror(errno));
  size_t off = 0;
  while (off < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + off, contents.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      INGOT_FAIL("CpuBackend: cannot write '", path, "': ", std::strerror(err));
    }
    off += static_cast<size_t>(n);
  }
  ::close(fd);
}

std::string manifest_text(const std::string& key, const std::string& so_bytes, const Toolchain& tc) {
  std::ostringstream os;
  os << "ingot-cpu-cache " << kAbiVersion << "\nkey " << key << "\nsize " << so_bytes.size()
     << "\nfnv1a128 " << fnv1a128_hex(so_bytes) << "\ncompiler " << tc.compiler << "\n";
  return os.str();
}


// dlopens a private copy of verified bytes (written to `dir`, unlinked once loaded).
std::shared_ptr<LoadedLibrary> load_bytes(const std::string& bytes, const std::string& dir,
                                          const std::string& key, std::string* error) {
  const std::string path = dir + "/.load-" + key.substr(0, 8) + "-" + unique_suffix() + ".so";
  write_plain(path, bytes);
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  std::string err = h ? "" : (::dlerror() ? ::dlerror() : "dlopen failed");
  ::unlink(path.c_str());
  if (!h) {
    *error = err;
    return nullptr;
  }
  auto abi = reinterpret_cast<int (*)()>(::dlsym(h, "ingot_abi_version"));
  void* entry = ::dlsym(h, "ingot_entry");
  if (abi == nullptr || entry == nullptr || abi() != kAbiVersion) {
    *error = "the library lacks ingot_entry/ingot_abi_version " + std::to_string(kAbiVersion);
    return nullptr;  // RTLD_NODELETE: stays mapped, harmless
  }
  auto lib = std::make_shared<LoadedLibrary>();
  lib->handle = h;
  lib->entry = entry;
  lib->key = key;
  return lib;
}

// Holds an exclusive flock on `path` for its lifetime, so that processes sharing a cache directory
// build and publish one key at a time: the second finds the first's entry instead of racing it
// (two builds give different bytes, and interleaved library/manifest renames would leave a
// mismatched pair that every later process rebuilds). Where locking is unsupported (some network
// file systems) it holds nothing; the manifest check still keeps a mismatched pair from loading.
class ProcessLock {
 public:
  explicit ProcessLock(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return;
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      ::close(fd_);
      fd_ = -1;
      return;
    }
  }
  ~ProcessLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  ProcessLock(const ProcessLock&) = delete;
  ProcessLock& operator=(const ProcessLock&) = delete;

 private:
  int fd_ = -1;
};

std::mutex& key_mutex(const std::string& key) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<std::mutex>> locks;
  std::lock_guard<std::mutex> g(mu);
  auto& m = locks[key];
  if (!m) m = std::make_unique<std::mutex>();
  return *m;
}

std::mutex g_memory_mu;
std::map<std::string, std::shared_ptr<const LoadedLibrary>>& memory_cache() {
  static std::map<std::string, std::shared_ptr<const LoadedLibrary>> m;
  return m;
}

// Builds into `dir` under unique names; returns the library bytes.
std::string build_bytes(const BuildRequest& req, const std::string& dir, const std::string& key) {
  const std::string stem = dir + "/." + key + "-" + unique_suffix();
  const std::string src = stem + ".cpp", lib = stem + ".so";
  write_plain(src, req.source);
  std::string bytes;
  try {
    build_shared_library(req.toolchain, req.flags, src, lib);
    bytes = read_file(lib);
  } catch (...) {
    ::unlink(src.c_str());
    ::unlink(lib.c_str());
    throw;
  }
  ::unlink(src.c_str());
  ::unlink(lib.c_str());
  return bytes;
}

}  // namespace

std::string fnv1a128_hex(std::string_view data) {
  using u128 = unsigned __int128;
  const u128 prime = (static_cast<u128>(1) << 88) + 0x13B;
  u128 h = (static_cast<u128>(0x6c62272e07bb0142ull) << 64) | 0x62b821756295c58dull;
  for (unsigned char c : data) {
    h ^= c;
    h *= prime;
  }
  static const char* const kHex = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 31; i >= 0; --i) {
    out[static_cast<size_t>(i)] = kHex[static_cast<unsigned>(h & 0xf)];
    h >>= 4;
  }
  return out;
}

std::string cache_key(const BuildRequest& req) {
  std::string material = "ingot-cpu " + std::to_string(kAbiVersion) + "\n";
  auto add = [&](const std::string& s) {
    material += std::to_string(s.size()) + ":" + s + "\n";  // length-prefixed: unambiguous
  };
  add(req.toolchain.compiler);
  add(req.toolchain.version);
  add(req.toolchain.openblas);
  for (const std::string& f : req.flags) add(f);
  add(host_cpu_signature());
  add(req.source);
  return fnv1a128_hex(material);
}

void clear_memory_cache() {
  std::lock_guard<std::mutex> g(g_memory_mu);
  memory_cache().clear();
}

bool manifest_matches(const std::string& manifest, const std::string& key, const std::string& so_bytes) {
  std::istringstream in(manifest);
  std::string line, got_key, got_hash;
  uint64_t got_size = 0;
  bool header = false, have_size = false;
  while (std::getline(in, line)) {
    if (line == "ingot-cpu-cache " + std::to_string(kAbiVersion)) {
      header = true;
    } else if (line.rfind("key ", 0) == 0) {
      got_key = line.substr(4);
    } else if (line.rfind("size ", 0) == 0) {  // a whole decimal number, nothing else (no atoll overflow)
      const char *first = line.data() + 5, *last = line.data() + line.size();
      const auto [end, ec] = std::from_chars(first, last, got_size);
      have_size = ec == std::errc() && end == last && first != last;
    } else if (line.rfind("fnv1a128 ", 0) == 0) {
      got_hash = line.substr(9);
    }
  }
  return header && have_size && got_key == key && got_size == so_bytes.size() && got_hash == fnv1a128_hex(so_bytes);
}

std::shared_ptr<const LoadedLibrary> load_or_build(const BuildRequest& req) {
  const std::string key = cache_key(req);
  if (!req.cache) {
    std::error_code ec;
    std::string tmp = (std::filesystem::temp_directory_path(ec).string());
    if (ec || tmp.empty()) tmp = "/tmp";
    std::string bytes = build_bytes(req, tmp, key);
    std::string err;
    auto lib = load_bytes(bytes, tmp, key, &err);
    INGOT_CHECK(lib, "CpuBackend: cannot load the built library: ", err);
    return lib;
  }
  std::lock_guard<std::mutex> key_lock(key_mutex(key));
  {
    std::lock_guard<std::mutex> g(g_memory_mu);
    auto it = memory_cache().find(key);
    if (it != memory_cache().end()) return it->second;
  }
  const std::string dir = req.cache_dir.empty() ? default_cache_dir() : req.cache_dir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  INGOT_CHECK(!ec, "CpuBackend: cannot create the cache directory '", dir, "': ", ec.message(),
              " (set CpuOptions::cache_dir or $INGOT_CACHE_DIR, or CpuOptions::cache = false)");
  const std::string so_path = dir + "/" + key + ".so", manifest_path = dir + "/" + key + ".manifest";
  const ProcessLock process_lock(dir + "/" + key + ".lock");

  std::shared_ptr<LoadedLibrary> lib;
  std::string err;
  if (file_exists(so_path) && file_exists(manifest_path)) {
    std::string bytes, manifest;
    try {
      bytes = read_file(so_path);
      manifest = read_file(manifest_path);
    } catch (const Error&) {
      bytes.clear();
    }
    if (!bytes.empty() && manifest_matches(manifest, key, bytes)) {
      lib = load_bytes(bytes, dir, key, &err);  // a failure here means rebuild
      if (lib) lib->from_disk_cache = true;
    }
  }
  if (!lib) {
    std::string bytes = build_bytes(req, dir, key);
    // Library first, then its manifest: a reader that sees a new manifest with an old library
    // (or the reverse, from another process) finds a mismatch and rebuilds; it never loads it.
    write_file_atomic(so_path, bytes);
    write_file_atomic(manifest_path, manifest_text(key, bytes, req.toolchain));
    try {
      write_file_atomic(dir + "/" + key + ".cpp", req.source);
    } catch (const Error&) {
      // the source copy is for people only
    }
    lib = load_bytes(bytes, dir, key, &err);
    INGOT_CHECK(lib, "CpuBackend: cannot load the built library: ", err);
  }
  std::lock_guard<std::mutex> g(g_memory_mu);
  memory_cache()[key] = lib;
  return lib;
}

}  // namespace ingot::cpu
