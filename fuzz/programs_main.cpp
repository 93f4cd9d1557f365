// ingot_fuzz_programs: the differential fuzzer's command line (scripts/fuzz.sh programs ...).
//
//   ingot_fuzz_programs [--graphs N] [--seconds S] [--seed K] [--ops M] [--programs-per-graph P]
//                       [--control-flow-percent C]
//                       [--rotate 0|1] [--reproducers DIR] [--models 0|1] [--keep-going 0|1]
//   ingot_fuzz_programs --replay DIR
//
// Draws graph after graph (seeds K, K+1, ...; each P programs of M ops) and checks each under
// every variation (fuzz/programs.h), or with --rotate 1 under one variation per graph, in turn
// (a larger budget of programs for the same builds). Stops at the budget (N graphs or S seconds,
// whichever comes first) or at the first finding, which it prints with its seed and variation,
// shrinks (fuzz/shrink.h) and saves as a reproducer under DIR (default fuzz-findings/): copy
// that directory into fuzz/regressions/programs/ once the bug is fixed, and ctest replays it.
// Then prints how often each op of the registry was generated. --replay checks one reproducer.
// --keep-going 1 (for long unattended runs): a finding is shrunk and saved, and the run goes on
// with the next graph; a line per graph says what was checked, so a run cut short still counts.
// The exit status is 1 when anything was found.
// --models 1: random compositions of zoo blocks through compile(model, ...) instead (fuzz/models.h;
// a finding prints the model, reproduced by its seed).
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ingot/error.h"
#include "models.h"
#include "programs.h"
#include "shrink.h"

using namespace ingot;

namespace {

int usage() {
  std::cerr << "usage: ingot_fuzz_programs [--graphs N] [--seconds S] [--seed K] [--ops M] [--programs-per-graph P]\n"
               "                           [--control-flow-percent C]\n"
               "                           [--rotate 0|1] [--reproducers DIR] [--models 0|1] [--keep-going 0|1]\n"
               "       ingot_fuzz_programs --replay DIR\n";
  return 2;
}

// Whether `ingot_fuzz_programs --replay dir`, run as a new process of this program (no shell),
// reports a finding (exit status 1).
bool fails_in_a_fresh_process(const std::string& dir) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);
    }
    execl("/proc/self/exe", "ingot_fuzz_programs", "--replay", dir.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) return true;  // cannot tell: keep the shrunk one
  return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// Shrinks the finding and saves it; returns 1 (a finding).
int report(const fuzz::Batch& b, const fuzz::Variation& v, const fuzz::Finding& f, const std::string& dir) {
  std::cout << "FINDING " << f.str() << "\n";
  std::cout << "shrinking (each step is a build)..." << std::endl;
  const fuzz::Batch small = fuzz::shrink(b, v, {}, 120, f.output);
  std::optional<fuzz::Finding> again;
  try {
    again = fuzz::check(small, v);
  } catch (const std::exception& e) {
    again = fuzz::Finding{b.seed, v.name, std::string("(an error: ") + e.what() + ")", "", 1e30, 0};
  }
  std::string name = dir + "/seed" + std::to_string(b.seed) + "-";
  for (char c : v.name) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  // A reproducer must fail on its own, in a fresh process: the shrinker's steps ran in this one,
  // after the whole batch was built, and a shrunk program replayed alone once took another conv
  // kernel and passed (seed 320829). When it does not fail there, the whole batch is saved.
  fuzz::save_reproducer(name, small, v, again.value_or(f));
  const bool alone = fails_in_a_fresh_process(name);
  if (!alone) {
    std::filesystem::remove_all(name);
    fuzz::save_reproducer(name, b, v, f);
    std::cout << "the shrunk program does not fail in a fresh process: the whole batch is saved\n";
  }
  std::cout << "reproducer (" << (alone ? small : b).graph.nodes().size() << " nodes): " << name << "\n"
            << (again && alone ? again->str() : f.str()) << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  long graphs = 20, seconds = 0, seed = 1, rotate = 0, models = 0, keep_going = 0;
  std::string reproducers = "fuzz-findings", replay;
  fuzz::ProgramOptions po;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) return usage();
    const std::string a = argv[i], value = argv[i + 1];
    const long v = std::atol(argv[i + 1]);
    if (a == "--graphs") graphs = v;
    else if (a == "--seconds") seconds = v;
    else if (a == "--seed") seed = v;
    else if (a == "--ops") po.ops = static_cast<int>(v);
    else if (a == "--programs-per-graph") po.programs_per_graph = static_cast<int>(v);
    else if (a == "--control-flow-percent") po.control_flow_percent = static_cast<int>(v);
    else if (a == "--rotate") rotate = v;
    else if (a == "--models") models = v;
    else if (a == "--keep-going") keep_going = v;
    else if (a == "--reproducers") reproducers = value;
    else if (a == "--replay") replay = value;
    else return usage();
  }
  if (!replay.empty()) {
    try {
      std::string name;
      const fuzz::Batch b = fuzz::load_reproducer(replay, &name);
      const std::optional<fuzz::Finding> f = fuzz::check(b, fuzz::variation_named(name));
      std::cout << (f ? "FINDING " + f->str() : "no finding under '" + name + "'") << "\n";
      return f ? 1 : 0;
    } catch (const std::exception& e) {
      std::cout << "error: " << e.what() << "\n";
      return 1;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<fuzz::Variation> vs = fuzz::variations();
  long done = 0, checks = 0;
  if (models != 0) {
    for (long k = 0; k < graphs; ++k) {
      if (seconds > 0 && std::chrono::steady_clock::now() - start > std::chrono::seconds(seconds)) break;
      const fuzz::ModelCase c = fuzz::random_model(static_cast<uint64_t>(seed + k));
      for (size_t i = 0; i < vs.size(); ++i) {
        if (rotate != 0 && i != static_cast<size_t>(seed + k) % vs.size()) continue;
        ++checks;
        std::optional<fuzz::Finding> f;
        try {
          f = fuzz::check_model(c, vs[i]);
        } catch (const std::exception& e) {
          f = fuzz::Finding{c.seed, vs[i].name, std::string("(an error: ") + e.what() + ")", c.description, 1e30, 0};
        }
        if (f) {
          std::cout << "FINDING " << f->str() << "\nreproduce: ingot_fuzz_programs --models 1 --seed " << c.seed
                    << " --graphs 1\n";
          return 1;
        }
      }
      ++done;
    }
    std::cout << done << " models, " << checks << " compiled checks, no finding\n";
    return 0;
  }
  long findings = 0;
  for (long k = 0; k < graphs; ++k) {
    if (seconds > 0 && std::chrono::steady_clock::now() - start > std::chrono::seconds(seconds)) break;
    const fuzz::Batch b = fuzz::random_batch(static_cast<uint64_t>(seed + k), po);
    for (size_t i = 0; i < vs.size(); ++i) {
      if (rotate != 0 && i != static_cast<size_t>(seed + k) % vs.size()) continue;
      ++checks;
      std::optional<fuzz::Finding> f;
      try {
        f = fuzz::check(b, vs[i]);
      } catch (const std::exception& e) {
        f = fuzz::Finding{b.seed, vs[i].name, std::string("(an error: ") + e.what() + ")", "", 1e30, 0};
      }
      if (f) {
        findings += report(b, vs[i], *f, reproducers);
        if (keep_going == 0) return 1;
      }
      if (keep_going != 0) std::cout << "seed " << b.seed << " checked under " << vs[i].name << (f ? ": FINDING" : ": ok") << std::endl;
    }
    ++done;
  }
  int covered = 0, total = 0;
  std::string missing;
  for (const auto& [op, n] : fuzz::coverage()) {
    ++total;
    if (n > 0) ++covered;
    else missing += " " + op;
  }
  for (const auto& [op, why] : fuzz::rule_gaps()) std::cout << "rule gap: " << op << ": " << why << "\n";
  const fuzz::CheckStats cs = fuzz::check_stats();
  std::cout << "gradient checks: " << cs.differentiated << " batches differentiated, " << cs.not_differentiable
            << " skipped (a program crosses an op with no gradient rule); shapeless: " << cs.shapeless
            << " batches compiled with symbolic shapes, " << cs.not_shapeless << " skipped (a rule needs a static size)\n";
  std::cout << done << " graphs (" << done * po.programs_per_graph << " programs of " << po.ops << " ops), " << checks
            << " compiled checks (" << (rotate != 0 ? "one variation per graph, in turn" : "every variation per graph")
            << "), " << (findings == 0 ? "no finding" : std::to_string(findings) + " finding(s)") << "; " << covered << " of " << total << " ops generated; never:" << missing << "\n";
  return findings == 0 ? 0 : 1;
}
