#include "backends/cpu/toolchain.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "backends/cpu/cache.h"
#include "ingot/error.h"
#include "runtime/atomic_file.h"

extern char** environ;

namespace ingot::cpu {
namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// `name` itself when it has a slash, else the first PATH entry holding it.
std::string which(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return is_executable_file(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::stringstream ss(dirs);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    if (is_executable_file(candidate)) return candidate;
  }
  return "";
}

struct ProcessResult {
  int status = -1;  // exit code, or -1 when it did not run / was killed
  std::string output;  // stdout and stderr together
};

// Runs argv (no shell) with stdout and stderr captured through a temporary file.
ProcessResult run_process(const std::vector<std::string>& argv) {
  ProcessResult r;
  char tmpl[] = "/tmp/ingot-cc-XXXXXX";
  int fd = ::mkstemp(tmpl);
  INGOT_CHECK(fd >= 0, "Cannot create a temporary file for compiler output: ", std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd, 1);
  posix_spawn_file_actions_adddup2(&fa, fd, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    r.output = std::string("cannot start: ") + std::strerror(rc);
  } else {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (WIFSIGNALED(status)) r.output = "killed by signal " + std::to_string(WTERMSIG(status)) + "\n";
    std::ifstream in(tmpl, std::ios::binary);
    std::ostringstream os;
    os << in.rdbuf();
    r.output += os.str();
  }
  ::close(fd);
  ::unlink(tmpl);
  return r;
}

std::string first_line(const std::string& s) {
  size_t e = s.find('\n');
  return e == std::string::npos ? s : s.substr(0, e);
}

std::string find_openblas() {
  static const char* const kDirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                                      "/usr/lib64", "/usr/lib", "/usr/local/lib",
                                      "/opt/homebrew/opt/openblas/lib"};
  for (const char* d : kDirs) {
    std::string p = std::string(d) + "/libopenblas.so";
    if (::access(p.c_str(), R_OK) == 0) return p;
  }
  return "";
}

// What identifies the compiler's file: its resolved path, inode, size and modification time.
std::string file_identity(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) return "";
  const std::string resolved = real;
  std::free(real);
  struct stat st {};
  if (::stat(resolved.c_str(), &st) != 0) return "";
  return resolved + "\n" + std::to_string(st.st_ino) + " " + std::to_string(st.st_size) + " " +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

std::string version_memo_path(const std::string& memo_dir, const std::string& compiler) {
  return memo_dir + "/toolchain-" + fnv1a128_hex(compiler).substr(0, 16) + ".txt";
}

// The memoized version line when the memo names this compiler file as it is now; else "".
std::string read_version_memo(const std::string& memo_dir, const std::string& compiler) {
  if (memo_dir.empty()) return "";
  const std::string identity = file_identity(compiler);
  if (identity.empty()) return "";
  std::ifstream in(version_memo_path(memo_dir, compiler), std::ios::binary);
  std::string line, path, file, version;
  if (!std::getline(in, line) || line != "ingot-toolchain 1" || !std::getline(in, path) || path != compiler ||
      !std::getline(in, line) || !std::getline(in, file) || line + "\n" + file != identity ||
      !std::getline(in, version) || version.empty())
    return "";
  return version;
}

void write_version_memo(const std::string& memo_dir, const std::string& compiler, const std::string& version) {
  if (memo_dir.empty() || version.find('\n') != std::string::npos) return;
  const std::string identity = file_identity(compiler);
  if (identity.empty()) return;
  try {
    std::error_code ec;  // the cache directory, which the first build would create a moment later
    std::filesystem::create_directories(memo_dir, ec);
    write_file_atomic(version_memo_path(memo_dir, compiler),
                      "ingot-toolchain 1\n" + compiler + "\n" + identity + "\n" + version + "\n");
  } catch (const Error&) {
    // a memo only saves time: an unwritable directory changes nothing
  }
}

}  // namespace

std::atomic<int>& compiler_invocations() {
  static std::atomic<int> count{0};
  return count;
}

const std::string& host_cpu_signature() {
  static const std::string sig = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line, model, flags;
    while (std::getline(in, line)) {
      if (model.empty() && line.rfind("model name", 0) == 0) model = line;
      if (flags.empty() && (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0)) flags = line;
      if (!model.empty() && !flags.empty()) break;
    }
    return model + "\n" + flags;
  }();
  return sig;
}

Toolchain find_toolchain(const std::string& requested, const std::string& memo_dir) {
  static std::mutex mu;
  static std::map<std::pair<std::string, std::string>, Toolchain> memo;
  std::lock_guard<std::mutex> lock(mu);
  auto it = memo.find({requested, memo_dir});
  if (it != memo.end()) return it->second;

  std::vector<std::string> candidates;
  if (!requested.empty()) {
    candidates.push_back(requested);
  } else {
    for (const char* env : {"INGOT_CXX", "CXX"})
      if (const char* v = std::getenv(env); v != nullptr && *v != '\0') candidates.emplace_back(v);
    for (const char* n : {"c++", "g++", "clang++"}) candidates.emplace_back(n);
  }
  std::string tried;
  for (const std::string& c : candidates) {
    std::string path = which(c);
    tried += (tried.empty() ? "" : ", ") + c + (path.empty() ? " (not found)" : "");
    if (path.empty()) continue;
    std::string version = read_version_memo(memo_dir, path);
    if (version.empty()) {
      ProcessResult r = run_process({path, "--version"});
      if (r.status != 0) {
        tried += " (`--version` failed)";
        continue;
      }
      version = first_line(r.output);
      write_version_memo(memo_dir, path, version);
    }
    Toolchain tc{path, version, find_openblas()};
    memo.emplace(std::pair{requested, memo_dir}, tc);
    return tc;
  }
  INGOT_FAIL("CpuBackend: no usable C++ compiler (tried ", tried,
             "). Install g++ or clang++, set CpuOptions::compiler or $INGOT_CXX, "
             "or use ReferenceBackend() instead.");
}

std::vector<std::string> compile_flags(const std::vector<std::string>& extra, bool vectorize, bool optimize_size) {
  // -fno-trapping-math: without it GCC will not if-convert the float selects (clamps, special
  // cases) of the prelude's vector math, and every exp/erf/tanh loop stays scalar. Generated code
  // never reads the floating-point exception flags, so nothing observable changes.
  // -ffp-contract=off: every IR op rounds its result as the reference does; a product contracted
  // into the next op's add kept an overflow from becoming inf (the prelude's own multiply-adds are
  // explicit IG_FMA).
  std::vector<std::string> f = {optimize_size ? "-Os" : "-O3", "-march=native", "-ffp-contract=off", "-fno-trapping-math",
                                "-fopenmp", "-shared", "-fPIC", "-std=c++17"};
  // GCC and clang both take these (clang as aliases of -fno-vectorize / -fno-slp-vectorize).
  if (!vectorize) f.insert(f.end(), {"-fno-tree-vectorize", "-fno-tree-slp-vectorize"});
  f.insert(f.end(), extra.begin(), extra.end());
  return f;
}

std::string strip_simd_pragmas(const std::string& source) {
  std::istringstream in(source);
  std::string out, line;
  while (std::getline(in, line)) {
    const size_t at = line.find_first_not_of(' ');
    if (at != std::string::npos && line.compare(at, 16, "#pragma omp simd") == 0)
      line = line.substr(0, at) + "// vectorize off: " + line.substr(at + 1);
    out += line + "\n";
  }
  return out;
}

std::vector<std::string> build_command(const Toolchain& tc, const std::vector<std::string>& flags,
                                       const std::string& source_path,
                                       const std::string& library_path) {
  std::vector<std::string> argv = {tc.compiler};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-o", library_path, source_path});
  if (!tc.openblas.empty()) argv.push_back(tc.openblas);
  return argv;
}

std::string join_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    bool plain = !a.empty() && a.find_first_not_of(
                                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                   "-_./=+,:") == std::string::npos;
    if (!out.empty()) out += ' ';
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

void build_shared_library(const Toolchain& tc, const std::vector<std::string>& flags,
                          const std::string& source_path, const std::string& library_path) {
  std::vector<std::string> argv = build_command(tc, flags, source_path, library_path);
  compiler_invocations()++;
  ProcessResult r = run_process(argv);
  if (r.status == 0 && ::access(library_path.c_str(), R_OK) == 0) return;
  std::string diag = r.output;
  if (diag.size() > 8000) diag = diag.substr(0, 8000) + "\n[... diagnostics truncated]";
  INGOT_FAIL("CpuBackend: building the generated code failed (", tc.version, ").\ncommand: ",
             join_command(argv), "\n", diag,
             "\nUse ReferenceBackend() instead, or fix the toolchain (CpuOptions::compiler, "
             "CpuOptions::extra_flags).");
}

}  // namespace ingot::cpu
