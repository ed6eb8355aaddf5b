#include "libgpuwatch/record/trace.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "libgpuwatch/base/config.h"
#include "libgpuwatch/record/tracker.h"
#include "libgpuwatch/report/report.h"
#include "libgpuwatch/report/trace_json.h"
#include "nlohmann/json.hpp"

namespace gpuwatch {
namespace {

TEST(Trace, KeepsEveryEventBelowCapacityInOrder) {
  Trace trace(8);
  for (uint64_t i = 0; i < 5; ++i) trace.Memory(100 + i, 0, i * 10);
  const TraceSnapshot s = trace.Snapshot();
  EXPECT_EQ(s.capacity, 8u);
  EXPECT_EQ(s.recorded, 5u);
  EXPECT_EQ(s.dropped, 0u);
  ASSERT_EQ(s.events.size(), 5u);
  for (uint64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(s.events[i].kind, TraceKind::kMemory);
    EXPECT_EQ(s.events[i].time_ns, 100 + i);
    EXPECT_EQ(s.events[i].value, i * 10);
  }
}

TEST(Trace, WrapAroundKeepsTheNewestAndCountsTheOverwritten) {
  Trace trace(8);
  for (uint64_t i = 0; i < 21; ++i) trace.Memory(i, 0, i);
  const TraceSnapshot s = trace.Snapshot();
  EXPECT_EQ(s.recorded, 21u);
  EXPECT_EQ(s.dropped, 13u);
  ASSERT_EQ(s.events.size(), 8u);
  for (uint64_t i = 0; i < 8; ++i) EXPECT_EQ(s.events[i].value, 13 + i);  // 13..20
}

// Memory stores its slot's words itself (trace.h): the same bytes as the
// event Record would store, the device that does not fit an int16_t as -1,
// the slice's and label's words zero, the site, kind and detail in place.
TEST(Trace, AMemoryStepIsStoredAsTheWholeEvent) {
  Trace trace(4);
  // A slot written with other fields first, so that no stale word survives.
  trace.Mark(1, 9, "a label in the slice's words");
  trace.Memory(2, 3, 4);
  trace.Memory(3, 3, 4);
  trace.Memory(4, 3, 4);
  trace.Memory(123, 70000, 456, 0x1fffff);  // the mark's slot, reused
  trace.Memory(124, -1, 0);
  const TraceSnapshot s = trace.Snapshot();
  ASSERT_EQ(s.events.size(), 4u);
  TraceEvent expected{};
  expected.time_ns = 123;
  expected.value = 456;
  expected.site = 0x1fffff;
  expected.device = -1;
  expected.kind = TraceKind::kMemory;
  EXPECT_EQ(std::memcmp(&s.events[2], &expected, sizeof(expected)), 0);
  expected.time_ns = 124;
  expected.value = 0;
  expected.site = 0;
  EXPECT_EQ(std::memcmp(&s.events[3], &expected, sizeof(expected)), 0);
  EXPECT_EQ(s.events[0].device, 3);
  EXPECT_EQ(s.events[0].site, 0u);
}

TEST(Trace, ZeroCapacityRecordsNothing) {
  Trace trace(0);
  trace.Memory(1, 0, 1);
  const TraceSnapshot s = trace.Snapshot();
  EXPECT_EQ(s.capacity, 0u);
  EXPECT_EQ(s.recorded, 0u);
  EXPECT_TRUE(s.events.empty());
}

TEST(Trace, EventsKeepTheirFields) {
  Trace trace(16);
  const char* name = trace.InternName("_Z4FillILi4EEvPf");
  trace.Copy(10, 30, 1, 7, 4096, CopyKind::kHostToDevice, HostKind::kPinned, 42);
  trace.Kernel(40, 45, 0, 13, name);
  trace.Mark(50, 3, "a label longer than the thirty-two bytes kept");
  trace.Peak(60, 1 << 20);
  trace.Oom(70, 2, 1 << 30, MemKind::kPool, 9);
  const TraceSnapshot s = trace.Snapshot();
  ASSERT_EQ(s.events.size(), 5u);
  const TraceEvent& copy = s.events[0];
  EXPECT_EQ(copy.kind, TraceKind::kCopy);
  EXPECT_EQ(copy.time_ns, 10u);
  EXPECT_EQ(copy.slice.end_ns, 30u);
  EXPECT_EQ(copy.device, 1);
  EXPECT_EQ(copy.slice.stream, 7u);
  EXPECT_EQ(copy.value, 4096u);
  EXPECT_EQ(copy.site, 42u);
  EXPECT_EQ(copy.detail & 0xF, static_cast<int>(CopyKind::kHostToDevice));
  EXPECT_EQ(copy.detail >> 4, static_cast<int>(HostKind::kPinned));
  EXPECT_STREQ(s.events[1].slice.name, "_Z4FillILi4EEvPf");
  EXPECT_EQ(s.events[2].value, 3u);
  EXPECT_EQ(std::string(s.events[2].label), "a label longer than the thirty-");  // 31 bytes
  EXPECT_EQ(s.events[3].value, uint64_t{1} << 20);
  EXPECT_EQ(s.events[4].device, 2);
  EXPECT_EQ(s.events[4].detail, static_cast<int>(MemKind::kPool));
}

TEST(Trace, InternNameCopiesOncePerPointer) {
  Trace trace(4);
  char buffer[] = "kernel_a";
  const char* first = trace.InternName(buffer);
  EXPECT_NE(first, buffer);
  EXPECT_STREQ(first, "kernel_a");
  EXPECT_EQ(trace.InternName(buffer), first);
  std::strcpy(buffer, "kernel_b");  // the copy does not follow the original
  EXPECT_STREQ(trace.InternName(buffer), "kernel_a");
  EXPECT_EQ(trace.InternName(nullptr), nullptr);
}

TEST(Trace, GpuClockOffsetConvertsAndClampsAtZero) {
  Trace trace(4);
  trace.SetGpuClockOffset(-1000000000);  // CUPTI's clock is 1 s ahead of the tracker's
  EXPECT_EQ(trace.FromGpuClock(1000002000), 2000u);
  EXPECT_EQ(trace.FromGpuClock(5), 0u);
}

// `threads` threads record at once; thread t records the memory events
// (time i, device t, bytes i) for i below `per_thread`.
void RecordFromThreads(Trace& trace, int threads, uint64_t per_thread) {
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&trace, t, per_thread] {
      for (uint64_t i = 0; i < per_thread; ++i) trace.Memory(i, t, i);
    });
  }
  for (std::thread& w : workers) w.join();
}

// Four threads record at once: every event is there exactly once.
TEST(Trace, ConcurrentWritersLoseNothingBelowCapacity) {
  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 25000;
  Trace trace(kThreads * kPerThread);
  RecordFromThreads(trace, kThreads, kPerThread);
  const TraceSnapshot s = trace.Snapshot();
  EXPECT_EQ(s.recorded, kThreads * kPerThread);
  EXPECT_EQ(s.dropped, 0u);
  ASSERT_EQ(s.events.size(), kThreads * kPerThread);
  std::vector<std::set<uint64_t>> seen(kThreads);
  for (const TraceEvent& e : s.events) {
    ASSERT_GE(e.device, 0);
    ASSERT_LT(e.device, kThreads);
    EXPECT_EQ(e.time_ns, e.value);  // not torn
    seen[e.device].insert(e.value);
  }
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(seen[t].size(), kPerThread) << "thread " << t;
}

// Four threads overflow a small ring: what is kept plus what is dropped is
// exactly what was recorded, and every kept event is whole.
TEST(Trace, ConcurrentWritersOverflowingKeepCountsExact) {
  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 20000;
  Trace trace(1024);
  RecordFromThreads(trace, kThreads, kPerThread);
  const TraceSnapshot s = trace.Snapshot();
  EXPECT_EQ(s.recorded, kThreads * kPerThread);
  EXPECT_LE(s.events.size(), 1024u);
  EXPECT_EQ(s.dropped + s.events.size(), s.recorded);
  for (const TraceEvent& e : s.events) EXPECT_EQ(e.time_ns, e.value);
}

AllocEvent Alloc(uint64_t address, uint64_t size, int device, MemKind kind = MemKind::kDevice) {
  return {.address = address, .size = size, .kind = kind, .device = device};
}

TEST(Trace, TrackerRecordsLiveBytesPerDeviceAndPeaks) {
  Trace trace(64);
  Tracker tracker;
  tracker.SetTrace(&trace);
  tracker.OnAlloc(Alloc(0x1000, 100, 0));
  tracker.OnAlloc(Alloc(0x2000, 300, 1));
  tracker.OnAlloc(Alloc(0x3000, 50, 0, MemKind::kPinnedHost));  // host: no device counter
  tracker.OnFree(0x1000);
  tracker.OnAlloc(Alloc(0x4000, 20, 1, MemKind::kPool));
  const TrackerSnapshot snap = tracker.Snapshot();
  EXPECT_EQ(snap.device_bytes_by_device[0], 0u);
  EXPECT_EQ(snap.device_peak_bytes_by_device[0], 100u);
  EXPECT_EQ(snap.device_bytes_by_device[1], 320u);
  EXPECT_EQ(snap.device_peak_bytes_by_device[1], 320u);

  std::vector<std::pair<int, uint64_t>> memory;
  std::vector<uint64_t> peaks;
  for (const TraceEvent& e : trace.Snapshot().events) {
    if (e.kind == TraceKind::kMemory) memory.emplace_back(e.device, e.value);
    if (e.kind == TraceKind::kPeak) peaks.push_back(e.value);
  }
  const std::vector<std::pair<int, uint64_t>> want = {{0, 100}, {1, 300}, {0, 0}, {1, 320}};
  EXPECT_EQ(memory, want);
  // The device total rose to 100, 400 and 420 (the free left 300 + 20 < 400).
  EXPECT_EQ(peaks, (std::vector<uint64_t>{100, 400}));
}

TEST(Trace, ReportSectionIsCompact) {
  Trace trace(4);
  Tracker tracker;
  tracker.SetTrace(&trace);
  tracker.OnAlloc(Alloc(0x1000, 4096, 0));
  trace.Copy(10, 30, 0, 7, 4096, CopyKind::kDeviceToHost, HostKind::kPageable, 0);
  trace.Mark(40, 1, "step");
  const TraceSnapshot t = trace.Snapshot();  // mem, peak, copy, mark
  SiteResolver sites(nullptr);
  const nlohmann::json j = ReportTraceJson(ReportTraceOf(t, tracker.Snapshot(), &sites));
  EXPECT_EQ(j["capacity"], 4);
  EXPECT_EQ(j["recorded"], 4);
  EXPECT_EQ(j["dropped"], 0);
  EXPECT_EQ(j["devices"],
            nlohmann::json::parse(R"([{"device":0,"live_bytes":4096,"peak_bytes":4096}])"));
  ASSERT_EQ(j["events"].size(), 4u);
  // The allocation's site last (its stack id, 0 here: no stack).
  EXPECT_EQ(j["events"][0],
            nlohmann::json::parse(R"(["mem", )" + std::to_string(t.events[0].time_ns) +
                                  R"(, 0, 4096, 0])"));
  EXPECT_EQ(j["events"][2],
            nlohmann::json::parse(R"(["copy", 10, 30, 0, 7, 4096, "d2h", "pageable", 0])"));
  EXPECT_EQ(j["events"][3], nlohmann::json::parse(R"(["mark", 40, 1, "step"])"));
  EXPECT_EQ(j["sites"], nlohmann::json::parse(R"([{"site":0,"location":"<no stack>"}])"));
}

// Which GPU each device is, as the background thread published it: written
// where known (device 1 here; device 0 knows only its UUID), absent where
// not, and read back as written.
TEST(Trace, DevicesNameTheirGpuWhereKnownAndReadBack) {
  Tracker tracker;
  for (int device = 0; device < 2; ++device) {
    tracker.OnAlloc(Alloc(0x1000 + 0x1000 * device, 4096 >> (3 * device), device));
  }
  const TraceSnapshot empty = Trace(1).Snapshot();  // the devices come from the tracker
  std::array<DeviceIdentity, kMaxTrackedDevices> identity{};
  identity[0].uuid = "GPU-67777369-6d2d-6465-7669-63652d303200";
  identity[1] = {"GPU-67777369-6d2d-6465-7669-63652d303300", "00000000:04:00.0", 3};
  SiteResolver sites(nullptr);
  const ReportTrace written = ReportTraceOf(empty, tracker.Snapshot(), &sites, nullptr, &identity);
  const nlohmann::json j = ReportTraceJson(written);
  EXPECT_EQ(j["devices"], nlohmann::json::parse(R"([
    {"device":0,"live_bytes":4096,"peak_bytes":4096,
     "uuid":"GPU-67777369-6d2d-6465-7669-63652d303200"},
    {"device":1,"live_bytes":512,"peak_bytes":512,
     "uuid":"GPU-67777369-6d2d-6465-7669-63652d303300","pci_bus_id":"00000000:04:00.0","gpu":3}
  ])"))
      << j["devices"].dump();
  ReportTrace read;
  ReportFieldReader r;
  ASSERT_TRUE(ReadReportTrace(j, &read, &r)) << r.problem();
  EXPECT_EQ(read.devices, written.devices);
  EXPECT_EQ(read.devices[0].gpu, -1);
  EXPECT_EQ(read.devices[1].gpu, 3);
  // Without a record, no device names a GPU.
  const nlohmann::json none = ReportTraceJson(ReportTraceOf(empty, tracker.Snapshot(), &sites));
  EXPECT_FALSE(none["devices"][1].contains("uuid")) << none["devices"].dump();
}

TEST(Trace, ConfigReadsTraceEvents) {
  std::vector<std::string> warnings;
  auto parse = [&](const char* value) {
    warnings.clear();
    return ParseConfig(
        [&](const char* name) {
          return std::strcmp(name, "GPUWATCH_TRACE_EVENTS") == 0 ? value : nullptr;
        },
        {"GPUWATCH_TRACE_EVENTS"}, &warnings);
  };
  EXPECT_EQ(parse("0").trace_events, 0);
  EXPECT_EQ(parse("1048576").trace_events, 1048576);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(parse("many").trace_events, 65536);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "ignoring GPUWATCH_TRACE_EVENTS=\"many\" (expected a number of events from 0 (off) to "
            "1048576); using 65536");
  EXPECT_EQ(parse("1048577").trace_events, 65536);
  EXPECT_EQ(warnings.size(), 1u);
}

}  // namespace
}  // namespace gpuwatch
