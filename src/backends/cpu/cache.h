// The kernel cache: generated source -> loaded shared library, in memory and on disk.
//
// The key is a 128-bit FNV-1a hash of the source, the flags, the compiler path and version and
// the host CPU (for -march=native). On disk each entry is `<key>.so` plus `<key>.manifest`
// (size and hash of the .so); an entry is verified before loading and rebuilt when it does not
// match, so a truncated or overwritten file is never loaded. Writes are temp file + rename, so
// readers see complete files only, and processes sharing a cache directory take an flock on
// `<key>.lock` around look-up, build and publish: two builds of one key give different bytes, and
// their library/manifest renames must not interleave. The verified bytes are loaded from a
// private copy, so a file replaced after the check is not what runs either. `<key>.cpp` keeps
// the source beside it for people.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cpu/toolchain.h"

namespace ingot::cpu {

// FNV-1a, 128-bit, as 32 lowercase hex digits.
std::string fnv1a128_hex(std::string_view data);

// $INGOT_CACHE_DIR, else $XDG_CACHE_HOME/ingot, else ~/.cache/ingot, else
// private_cache_dir("/tmp") (src/backends/cpu/cache_dir.cpp).
std::string default_cache_dir();

// <root>/ingot-cache-<uid>, created 0700. Libraries in it are dlopen'ed, so a directory another
// user could write to is refused (ingot::Error naming it and why): one that exists but is not a
// directory (a symlink included), is not owned by this user, or is writable by group or others.
std::string private_cache_dir(const std::string& root);

struct LoadedLibrary {
  void* handle = nullptr;
  void* entry = nullptr;  // the `ingot_entry` symbol
  std::string key;
  bool from_disk_cache = false;  // loaded from an existing on-disk entry (no build)
};

struct BuildRequest {
  std::string source;
  std::vector<std::string> flags;
  Toolchain toolchain;
  bool cache = true;      // use the in-memory and on-disk caches
  std::string cache_dir;  // empty: default_cache_dir()
};

std::string cache_key(const BuildRequest& req);

// The library for `req`: from memory, else from a verified disk entry, else built now.
// Throws ingot::Error on build or load failure.
std::shared_ptr<const LoadedLibrary> load_or_build(const BuildRequest& req);

// Forgets the in-memory cache (loaded libraries stay mapped); tests use it to reach the disk.
void clear_memory_cache();

// True when `manifest` (a `<key>.manifest` file's text, from disk: any bytes at all) describes
// exactly `so_bytes` for `key`. Fuzzed (fuzz/fuzz_cache_manifest.cpp).
bool manifest_matches(const std::string& manifest, const std::string& key, const std::string& so_bytes);

}  // namespace ingot::cpu
