// Transfers: joining copy calls to their activity records by correlation id.
#include "libgpuwatch/record/transfers.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace gpuwatch {
namespace {

CopyCall Call(uint32_t correlation, uint32_t stack, uint64_t bytes, uint32_t records = 1) {
  return {.correlation = correlation,
          .stack_id = stack,
          .bytes = bytes,
          .kind = CopyKind::kHostToDevice,
          .records = records};
}

CopyRecord Record(uint32_t driver, uint32_t runtime, uint64_t bytes, HostKind host) {
  return {.correlation = driver,
          .runtime_correlation = runtime,
          .bytes = bytes,
          .kind = CopyKind::kHostToDevice,
          .host = host,
          .start_ns = 1000,
          .end_ns = 1000 + bytes};  // 1 byte per ns
}

const SiteTransfers* SiteOf(const TransfersSnapshot& snap, uint32_t stack) {
  for (const auto& [id, site] : snap.sites) {
    if (id == stack) return &site;
  }
  return nullptr;
}

TEST(Transfers, RecordsJoinTheirCallsByRuntimeOrDriverCorrelation) {
  Transfers t;
  t.OnCopyCall(Call(10, 7, 4096), /*activity=*/true);  // a runtime call
  t.OnCopyCall(Call(0, 8, 512), /*activity=*/true);    // correlation 0 is a valid id
  t.OnCopyCall(Call(30, 9, 100), /*activity=*/true);   // a driver call
  EXPECT_EQ(t.OnCopyRecord(Record(11, 10, 4096, HostKind::kPinned)), 7u);
  EXPECT_EQ(t.OnCopyRecord(Record(0, 0, 512, HostKind::kPageable)), 8u);
  EXPECT_EQ(t.OnCopyRecord(Record(30, 0, 100, HostKind::kPageable)), 9u);
  EXPECT_EQ(t.OnCopyRecord(Record(30, 0, 100, HostKind::kPageable)), 0u);  // joined already
  t.Settle();
  const TransfersSnapshot snap = t.Snapshot();
  EXPECT_EQ(snap.unmatched_records, 1u);
  const SiteTransfers* s7 = SiteOf(snap, 7);
  ASSERT_NE(s7, nullptr);
  EXPECT_EQ(s7->all.count, 1u);
  EXPECT_EQ(s7->all.timed_bytes, 4096u);
  EXPECT_EQ(s7->by_host[static_cast<int>(HostKind::kPinned)].count, 1u);
  const SiteTransfers* s9 = SiteOf(snap, 9);
  ASSERT_NE(s9, nullptr);
  EXPECT_EQ(s9->all.timed_count, 1u);
  // The record that joined nothing is not a copy: its copy was counted from
  // its call (and the record only counted as unmatched).
  EXPECT_EQ(SiteOf(snap, 0), nullptr);
  uint64_t copies = 0;
  for (const auto& [id, site] : snap.sites) copies += site.all.count;
  EXPECT_EQ(copies, 3u);
}

TEST(Transfers, BatchWaitsForEachRecordAndSettleCountsTheRest) {
  Transfers t;
  t.OnCopyCall(Call(5, 3, 3000, /*records=*/3), /*activity=*/true);
  EXPECT_EQ(t.OnCopyRecord(Record(6, 5, 1000, HostKind::kPinned)), 3u);
  EXPECT_EQ(t.OnCopyRecord(Record(6, 5, 1000, HostKind::kPinned)), 3u);
  t.OnCopyCall(Call(20, 4, 64), /*activity=*/true);  // its record never comes
  t.Settle();
  EXPECT_EQ(t.OnCopyRecord(Record(6, 5, 1000, HostKind::kPinned)), 0u);  // settled: gone
  const TransfersSnapshot snap = t.Snapshot();
  const SiteTransfers* s3 = SiteOf(snap, 3);
  ASSERT_NE(s3, nullptr);
  EXPECT_EQ(s3->all.timed_count, 2u);
  EXPECT_EQ(s3->all.count, 3u);  // two timed records and the untimed rest
  EXPECT_EQ(s3->all.bytes, 5000u);
  const SiteTransfers* s4 = SiteOf(snap, 4);
  ASSERT_NE(s4, nullptr);
  EXPECT_EQ(s4->all.count, 1u);
  EXPECT_EQ(s4->all.timed_count, 0u);
  EXPECT_EQ(s4->all.bytes, 64u);
}

TEST(Transfers, FailedCallIsForgottenAndCallsWithoutActivityCountAtOnce) {
  Transfers t;
  t.OnCopyCall(Call(1, 2, 256), /*activity=*/true);
  t.OnCopyFailed(1);
  t.OnCopyCall(Call(2, 6, 128), /*activity=*/false);
  t.Settle();
  const TransfersSnapshot snap = t.Snapshot();
  EXPECT_EQ(SiteOf(snap, 2), nullptr);
  const SiteTransfers* s6 = SiteOf(snap, 6);
  ASSERT_NE(s6, nullptr);
  EXPECT_EQ(s6->all.count, 1u);
  EXPECT_EQ(s6->all.bytes, 128u);
  EXPECT_EQ(snap.pending_dropped, 0u);
}

// More calls in flight than the table holds: those beyond it are counted at
// once, untimed, and in pending_dropped; after Settle every call is counted.
TEST(Transfers, CallsBeyondThePendingCapAreCountedAtOnce) {
  Transfers t;
  constexpr uint32_t kExtra = 10;
  const auto total = static_cast<uint32_t>(Transfers::kMaxPending) + kExtra;
  for (uint32_t c = 1; c <= total; ++c) t.OnCopyCall(Call(c, 3, 4), /*activity=*/true);
  const TransfersSnapshot before = t.Snapshot();
  EXPECT_EQ(before.pending_dropped, kExtra);
  ASSERT_NE(SiteOf(before, 3), nullptr);
  // A snapshot counts the calls still waiting too: every call, once.
  EXPECT_EQ(SiteOf(before, 3)->all.count, total);
  EXPECT_EQ(SiteOf(before, 3)->all.timed_count, 0u);
  t.Settle();
  const TransfersSnapshot after = t.Snapshot();
  EXPECT_EQ(after.pending_dropped, kExtra);
  EXPECT_EQ(SiteOf(after, 3)->all.count, total);
  EXPECT_EQ(SiteOf(after, 3)->all.bytes, uint64_t{4} * total);
}

// Many copies in flight at once, records arriving in another order: every
// record finds its call while the table grows. (Runtime correlation ids start
// at 2 here: a record's runtime id 0 means "no runtime call".)
TEST(Transfers, ThousandsInFlightJoinInAnyOrder) {
  Transfers t;
  constexpr uint32_t kN = 5000;
  for (uint32_t i = 0; i < kN; ++i) t.OnCopyCall(Call(2 + i * 2, 1 + i % 5, 10), true);
  uint32_t joined = 0;
  for (uint32_t i = kN; i-- > 0;)
    joined += t.OnCopyRecord(Record(3 + i * 2, 2 + i * 2, 10, HostKind::kPageable)) != 0 ? 1 : 0;
  EXPECT_EQ(joined, kN);
  t.Settle();
  const TransfersSnapshot snap = t.Snapshot();
  EXPECT_EQ(snap.unmatched_records, 0u);
  uint64_t timed = 0;
  for (const auto& [id, site] : snap.sites) timed += site.all.timed_count;
  EXPECT_EQ(timed, kN);
}

// The bug this guards against: records that join no call used to be counted
// as copies of their own (at "<no stack>"), and the calls waiting for them
// again at exit: every copy twice.
TEST(Transfers, UnjoinableRecordsNeverCountACopyTwice) {
  Transfers t;
  for (uint32_t c = 1; c <= 100; ++c) t.OnCopyCall(Call(c, 4, 1000), /*activity=*/true);
  for (uint32_t c = 1; c <= 100; ++c) {
    EXPECT_EQ(t.OnCopyRecord(Record(0xF0000000u + c, 0, 1000, HostKind::kPinned)), 0u);
  }
  t.Settle();
  const TransfersSnapshot snap = t.Snapshot();
  EXPECT_EQ(snap.unmatched_records, 100u);
  ASSERT_EQ(snap.sites.size(), 1u);
  EXPECT_EQ(snap.sites[0].first, 4u);
  EXPECT_EQ(snap.sites[0].second.all.count, 100u);
  EXPECT_EQ(snap.sites[0].second.all.bytes, 100000u);
  EXPECT_EQ(
      snap.totals[static_cast<int>(CopyKind::kHostToDevice)][static_cast<int>(HostKind::kUnknown)]
          .count,
      100u);
}

// Without a record, the host kind the call's own classification found is used.
TEST(Transfers, UntimedCopiesKeepTheHostKindOfTheirCall) {
  Transfers t;
  CopyCall pinned = Call(1, 2, 4096);
  pinned.host = HostKind::kPinned;
  t.OnCopyCall(pinned, /*activity=*/false);
  CopyCall pageable = Call(2, 2, 4096);
  pageable.host = HostKind::kPageable;
  pageable.async = true;
  t.OnCopyCall(pageable, /*activity=*/true);  // its record never comes
  const TransfersSnapshot snap = t.Snapshot();
  const auto& h2d = snap.totals[static_cast<int>(CopyKind::kHostToDevice)];
  EXPECT_EQ(h2d[static_cast<int>(HostKind::kPinned)].count, 1u);
  EXPECT_EQ(h2d[static_cast<int>(HostKind::kPageable)].count, 1u);
  EXPECT_EQ(h2d[static_cast<int>(HostKind::kPageable)].timed_count, 0u);
  ASSERT_NE(SiteOf(snap, 2), nullptr);
  EXPECT_EQ(SiteOf(snap, 2)->pageable_flagged_count[0], 1u);  // async from pageable memory
}

// A graph's memcpy node copies at every launch; its record carries the node.
TEST(Transfers, GraphCopiesJoinByLaunchAndNode) {
  Transfers t;
  CopyCall node_a = Call(0, 11, 2048);
  CopyCall node_b = Call(0, 12, 512);
  for (uint32_t launch = 40; launch < 43; ++launch) {
    t.OnGraphCopy(launch, /*node=*/7, node_a, /*activity=*/true);
    t.OnGraphCopy(launch, /*node=*/8, node_b, /*activity=*/true);
  }
  CopyRecord r = Record(90, 41, 2048, HostKind::kPinned);
  r.graph_node = 7;
  EXPECT_EQ(t.OnCopyRecord(r), 11u);
  r.graph_node = 8;
  r.bytes = 512;
  EXPECT_EQ(t.OnCopyRecord(r), 12u);
  r.graph_node = 9;  // a node gpuwatch does not know
  EXPECT_EQ(t.OnCopyRecord(r), 0u);
  t.OnGraphLaunchFailed(42, 7);
  t.OnGraphLaunchFailed(42, 8);
  t.Settle();
  const TransfersSnapshot snap = t.Snapshot();
  EXPECT_EQ(snap.unmatched_records, 1u);
  EXPECT_EQ(SiteOf(snap, 11)->all.count, 2u);  // launches 40 (untimed) and 41 (timed)
  EXPECT_EQ(SiteOf(snap, 11)->all.timed_count, 1u);
  EXPECT_EQ(SiteOf(snap, 12)->all.count, 2u);
}

// Pageable findings say which way the bytes went.
TEST(Transfers, PageableFindingsNameTheirDirection) {
  Transfers t;
  for (uint32_t c = 0; c < 3; ++c) {
    CopyCall to_host = Call(c, 5, kLargeCopyBytes);
    to_host.kind = CopyKind::kDeviceToHost;
    to_host.host = HostKind::kPageable;
    t.OnCopyCall(to_host, /*activity=*/false);
  }
  CopyCall from_host = Call(9, 5, kLargeCopyBytes);
  from_host.host = HostKind::kPageable;
  t.OnCopyCall(from_host, /*activity=*/false);
  const TransfersSnapshot snap = t.Snapshot();
  std::vector<TransferFinding> pageable;
  for (const TransferFinding& f : FindTransferIssues(snap.sites, snap.best_gbps)) {
    if (f.type == "pageable") pageable.push_back(f);
  }
  ASSERT_EQ(pageable.size(), 2u);
  EXPECT_EQ(pageable[0].direction, CopyKind::kDeviceToHost);
  EXPECT_EQ(pageable[0].count, 3u);
  EXPECT_EQ(pageable[1].direction, CopyKind::kHostToDevice);
  EXPECT_EQ(pageable[1].count, 1u);
}

}  // namespace
}  // namespace gpuwatch
