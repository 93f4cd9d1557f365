// ingot_fuzz_programs: the differential fuzzer's command line (scripts/fuzz.sh programs ...).
//
//   ingot_fuzz_programs [--graphs N] [--seconds S] [--seed K] [--ops M] [--programs-per-graph P]
//
// Draws graph after graph (seeds K, K+1, ...; each P programs of M ops), checks each under every
// variation (fuzz/programs.h), and stops at the budget (N graphs or S seconds, whichever comes
// first) or at the first finding, which it prints with its seed: rerun with --seed <seed>
// --graphs 1 to reproduce it. Then prints how often each op of the registry was generated.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "programs.h"

using namespace ingot;

int main(int argc, char** argv) {
  long graphs = 20, seconds = 0, seed = 1;
  fuzz::ProgramOptions po;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const long v = std::atol(argv[i + 1]);
    if (a == "--graphs") graphs = v;
    else if (a == "--seconds") seconds = v;
    else if (a == "--seed") seed = v;
    else if (a == "--ops") po.ops = static_cast<int>(v);
    else if (a == "--programs-per-graph") po.programs_per_graph = static_cast<int>(v);
    else {
      std::cerr << "usage: ingot_fuzz_programs [--graphs N] [--seconds S] [--seed K] [--ops M] [--programs-per-graph P]\n";
      return 2;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<fuzz::Variation> vs = fuzz::variations();
  long done = 0, checks = 0;
  try {
    for (long k = 0; k < graphs; ++k) {
      if (seconds > 0 && std::chrono::steady_clock::now() - start > std::chrono::seconds(seconds)) break;
      const fuzz::Batch b = fuzz::random_batch(static_cast<uint64_t>(seed + k), po);
      for (const fuzz::Variation& v : vs) {
        ++checks;
        if (const std::optional<fuzz::Finding> f = fuzz::check(b, v)) {
          std::cout << "FINDING " << f->str() << "\n";
          return 1;
        }
      }
      ++done;
    }
  } catch (const std::exception& e) {
    std::cout << "FINDING (an error): " << e.what() << "\n";
    return 1;
  }
  int covered = 0, total = 0;
  std::string missing;
  for (const auto& [op, n] : fuzz::coverage()) {
    ++total;
    if (n > 0) ++covered;
    else missing += " " + op;
  }
  for (const auto& [op, why] : fuzz::rule_gaps()) std::cout << "rule gap: " << op << ": " << why << "\n";
  std::cout << done << " graphs (" << done * po.programs_per_graph << " programs of " << po.ops << " ops), " << checks
            << " compiled checks, no finding; " << covered << " of " << total << " ops generated; never:" << missing << "\n";
  return 0;
}
