#include "libgpuwatch/record/kernels.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace gpuwatch {
namespace {

std::map<std::string, KernelStats> ByName(const KernelTable& table) {
  std::map<std::string, KernelStats> out;
  for (const KernelStats& k : table.Snapshot()) out[k.name] = k;
  return out;
}

TEST(KernelTable, LaunchesAndGpuTimeAreMergedByName) {
  KernelTable table;
  const std::string a = "_Z4axpyPfS_f";
  const std::string a_again(a.begin(), a.end());  // another pointer, the same text
  table.OnLaunch(a.c_str());
  table.OnLaunch(a.c_str());
  table.OnLaunch(a_again.c_str());
  table.OnLaunch(nullptr);
  table.OnKernelRecord(a.c_str(), 100, 350);
  table.OnKernelRecord(a.c_str(), 400, 300);  // end before start: no time
  EXPECT_EQ(table.launches(), 4u);
  const auto k = ByName(table);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k.at(a).launches, 3u);
  EXPECT_EQ(k.at(a).timed, 2u);
  EXPECT_EQ(k.at(a).gpu_ns, 250u);
  EXPECT_EQ(k.at("(unnamed)").launches, 1u);
}

// A program that generates kernels without end (JIT, autotuning) keeps the
// table at kMaxNames names; the launches and records of the rest are counted
// under "(other)", none lost.
TEST(KernelTable, NamesBeyondTheCapAreCountedUnderOther) {
  KernelTable table;
  constexpr size_t kExtra = 100;
  std::vector<std::string> names;
  for (size_t i = 0; i < KernelTable::kMaxNames + kExtra; ++i) {
    names.push_back("kernel_" + std::to_string(i));
  }
  for (const std::string& name : names) {
    table.OnLaunch(name.c_str());
    table.OnLaunch(name.c_str());
    table.OnKernelRecord(name.c_str(), 0, 10);
  }
  const auto k = ByName(table);
  EXPECT_EQ(table.launches(), 2 * names.size());
  uint64_t launches = 0;
  uint64_t timed = 0;
  uint64_t gpu_ns = 0;
  for (const auto& [name, stats] : k) {
    launches += stats.launches;
    timed += stats.timed;
    gpu_ns += stats.gpu_ns;
  }
  EXPECT_EQ(launches, 2 * names.size());
  EXPECT_EQ(timed, names.size());
  EXPECT_EQ(gpu_ns, 10 * names.size());
  ASSERT_TRUE(k.contains("(other)"));
  EXPECT_EQ(k.at("(other)").launches, 2 * kExtra);
  EXPECT_EQ(k.at("(other)").timed, kExtra);
  EXPECT_EQ(k.size(), KernelTable::kMaxNames + 1);
}

}  // namespace
}  // namespace gpuwatch
