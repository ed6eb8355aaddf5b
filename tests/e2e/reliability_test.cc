// Reliability under load: many threads allocating while snapshots are taken.
#include <gtest/gtest.h>

#include <string>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"
#include "tests/e2e/subprocess.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

TEST(Reliability, EightThreadsHundredThousandPairsWithConcurrentSnapshots) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const ProcessResult r = RunProcess(
      {kPrograms + "/stress", "8", "100000"},
      {{"LD_LIBRARY_PATH", kSimDir}, {"LD_PRELOAD", kLib}, {"GPUWATCH_OUTPUT", out}}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = json::parse(ReadFile(out), nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(report.is_object());
  const json& device = report["totals"]["kinds"]["device"];
  EXPECT_EQ(device["allocs"], 800000);
  EXPECT_EQ(device["frees"], 800000);
  EXPECT_EQ(device["current_bytes"], 0);
  EXPECT_EQ(report["totals"]["unknown_frees"], 0);
  // Every snapshot written while the workers ran is a complete report.
  int parsed = 0;
  for (const std::string& name : dir.List()) {
    if (name.find(".snapshot-") == std::string::npos) continue;
    const json snap = json::parse(ReadFile(dir.path() + "/" + name), nullptr, false);
    ASSERT_TRUE(snap.is_object()) << name;
    EXPECT_EQ(snap["trigger"], "snapshot");
    const uint64_t allocs = snap["totals"]["kinds"]["device"]["allocs"];
    const uint64_t frees = snap["totals"]["kinds"]["device"]["frees"];
    EXPECT_LE(frees, allocs);
    EXPECT_LE(allocs, 800000u);
    ++parsed;
  }
  EXPECT_GT(parsed, 0) << r.out;
}

}  // namespace
}  // namespace gpuwatch::testing
