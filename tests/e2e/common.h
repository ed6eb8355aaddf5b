// What the end-to-end tests share: where the build put the library, the
// command, the simulator and the test programs (tests/CMakeLists.txt passes
// them in), and small helpers for reading reports and sources.
#ifndef GPUWATCH_TESTS_E2E_COMMON_H_
#define GPUWATCH_TESTS_E2E_COMMON_H_

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/subprocess.h"
#include "tools/report_reader.h"

namespace gpuwatch::testing {

inline const std::string kLib = GPUWATCH_TEST_LIB;         // libgpuwatch.so
inline const std::string kCli = GPUWATCH_TEST_CLI;         // the gpuwatch command
inline const std::string kSimDir = GPUWATCH_TEST_SIM_DIR;  // the simulator's libraries
inline const std::string kPrograms = GPUWATCH_TEST_PROGRAMS_DIR;
inline const std::string kExamples = GPUWATCH_TEST_EXAMPLES_DIR;
inline const std::string kSourceDir = GPUWATCH_TEST_SOURCE_DIR;

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * kKiB;

// The 1-based number of the first line of the file `source` that contains
// `marker`; 0 when none does.
int LineOf(const std::string& source, const std::string& marker);

// The JSON document at `path`; a discarded value when it is missing or does
// not parse (tests then fail on the fields they expect). A report's sites get
// their frames from its frame table (InlineFrameTable), as the tools read it.
inline nlohmann::json ReadJson(const std::string& path) {
  nlohmann::json doc = nlohmann::json::parse(ReadFile(path), nullptr, /*allow_exceptions=*/false);
  tools::InlineFrameTable(&doc);
  return doc;
}

// The first line of `text` that contains every one of `parts`, or "".
inline std::string LineWith(const std::string& text, const std::vector<std::string>& parts) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    bool all = true;
    for (const std::string& p : parts) all = all && line.find(p) != std::string::npos;
    if (all) return line;
    start = end + 1;
  }
  return "";
}

}  // namespace gpuwatch::testing

#endif  // GPUWATCH_TESTS_E2E_COMMON_H_
