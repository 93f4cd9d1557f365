// Where the CPU backend caches its libraries when the caller names no directory.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cpu/cache.h"
#include "ingot/error.h"

namespace ingot::cpu {

std::string default_cache_dir() {
  if (const char* d = std::getenv("INGOT_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/ingot";
  if (const char* d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/ingot";
  // No per-user location known: /tmp is shared, so the directory must be ours alone.
  return private_cache_dir("/tmp");
}

std::string private_cache_dir(const std::string& root) {
  const uid_t uid = ::geteuid();
  const std::string dir = root + "/ingot-cache-" + std::to_string(uid);
  const char* fix = " (remove it, or set $INGOT_CACHE_DIR or CpuOptions::cache_dir to a directory of yours)";
  if (::mkdir(dir.c_str(), 0700) != 0)
    INGOT_CHECK(errno == EEXIST, "CpuBackend: cannot create the cache directory '", dir, "': ", std::strerror(errno),
                fix);
  struct stat st {};
  INGOT_CHECK(::lstat(dir.c_str(), &st) == 0, "CpuBackend: cannot inspect the cache directory '", dir,
              "': ", std::strerror(errno), fix);
  INGOT_CHECK(S_ISDIR(st.st_mode), "CpuBackend: refusing the cache directory '", dir,
              "': it is not a directory (a symbolic link or a file)", fix);
  INGOT_CHECK(st.st_uid == uid, "CpuBackend: refusing the cache directory '", dir, "': it belongs to user ",
              st.st_uid, ", not to this user (", uid, "), who would load libraries from it", fix);
  INGOT_CHECK((st.st_mode & (S_IWGRP | S_IWOTH)) == 0, "CpuBackend: refusing the cache directory '", dir,
              "': other users can write to it (mode ", (st.st_mode >> 6 & 7), (st.st_mode >> 3 & 7),
              (st.st_mode & 7), ")", fix);
  return dir;
}

}  // namespace ingot::cpu
