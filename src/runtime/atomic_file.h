// Atomic file writes: readers see the old file or the complete new one, never a partial write.
#pragma once

#include <string>

namespace ingot {

// Writes `contents` to a unique temporary file beside `path`, flushes it to disk and renames it
// over `path`. Throws ingot::Error naming the path and the system error on failure.
void write_file_atomic(const std::string& path, const std::string& contents);

// Reads a whole file; throws ingot::Error naming the path when it cannot.
std::string read_file(const std::string& path);

}  // namespace ingot
