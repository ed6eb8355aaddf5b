// End-to-end tests of the event trace and `gpuwatch report --format perfetto`:
// tests/e2e/programs/trace_events.cu on two simulated devices, with modelled
// copy and kernel times chosen so that every duration is exact:
//   1 MiB pageable H2D: 1,000 + 2^20 / 16 = 66,536 ns
//   1 MiB pinned H2D:   1,000 + 2^20 / 32 = 33,768 ns
//   256 KiB pageable D2H: 1,000 + 2^18 / 16 = 17,384 ns
//   a kernel: 7,000 ns
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

constexpr int kIterations = 3;

std::string At(const std::string& name) {
  return ProgramLine("trace_events.cu", "// TRACE:" + name);
}

// Runs the program; returns its exit report, and the path in `path`.
json RunProgram(const ScopedTempDir& dir, const std::map<std::string, std::string>& extra,
                std::string* path) {
  *path = dir.path() + "/report.json";
  std::map<std::string, std::string> env = PreloadEnv(*path, {{"GPUWATCH_SUMMARY", "0"},
                                                              {"GPUWATCH_KERNEL_TIMING", "1"},
                                                              {"GWSIM_DEVICE_COUNT", "2"},
                                                              {"GWSIM_COPY_LATENCY_NS", "1000"},
                                                              {"GWSIM_BW_PAGEABLE", "16"},
                                                              {"GWSIM_BW_PINNED", "32"},
                                                              {"GWSIM_KERNEL_NS", "7000"}});
  for (const auto& [k, v] : extra) env[k] = v;
  const ProcessResult r = RunProcess({kPrograms + "/trace_events"}, env, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "trace_events: done\n");
  return ReadJson(*path);
}

json Perfetto(const ScopedTempDir& dir, const std::string& report) {
  const std::string out = dir.path() + "/trace.json";
  const ProcessResult r =
      RunProcess({kCli, "report", report, "--format", "perfetto", "-o", out}, {}, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return ReadJson(out);
}

std::vector<json> Events(const json& trace, const std::string& ph, const std::string& cat = "") {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == ph && (cat.empty() || e.value("cat", "") == cat)) out.push_back(e);
  }
  return out;
}

// Trace-event times are microseconds; back to whole nanoseconds.
int64_t Ns(const json& micros) { return std::llround(micros.get<double>() * 1000.0); }

std::vector<std::string> ThreadNames(const json& trace) {
  std::vector<std::string> names;
  for (const json& e : Events(trace, "M")) {
    if (e["name"] == "thread_name") names.push_back(e["args"]["name"]);
  }
  return names;
}

TEST(EventTrace, ReportHasTheEventsInOrder) {
  ScopedTempDir dir;
  std::string path;
  const json report = RunProgram(dir, {}, &path);
  ASSERT_TRUE(report.is_object());
  const json& trace = report["trace"];
  ASSERT_TRUE(trace.is_object()) << report.dump(1);
  EXPECT_EQ(trace["capacity"], 65536);
  EXPECT_EQ(trace["dropped"], 0);
  // 8 memory changes (base, 3 x scratch and its free, device 1), 3 peaks
  // (1, 3 and 5 MiB), 9 copies, 6 kernels, 3 marks, 1 OOM.
  EXPECT_EQ(trace["recorded"], 30);
  EXPECT_EQ(trace["events"].size(), 30u);
  // Which GPU each device is, where the background thread had learnt it
  // before the exit (at its one-second tick after the device first held
  // memory: whether one came in time is the machine's timing): the right one.
  json devices = trace["devices"];
  ASSERT_EQ(devices.size(), 2u) << devices.dump();
  for (int d = 0; d < 2; ++d) {
    json& device = devices[d];
    if (device.contains("uuid")) {
      // "gwsim-device-0<d>" in hex, padded with zeros: ...2d 30 3<d> 00.
      EXPECT_EQ(device["uuid"], "GPU-67777369-6d2d-6465-7669-63652d303" + std::to_string(d) + "00");
      EXPECT_EQ(device["pci_bus_id"], "00000000:0" + std::to_string(d + 1) + ":00.0");
      EXPECT_EQ(device["gpu"], d);
    }
    for (const char* key : {"uuid", "pci_bus_id", "gpu"}) device.erase(key);
  }
  EXPECT_EQ(devices, json::parse(R"([
      {"device": 0, "live_bytes": 1048576, "peak_bytes": 3145728},
      {"device": 1, "live_bytes": 4194304, "peak_bytes": 4194304}])"));
  std::vector<json> memory;
  for (const json& e : trace["events"]) {
    if (e[0] == "mem") memory.push_back(json::array({e[2], e[3]}));
  }
  const json want = json::parse(R"([[0, 1048576], [0, 3145728], [0, 1048576], [0, 3145728],
      [0, 1048576], [0, 3145728], [0, 1048576], [1, 4194304]])");
  EXPECT_EQ(json(memory), want);
}

TEST(EventTrace, PerfettoHasCountersSlicesAndInstants) {
  ScopedTempDir dir;
  std::string path;
  const json report = RunProgram(dir, {}, &path);
  ASSERT_TRUE(report.is_object());
  const json trace = Perfetto(dir, path);
  ASSERT_TRUE(trace.is_object());
  ASSERT_TRUE(trace["traceEvents"].is_array());
  EXPECT_EQ(trace["otherData"]["source"], "trace");
  const uint64_t pid = report["process"]["pid"];

  // One counter track per device; its last value is what was live at exit.
  std::map<std::string, std::vector<json>> counters;
  for (const json& c : Events(trace, "C")) {
    EXPECT_EQ(c["pid"], pid);
    counters[c["name"]].push_back(c);
  }
  ASSERT_EQ(counters.size(), 2u);
  ASSERT_EQ(counters["device 0 memory"].size(), 7u);
  ASSERT_EQ(counters["device 1 memory"].size(), 1u);
  for (auto& [name, list] : counters) {
    std::stable_sort(list.begin(), list.end(),
                     [](const json& a, const json& b) { return Ns(a["ts"]) < Ns(b["ts"]); });
  }
  EXPECT_EQ(counters["device 0 memory"].back()["args"]["bytes"], kMiB);
  EXPECT_EQ(counters["device 1 memory"].back()["args"]["bytes"], 4 * kMiB);
  EXPECT_EQ(kMiB + 4 * kMiB, report["totals"]["device_current_bytes"]);

  // Every timed copy is a slice with its exact GPU duration.
  const std::vector<json> copies = Events(trace, "X", "copy");
  ASSERT_EQ(copies.size(), 9u);
  uint64_t timed = 0;
  for (const json& t : report["transfers"]["totals"]) timed += t["timed_count"].get<uint64_t>();
  EXPECT_EQ(copies.size(), timed);
  std::map<std::string, std::vector<int64_t>> durations;  // name -> ns
  std::map<std::string, std::string> locations;
  for (const json& c : copies) {
    durations[c["name"]].push_back(Ns(c["dur"]));
    locations[c["name"]] = c["args"]["location"];
    EXPECT_EQ(c["args"]["duration_ns"], Ns(c["dur"]));
  }
  EXPECT_EQ(durations["H2D 1.0 MiB pageable"], std::vector<int64_t>(3, 66536));
  EXPECT_EQ(durations["H2D 1.0 MiB pinned"], std::vector<int64_t>(3, 33768));
  EXPECT_EQ(durations["D2H 256.0 KiB pageable"], std::vector<int64_t>(3, 17384));
  EXPECT_EQ(locations["H2D 1.0 MiB pageable"], At("h2d"));
  EXPECT_EQ(locations["H2D 1.0 MiB pinned"], At("pinned"));
  EXPECT_EQ(locations["D2H 256.0 KiB pageable"], At("d2h"));
  EXPECT_DOUBLE_EQ(copies[0]["args"]["gbps"].get<double>(), 1048576.0 / 66536.0);

  // Every launch is a kernel slice.
  const std::vector<json> kernels = Events(trace, "X", "kernel");
  EXPECT_EQ(kernels.size(), report["totals"]["kernel_launches"].get<size_t>());
  ASSERT_EQ(kernels.size(), 2u * kIterations);
  for (const json& k : kernels) {
    EXPECT_EQ(k["name"], "(anonymous namespace)::Touch(char*)");
    EXPECT_EQ(Ns(k["dur"]), 7000);
  }
  // Tracks: copies on the legacy stream (7) and the created one (13), kernels on 13.
  const std::vector<std::string> threads = ThreadNames(trace);
  for (const char* name : {"marks, peak, OOMs", "copies (device 0, stream 7)",
                           "copies (device 0, stream 13)", "kernels (device 0, stream 13)"}) {
    EXPECT_NE(std::find(threads.begin(), threads.end(), name), threads.end()) << name;
  }

  // Marks, the peak and the OOM as instants.
  std::vector<std::string> marks;
  for (const json& m : Events(trace, "i", "mark")) marks.push_back(m["name"]);
  EXPECT_EQ(marks, (std::vector<std::string>{"step 1", "step 2", "step 3"}));
  const std::vector<json> peak = Events(trace, "i", "peak");
  ASSERT_EQ(peak.size(), 1u);
  EXPECT_EQ(peak[0]["args"]["device_bytes"], report["peak"]["device_bytes"]);
  EXPECT_EQ(peak[0]["args"]["device_bytes"], 5 * kMiB);
  const std::vector<json> oom = Events(trace, "i", "oom");
  ASSERT_EQ(oom.size(), 1u);
  EXPECT_EQ(oom[0]["args"]["bytes"], 64ULL << 30);
  EXPECT_EQ(oom[0]["args"]["location"], At("oom"));
  EXPECT_EQ(oom[0]["name"], "OOM: 64.0 GiB device at " + At("oom"));
}

TEST(EventTrace, SmallRingKeepsTheNewestAndCountsTheDropped) {
  ScopedTempDir dir;
  std::string path;
  const json report = RunProgram(dir, {{"GPUWATCH_TRACE_EVENTS", "4"}}, &path);
  ASSERT_TRUE(report.is_object());
  const json& trace = report["trace"];
  EXPECT_EQ(trace["capacity"], 4);
  EXPECT_EQ(trace["recorded"], 30);
  EXPECT_EQ(trace["dropped"], 26);
  ASSERT_EQ(trace["events"].size(), 4u);
  // Activity records are recorded when CUPTI delivers them, here at the exit
  // flush: the newest four are the last iteration's pinned copy, its two
  // kernels and its D2H copy.
  const json& e = trace["events"];
  EXPECT_EQ(e[0][0], "copy");
  EXPECT_EQ(e[0][6], "h2d");
  EXPECT_EQ(e[0][7], "pinned");
  EXPECT_EQ(e[1][0], "kernel");
  EXPECT_EQ(e[2][0], "kernel");
  EXPECT_EQ(e[3][0], "copy");
  EXPECT_EQ(e[3][6], "d2h");
  EXPECT_EQ(e[3][2].get<uint64_t>() - e[3][1].get<uint64_t>(), 17384u);

  const json perfetto = Perfetto(dir, path);
  const std::vector<json> dropped = Events(perfetto, "i", "gpuwatch");
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0]["name"], "trace: 26 older events dropped");
  EXPECT_EQ(Events(perfetto, "X").size(), 4u);
}

TEST(EventTrace, WithoutATraceTheCounterComesFromTheTimeline) {
  ScopedTempDir dir;
  std::string path;
  // No periodic samples (a slow run could take one): the marks' samples only.
  const json report =
      RunProgram(dir, {{"GPUWATCH_TRACE_EVENTS", "0"}, {"GPUWATCH_SAMPLE_MS", "0"}}, &path);
  ASSERT_TRUE(report.is_object());
  EXPECT_FALSE(report.contains("trace"));
  const json trace = Perfetto(dir, path);
  EXPECT_EQ(trace["otherData"]["source"], "timeline samples (the report has no trace section)");
  // The three marks' samples: device 0 holds base (1 MiB) after each step.
  const std::vector<json> counters = Events(trace, "C");
  ASSERT_EQ(counters.size(), 3u);
  for (const json& c : counters) {
    EXPECT_EQ(c["name"], "device memory (sampled)");
    EXPECT_EQ(c["args"]["bytes"], kMiB);
  }
  std::vector<std::string> marks;
  for (const json& m : Events(trace, "i", "mark")) marks.push_back(m["name"]);
  EXPECT_EQ(marks, (std::vector<std::string>{"step 1", "step 2", "step 3"}));
  const std::vector<json> notice = Events(trace, "i", "gpuwatch");
  ASSERT_EQ(notice.size(), 1u);
  EXPECT_EQ(notice[0]["name"],
            "no event trace in this report: memory from timeline samples, all devices");
  const std::vector<json> peak = Events(trace, "i", "peak");
  ASSERT_EQ(peak.size(), 1u);
  EXPECT_EQ(peak[0]["args"]["device_bytes"], 5 * kMiB);
  EXPECT_TRUE(Events(trace, "X").empty());
}

// The exit report is handed to its file while its trace is made (64 KiB at
// a time, the head first): a trace of thousands of events is all in the
// file, which is one document, and the teardown time goes into the slot the
// head kept, written before the trace was made.
TEST(EventTrace, AnExitReportStreamedWithItsTraceHasItAllAndItsTeardownTime) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  std::map<std::string, std::string> env =
      PreloadEnv(out, {{"GPUWATCH_SUMMARY", "0"}, {"GWSIM_EXIT_CONTEXT_DESTROY", "1"}});
  // One thread, 5,000 allocations and frees: 10,000 memory events (and the
  // snapshots it asks for meanwhile, in files of their own).
  const ProcessResult r = RunProcess({kPrograms + "/stress", "1", "5000"}, env, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = ReadFile(out);
  EXPECT_GT(text.size(), size_t{4} << 16);
  const json report = json::parse(text, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(report.is_object()) << text.substr(0, 200);
  const json& trace = report["trace"];
  EXPECT_EQ(trace["dropped"], 0);
  EXPECT_GE(trace["recorded"].get<uint64_t>(), 10000u);
  EXPECT_EQ(trace["events"].size(), trace["recorded"].get<size_t>());
  EXPECT_EQ(report["totals"]["kinds"]["device"]["allocs"], 5000);
  const json& l = report["lifecycle"];
  ASSERT_FALSE(l["teardown_ns"].is_null()) << l.dump(1);
  EXPECT_GT(l["teardown_ns"].get<uint64_t>(), 0u);
  // The slot is in the head, before the frame table and the trace.
  EXPECT_LT(text.find("\"teardown_ns\""), text.find("\"frame_table\""));
}

// A report whose trace is full (GPUWATCH_TRACE_EVENTS' largest ring,
// 1,048,576 events, ~32 MB) is read by every command in memory in
// proportion to what it needs, under a data limit (`ulimit -d`) that makes a
// command over it fail: `report`, `check`, `diff` and `merge` need no trace
// and read the file in little more than its size (they held the whole trace
// as JSON: ~7 times the file); `--format perfetto` and `json` read the
// events into their structs and write their output as they make it (they
// held the events as a document: ~12 times the file, and perfetto each
// output event as a JSON object before that: ~40 times).
TEST(EventTrace, AFullTraceIsReadInMemoryInProportionToWhatACommandNeeds) {
#ifdef GPUWATCH_TEST_SANITIZER_RUNTIME
  GTEST_SKIP() << "a sanitizer's shadow memory and quarantine are beyond a data limit";
#endif
  ScopedTempDir dir;
  std::string path;
  json report = RunProgram(dir, {}, &path);
  ASSERT_TRUE(report.is_object());
  constexpr int kEvents = 1 << 20;
  // The device's memory after each allocation and free of a long run, in
  // place of the program's own events; the text is made directly (a JSON
  // array of a million arrays would take the test seconds).
  const int64_t start = report["process"]["elapsed_ns"];
  report["trace"]["events"] = "@EVENTS@";
  report["trace"]["recorded"] = kEvents;
  std::string events = "[";
  for (int i = 0; i < kEvents; ++i) {
    if (i != 0) events += ',';
    events +=
        "[\"mem\"," + std::to_string(start + i) + ",0," + std::to_string((i % 64) << 12) + "]";
  }
  events += ']';
  std::string text = report.dump();
  text.replace(text.find("\"@EVENTS@\""), 10, events);
  const std::string big = dir.path() + "/big.json";
  {
    std::ofstream out(big, std::ios::binary);
    out << text;
  }
  const uint64_t size = text.size();
  ASSERT_GT(size, 20u << 20);

  const auto limited = [&](uint64_t limit, std::vector<std::string> args) {
    std::vector<std::string> argv = {"/bin/sh", "-c",
                                     "ulimit -d " + std::to_string(limit >> 10) + " && exec \"$@\"",
                                     "sh", kCli};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, {}, dir.path());
  };
  const uint64_t reading = 2 * size + (32u << 20);
  for (const std::vector<std::string>& args : {std::vector<std::string>{"report", big},
                                               {"check", big, "--max-leak", "1GiB"},
                                               {"diff", big, big},
                                               {"merge", big, "-o", dir.path() + "/merged.json"}}) {
    const ProcessResult r = limited(reading, args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
  }
  const std::string perfetto = dir.path() + "/trace.json";
  const ProcessResult r =
      limited(6 * size, {"report", big, "--format", "perfetto", "-o", perfetto});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string as_json = dir.path() + "/as.json";
  const ProcessResult j = limited(6 * size, {"report", big, "--format", "json", "-o", as_json});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(ReadJson(as_json)["trace"]["events"].size(), static_cast<size_t>(kEvents));
  const json trace = ReadJson(perfetto);
  ASSERT_TRUE(trace.is_object());
  // Each memory event is a counter.
  EXPECT_EQ(Events(trace, "C").size(), static_cast<size_t>(kEvents));
}

}  // namespace
}  // namespace gpuwatch::testing
