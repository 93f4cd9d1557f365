// Internal: reading back the JSON graph dump (print_graph(g, DumpFormat::Json)), and the string
// escaping every graph dump and verifier message uses for user-supplied names.
#pragma once

#include <string>
#include <string_view>

#include "ingot/graph.h"

namespace ingot {

// Rebuilds the graph a JSON dump describes, field for field (also a graph that would not
// verify, so a dump of a broken graph can be reloaded and inspected). Every id it reads is
// range-checked; semantic checks are left to verify(). Throws ingot::Error naming the JSON path
// on an unknown "format"/"version", malformed JSON, missing fields or wrong types.
Graph graph_from_json(const std::string& json);

// `s` with backslash, double quote and control characters escaped C-style (\n, \t, \xHH), so
// it can sit between double quotes on one line and be read back unambiguously.
std::string escape_string(std::string_view s);

}  // namespace ingot
