// CompileConfig: the INGOT_* environment variables, read once, replaceable by the program.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>

#include "ingot/cpu_backend.h"
#include "ingot/error.h"
#include "ingot/function_compile.h"
#include "trace/trace_state.h"

namespace ingot {

namespace {

bool env_bool(const char* name, const char* v) {
  const std::string s = v;
  if (s == "1" || s == "true" || s == "on" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no" || s.empty()) return false;
  INGOT_FAIL("Environment variable ", name, "='", s, "': expected 1 or 0 (true/false, on/off, yes/no)");
}

int env_positive_int(const char* name, const char* v) {
  const std::string s = v;
  size_t used = 0;
  long x = 0;
  try {
    x = std::stol(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  INGOT_CHECK(used == s.size() && !s.empty() && x >= 1 && x <= 1000000000, "Environment variable ", name, "='", s,
              "': expected a whole number of evaluations >= 1");
  return static_cast<int>(x);
}

struct ConfigHolder {
  std::mutex mu;
  std::shared_ptr<const CompileConfig> config;
  bool disabled_by_call = false;
};

ConfigHolder& holder() {
  static ConfigHolder h;
  return h;
}

}  // namespace

CompileConfig CompileConfig::from_env(const std::function<const char*(const char*)>& getenv) {
  auto get = [&](const char* name) -> const char* { return getenv ? getenv(name) : std::getenv(name); };
  CompileConfig c;
  if (const char* v = get("INGOT_DISABLE_COMPILE")) c.disable_compile = env_bool("INGOT_DISABLE_COMPILE", v);
  if (const char* v = get("INGOT_AUTO_COMPILE")) c.auto_compile = env_bool("INGOT_AUTO_COMPILE", v);
  if (const char* v = get("INGOT_AUTO_COMPILE_THRESHOLD"))
    c.auto_compile_threshold = env_positive_int("INGOT_AUTO_COMPILE_THRESHOLD", v);
  if (const char* v = get("INGOT_COMPILE")) c.compile_all = env_bool("INGOT_COMPILE", v);
  if (const char* v = get("INGOT_DEBUG_COMPILE")) c.debug = env_bool("INGOT_DEBUG_COMPILE", v);
  if (const char* v = get("INGOT_INSTRUCTION_LOG")) c.instruction_log = v;
  return c;
}

std::shared_ptr<const CompileConfig> detail::current_config() {
  ConfigHolder& h = holder();
  std::lock_guard<std::mutex> lock(h.mu);
  if (!h.config) h.config = std::make_shared<const CompileConfig>(CompileConfig::from_env());
  return h.config;
}

bool detail::compile_enabled() {
  std::shared_ptr<const CompileConfig> c = current_config();
  std::lock_guard<std::mutex> lock(holder().mu);
  return !c->disable_compile && !holder().disabled_by_call;
}

const Backend& detail::build_backend(const CompileConfig& c) {
  static const CpuBackend cpu;
  return c.backend ? *c.backend : cpu;
}

std::string detail::fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

void detail::compile_log(const CompileConfig& c, const std::string& line) {
  if (c.log_sink) c.log_sink(line);
  else std::cerr << line << "\n";
}

const CompileConfig& compile_config() {
  // The holder keeps every config it handed out alive until the next set_compile_config.
  static thread_local std::shared_ptr<const CompileConfig> last;
  last = detail::current_config();
  return *last;
}

void set_compile_config(CompileConfig config) {
  INGOT_CHECK(config.auto_compile_threshold >= 1, "CompileConfig::auto_compile_threshold must be >= 1, got ",
              config.auto_compile_threshold);
  config.options.validate();
  ConfigHolder& h = holder();
  std::lock_guard<std::mutex> lock(h.mu);
  h.config = std::make_shared<const CompileConfig>(std::move(config));
}

void disable_compile() {
  std::lock_guard<std::mutex> lock(holder().mu);
  holder().disabled_by_call = true;
}

void enable_compile() {
  std::lock_guard<std::mutex> lock(holder().mu);
  holder().disabled_by_call = false;
}

}  // namespace ingot
