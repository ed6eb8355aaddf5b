// The graph table replays a launch's work in the order its nodes were made,
// whatever order an instantiation reports its clones in: a graph may give two
// allocation nodes one address when the first is freed before the second is
// made, and only that order frees the first before the second is allocated.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "libgpuwatch/record/graphs.h"

namespace gpuwatch {
namespace {

constexpr uintptr_t kGraph = 0x100;
constexpr uintptr_t kExec = 0x200;
constexpr uintptr_t kThread = 7;
constexpr uint64_t kAddress = 0x7f0000000000;

GraphWork Work(GraphWork::Type type, uint64_t size = 0) {
  GraphWork w;
  w.type = type;
  w.address = kAddress;
  w.size = size;
  return w;
}

std::vector<GraphWork::Type> TypesOf(const std::vector<std::pair<uint64_t, GraphWork>>& work) {
  std::vector<GraphWork::Type> types;
  for (const auto& [id, w] : work) types.push_back(w.type);
  return types;
}

class GraphTableOrder : public ::testing::TestWithParam<bool> {};

TEST_P(GraphTableOrder, ALaunchReplaysItsNodesInTheOrderTheyWereMade) {
  GraphTable table;
  // alloc (3 MiB), free, alloc (1 MiB) at the same address, made in that order.
  table.OnNodeCreated(1, kGraph, Work(GraphWork::Type::kAlloc, 3 << 20));
  table.OnNodeCreated(2, kGraph, Work(GraphWork::Type::kFree));
  table.OnNodeCreated(3, kGraph, Work(GraphWork::Type::kAlloc, 1 << 20));
  // The instantiation clones them (ids 11..13), reported in either order.
  const bool reversed = GetParam();
  const std::vector<uint64_t> originals =
      reversed ? std::vector<uint64_t>{3, 2, 1} : std::vector<uint64_t>{1, 2, 3};
  for (const uint64_t original : originals) {
    table.OnNodeCloned(10 + original, original, 0);
    table.AddInstantiatedClone(kThread, 10 + original);
  }
  table.OnExecCreated(kExec, kGraph, kThread);
  const auto work = table.WorkOf(kExec);
  ASSERT_EQ(work.size(), 3u);
  EXPECT_EQ(TypesOf(work),
            (std::vector<GraphWork::Type>{GraphWork::Type::kAlloc, GraphWork::Type::kFree,
                                          GraphWork::Type::kAlloc}));
  EXPECT_EQ(work[0].first, 11u);
  EXPECT_EQ(work[0].second.size, 3u << 20);
  EXPECT_EQ(work[2].first, 13u);
  EXPECT_EQ(work[2].second.size, 1u << 20);
}

INSTANTIATE_TEST_SUITE_P(CloneOrder, GraphTableOrder, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Reversed" : "Creation"; });

}  // namespace
}  // namespace gpuwatch
