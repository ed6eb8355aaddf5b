// tools/live/live_metrics.cc: live states (the JSON interpose/agent/live.cc serves) as
// Prometheus metric families, and their text exposition.
#include "tools/live/live_metrics.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "prometheus/text_serializer.h"

namespace gpuwatch::tools {
namespace {

using json = nlohmann::json;

LiveState Typed(const json& doc) {
  LiveState state;
  std::string problem;
  EXPECT_TRUE(ReadLiveState(doc, &state, &problem)) << problem;
  return state;
}

// A process of the scan that answered with `state`.
LiveProcess Answered(pid_t pid, LiveState state) {
  LiveProcess p;
  p.pid = pid;
  p.state = std::move(state);
  return p;
}

LiveState State() {
  return Typed(json::parse(R"({
    "schema":"gpuwatch-live","version":1,"pid":42,"host":"node1","rank":"3",
    "command":["/opt/bin/train","--epochs","10"],
    "started_unix_ms":1700000000500,"now_unix_ms":1700000060000,"uptime_ns":59500000000,
    "device":{"live_bytes":3407872,"peak_bytes":6553600,"live_count":4},
    "devices":[{"device":0,"live_bytes":3407872,"peak_bytes":6553600,"total_bytes":17179869184},
               {"device":1,"live_bytes":0,"peak_bytes":4096,"total_bytes":null}],
    "kinds":{"device":{"live_bytes":3407872,"peak_bytes":6553600,"live_count":4,"allocs":7,
                       "alloc_bytes":15990784,"frees":3},
             "pinned_host":{"live_bytes":8192,"peak_bytes":8192,"live_count":1,"allocs":1,
                            "alloc_bytes":8192,"frees":0}},
    "counters":{"allocs":8,"frees":3,"ooms":1,"kernel_launches":12,"unknown_frees":0},
    "transfers":[{"direction":"h2d","host":"pageable","count":3,"bytes":786432,
                  "timed_count":2,"duration_ns":1500000}],
    "rates":{"window_ns":0,"device_bytes_per_min":null,"h2d_bytes_per_s":null,"d2h_bytes_per_s":null},
    "history":{"interval_ms":1000,"device_bytes":[]},"marks":3,
    "sites":[{"site":3,"location":"train.cu:52","function":"main","live_bytes":3145728},
             {"site":4,"location":"train.cu:40","function":"main","live_bytes":196608},
             {"site":9,"location":"lib.cu:7","live_bytes":65536},
             {"site":5,"location":"train.cu:40","function":"main","live_bytes":4096}],
    "other_sites":{"count":2,"live_bytes":1000}})"));
}

const prometheus::MetricFamily* Family(const std::vector<prometheus::MetricFamily>& families,
                                       const std::string& name) {
  for (const auto& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// The family `name` when it has exactly `series` series; null, with a failure
// that says which, otherwise.
const prometheus::MetricFamily* FamilyWith(const std::vector<prometheus::MetricFamily>& families,
                                           const std::string& name, size_t series) {
  const auto* f = Family(families, name);
  EXPECT_NE(f, nullptr) << name;
  if (f == nullptr) return nullptr;
  EXPECT_EQ(f->metric.size(), series) << name;
  return f->metric.size() == series ? f : nullptr;
}

std::string Label(const prometheus::ClientMetric& m, const std::string& name) {
  for (const auto& l : m.label) {
    if (l.name == name) return l.value;
  }
  return "<none>";
}

// Series `i` of the family `family`, which has `series` of them: its value
// (the gauge's or the counter's, by the family's type) and some of its labels.
struct ExpectedSeries {
  const char* family;
  size_t series;
  size_t i;
  double value;
  std::vector<std::pair<std::string, std::string>> labels;
};

void ExpectSeries(const std::vector<prometheus::MetricFamily>& families, const ExpectedSeries& e) {
  SCOPED_TRACE(e.family);
  const auto* f = FamilyWith(families, e.family, e.series);
  ASSERT_NE(f, nullptr);
  const prometheus::ClientMetric& m = f->metric[e.i];
  const bool counter = f->type == prometheus::MetricType::Counter;
  EXPECT_DOUBLE_EQ(counter ? m.counter.value : m.gauge.value, e.value);
  for (const auto& [name, value] : e.labels) EXPECT_EQ(Label(m, name), value) << name;
}

TEST(LiveMetrics, EveryFamilyHasHelpAndTheStatesNumbers) {
  LiveScan scan;
  scan.processes.push_back(Answered(42, State()));
  scan.problems.push_back("pid 7: no answer within 1000 ms");
  const auto families = LiveMetrics(scan, {.top = 20});
  for (const auto& f : families) {
    EXPECT_EQ(f.name.rfind("gpuwatch_", 0), 0u) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    const bool counter = f.type == prometheus::MetricType::Counter;
    EXPECT_EQ(counter, f.name.size() > 6 && f.name.substr(f.name.size() - 6) == "_total") << f.name;
  }
  const ExpectedSeries expected[] = {
      {"gpuwatch_process_start_time_seconds",
       1,
       0,
       1700000000.5,
       {{"pid", "42"}, {"command", "train --epochs 10"}, {"rank", "3"}, {"host", "node1"}}},
      {"gpuwatch_device_memory_live_bytes", 2, 0, 3407872, {{"device", "0"}}},
      // The total of device 1 is not known: no series.
      {"gpuwatch_device_memory_total_bytes", 1, 0, 17179869184.0, {}},
      {"gpuwatch_allocations_total", 2, 1, 1, {{"kind", "pinned_host"}}},
      {"gpuwatch_transfer_seconds_total",
       1,
       0,
       0.0015,
       {{"direction", "h2d"}, {"host_memory", "pageable"}}},
      {"gpuwatch_out_of_memory_total", 1, 0, 1, {}},
      {"gpuwatch_marks_total", 1, 0, 3, {}},
      {"gpuwatch_exporter_scrape_problems", 1, 0, 1, {}},
      {"gpuwatch_exporter_processes", 1, 0, 1, {}},
  };
  for (const ExpectedSeries& e : expected) ExpectSeries(families, e);
}

TEST(LiveMetrics, SitesThatReadTheSameAreOneSeriesAndTheRestIsOther) {
  LiveScan scan;
  scan.processes.push_back(Answered(42, State()));
  const auto all = LiveMetrics(scan, {.top = 20});
  const auto* sites = FamilyWith(all, "gpuwatch_site_live_bytes", 4u);
  ASSERT_NE(sites, nullptr);
  EXPECT_EQ(Label(sites->metric[0], "site"), "train.cu:52 (main)");
  EXPECT_EQ(sites->metric[0].gauge.value, 3145728);
  EXPECT_EQ(Label(sites->metric[1], "site"), "train.cu:40 (main)");
  EXPECT_EQ(sites->metric[1].gauge.value, 196608 + 4096);
  EXPECT_EQ(Label(sites->metric[2], "site"), "lib.cu:7");
  EXPECT_EQ(Label(sites->metric[3], "site"), "other");
  EXPECT_EQ(sites->metric[3].gauge.value, 1000);

  // One site: the others join "other".
  const auto families = LiveMetrics(scan, {.top = 1});
  const auto* one = Family(families, "gpuwatch_site_live_bytes");
  ASSERT_EQ(one->metric.size(), 2u);
  EXPECT_EQ(Label(one->metric[1], "site"), "other");
  EXPECT_EQ(one->metric[1].gauge.value, 1000 + 196608 + 4096 + 65536);
}

TEST(LiveMetrics, NoProcessesIsTheExportersOwnMetricsOnly) {
  LiveScan scan;
  const auto families = LiveMetrics(scan, {});
  ASSERT_EQ(families.size(), 2u);
  EXPECT_EQ(prometheus::TextSerializer().Serialize(families),
            "# HELP gpuwatch_exporter_processes Processes under gpuwatch that answered this "
            "scrape.\n"
            "# TYPE gpuwatch_exporter_processes gauge\n"
            "gpuwatch_exporter_processes 0\n"
            "# HELP gpuwatch_exporter_scrape_problems Processes in the live directory that did "
            "not answer this scrape properly.\n"
            "# TYPE gpuwatch_exporter_scrape_problems gauge\n"
            "gpuwatch_exporter_scrape_problems 0\n");
}

TEST(LiveMetrics, AStateWithMissingFieldsGivesWhatItHas) {
  LiveScan scan;
  scan.processes.push_back(
      Answered(7, Typed(json::parse(R"({"schema":"gpuwatch-live","pid":7})"))));
  const auto families = LiveMetrics(scan, {});
  const auto* sites = FamilyWith(families, "gpuwatch_site_live_bytes", 1u);
  ASSERT_NE(sites, nullptr);
  EXPECT_EQ(Label(sites->metric[0], "site"), "other");
  EXPECT_EQ(Label(sites->metric[0], "command"), "");
  EXPECT_EQ(Family(families, "gpuwatch_device_memory_live_bytes"), nullptr);
}

// A device's physical identity on its series, the cgroup's labels on every
// series of the process; none of them where the process did not say (an
// older process's answer, a device the driver said nothing of).
TEST(LiveMetrics, DevicesCarryTheirGpusIdentityAndProcessesTheirContainerAndPod) {
  json doc = json::parse(R"({"schema":"gpuwatch-live","pid":9,"host":"pod-a",
    "devices":[{"device":0,"live_bytes":2048,"peak_bytes":4096,"total_bytes":85899345920,
                "uuid":"GPU-3b7d5e1a-00ff-1234-5678-9abcdef00102","pci_bus_id":"00000000:3B:00.0",
                "gpu":5},
               {"device":1,"live_bytes":1024,"peak_bytes":1024,"total_bytes":null,
                "uuid":null,"pci_bus_id":null,"gpu":null}],
    "cgroup":{"container_id":"abc","systemd_unit":"","pod_uid":"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
              "namespace":"ml","pod":"trainer-0"}})");
  LiveScan scan;
  scan.processes.push_back(Answered(9, Typed(doc)));
  const auto families = LiveMetrics(scan, {});
  const auto* live = FamilyWith(families, "gpuwatch_device_memory_live_bytes", 2u);
  ASSERT_NE(live, nullptr);
  const std::vector<std::pair<std::string, std::string>> first = {
      {"device", "0"},
      {"UUID", "GPU-3b7d5e1a-00ff-1234-5678-9abcdef00102"},
      {"gpu", "5"},
      {"pci_bus_id", "00000000:3B:00.0"},
      {"container_id", "abc"},
      {"systemd_unit", "<none>"},  // "" is no label
      {"pod_uid", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},
      {"namespace", "ml"},
      {"pod", "trainer-0"}};
  for (const auto& [name, value] : first) EXPECT_EQ(Label(live->metric[0], name), value) << name;
  for (const char* name : {"UUID", "gpu", "pci_bus_id"}) {
    EXPECT_EQ(Label(live->metric[1], name), "<none>") << name;
  }
  EXPECT_EQ(Label(live->metric[1], "pod"), "trainer-0");
  const auto* marks = FamilyWith(families, "gpuwatch_marks_total", 1u);
  ASSERT_NE(marks, nullptr);
  EXPECT_EQ(Label(marks->metric[0], "pod_uid"), "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
  EXPECT_EQ(Label(marks->metric[0], "UUID"), "<none>");
  // A value the process made up is escaped and cut.
  doc["cgroup"]["pod"] = std::string(300, 'p') + "\n";
  doc["devices"][0]["uuid"] = "GPU-\x1b[2J";
  LiveScan odd;
  odd.processes.push_back(Answered(9, Typed(doc)));
  const auto odd_families = LiveMetrics(odd, {});
  const auto* odd_live = FamilyWith(odd_families, "gpuwatch_device_memory_live_bytes", 2u);
  ASSERT_NE(odd_live, nullptr);
  EXPECT_EQ(Label(odd_live->metric[0], "pod"), std::string(128, 'p'));
  EXPECT_EQ(Label(odd_live->metric[0], "UUID"), "GPU-\\x1b[2J");
  // A device of the wrong type refuses the answer, as any other field.
  doc["devices"][0]["gpu"] = "5";
  LiveState state;
  std::string problem;
  EXPECT_FALSE(ReadLiveState(doc, &state, &problem));
  EXPECT_EQ(problem, "devices[0].gpu is \"5\", expected a count (an integer)");
}

TEST(LiveMetrics, LabelsAreShortened) {
  EXPECT_EQ(CommandLabel({"/usr/bin/python3", "train.py"}), "python3 train.py");
  const std::string long_arg(100, 'x');
  const std::string label = CommandLabel({"python", long_arg});
  EXPECT_EQ(label.size(), 60u);
  EXPECT_EQ(label, "python " + std::string(50, 'x') + "...");
  // Never half a UTF-8 character: "é" is two bytes.
  std::string accents;
  for (int i = 0; i < 40; ++i) accents += "\xc3\xa9";
  const std::string cut = CommandLabel({"p", accents});
  EXPECT_EQ(cut, "p " + accents.substr(0, 54) + "...");
  const auto at = [](std::string function) {
    LiveSite s;
    s.location = "a.cu:1";
    s.function = std::move(function);
    return s;
  };
  EXPECT_EQ(SiteLabel(at("f")), "a.cu:1 (f)");
  EXPECT_EQ(SiteLabel(at("")), "a.cu:1");
  const std::string site = SiteLabel(at(std::string(300, 'T')));
  EXPECT_EQ(site, "a.cu:1 (" + std::string(77, 'T') + "...)");
}

}  // namespace
}  // namespace gpuwatch::tools
