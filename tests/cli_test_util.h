// Running the `ingot` program from tests, as a user would: its output and exit status.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

namespace ingot::cli_test {

struct Result {
  int status;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line, collecting its output and exit status.
inline Result run_cli_as(const std::string& command_line) {
  const std::string cmd = command_line + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  Result r{-1, ""};
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe.get())) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe.release());
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs the built `ingot` program with `args`.
inline Result run_cli(const std::string& args) { return run_cli_as(std::string(INGOT_CLI_PATH) + " " + args); }

}  // namespace ingot::cli_test
