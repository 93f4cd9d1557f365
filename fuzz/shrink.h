// Minimal reproducers for the differential fuzzer's findings (fuzz/programs.h).
//
// shrink() makes a failing batch small while the same variation still finds a difference:
// it keeps the one output that fails (and what it needs), then removes nodes one at a time,
// from the last: a node's result is replaced by one of its operands of the same shape and dtype,
// else by a new input of that shape, and the nodes nothing reads any more go. Then the sizes:
// each distinct size of the inputs' dimensions, largest first, is made 1, 2 or half (every input
// keeps its leading elements there, so dimensions that matched or broadcast still do) while the
// finding persists and the program's rules accept the new size.
// Each step is one check (a native build), so the budget is a number of checks.
//
// A reproducer is a directory: graph.json (the graph, print_graph's JSON, read back with
// graph_from_json), graph.txt (the same, readable), inputs.safetensors (and
// special_inputs.safetensors), variation.txt (the variation's name) and finding.txt.
// Copied under fuzz/regressions/programs/, it becomes a regression test: ctest's
// ProgramFuzz.RegressionsStayFixed checks each there under its variation.
#pragma once

#include <string>

#include "programs.h"

namespace ingot::fuzz {

// `failing_output`: the output the finding names (Finding::output), tried first.
Batch shrink(const Batch& failing, const Variation& v, const CpuBackend::CpuOptions& cpu = {}, int max_checks = 120,
             const std::string& failing_output = "");

// Writes the reproducer directory `dir` (created; files written atomically).
void save_reproducer(const std::string& dir, const Batch& b, const Variation& v, const Finding& f);
// Reads one back; its variation's name into *variation. Throws ingot::Error naming the file.
Batch load_reproducer(const std::string& dir, std::string* variation);

}  // namespace ingot::fuzz
