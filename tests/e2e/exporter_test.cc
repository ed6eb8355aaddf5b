// End-to-end tests of `gpuwatch exporter` (tools/commands/exporter_command.cc): a
// training loop that leaks 1 MiB per step runs under gpuwatch, the exporter
// serves its live state, and a real Prometheus server (Debian's
// /usr/bin/prometheus) scrapes it every second: the leaking site's exact
// bytes, its growth, and its series going stale when the program ends. Also
// the textfile mode, read by promtool, and the exit status 2 of a bad
// --listen or a port in use. Skipped when prometheus or promtool is missing
// (scripts/install-deps.sh installs them).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "libgpuwatch/base/live_dir.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"
#include "tests/e2e/peers.h"
#include "tests/e2e/scrape.h"

namespace gpuwatch::testing {
namespace {

using Stepper = LiveSteps;

std::string LeakSite() { return ProgramLine("live_steps.cu", "LIVE:leak") + " (main)"; }

// live_steps under gpuwatch, `gpuwatch exporter` serving its live directory,
// and a Prometheus server scraping the exporter every second.
class ExporterScraped : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT(kPrometheus);
    stepper.emplace(dir, live);
    ASSERT_TRUE(stepper->ready()) << stepper->err();
    server.emplace(live);
    ASSERT_NE(server->port(), 0) << server->first_line();
    prometheus.emplace(dir, server->port());
    ASSERT_TRUE(prometheus->ready()) << prometheus->log();
  }
  // Three steps scraped apart from each other, so that rates and
  // derivatives have two different samples: a step, then the next once its
  // mark is scraped.
  void StepsScrapedApart() {
    const std::string marks =
        "gpuwatch_marks_total{pid=\"" + std::to_string(stepper->pid()) + "\"}";
    for (int step = 1; step <= 3; ++step) {
      ASSERT_TRUE(stepper->Step(1));
      EXPECT_TRUE(PollUntil([&] { return OnlyValue(prometheus->Query(marks)) == step; }, 60000))
          << prometheus->Query(marks).dump();
    }
  }
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  std::optional<Stepper> stepper;
  std::optional<Exporter> server;
  std::optional<Prometheus> prometheus;
};

TEST_F(ExporterScraped, PrometheusScrapesTheExactBytesTheGrowthAndTheEnd) {
  Stepper& steps = *stepper;
  Exporter& exporter = *server;
  Prometheus& prom = *prometheus;
  EXPECT_EQ(exporter.first_line(), "gpuwatch exporter: serving /metrics on http://127.0.0.1:" +
                                       std::to_string(exporter.port()) + " for the processes in " +
                                       live);

  // The example rules load in a real server: the alerts on one process, and
  // the recording rules and the alert per GPU, node and pod.
  const json rules = prom.Get("/api/v1/rules");
  std::vector<std::string> alerts;
  for (const json& group : rules["data"]["groups"]) {
    for (const json& rule : group["rules"]) alerts.push_back(rule["name"]);
  }
  EXPECT_EQ(alerts,
            (std::vector<std::string>{
                "GpuwatchSiteMemoryGrowing", "GpuwatchDeviceMemoryNearlyFull",
                "GpuwatchPageableCopiesDominate", "GpuwatchDeviceMemoryHeldWhileInactive",
                "uuid:gpuwatch_device_memory_live_bytes:sum",
                "uuid:gpuwatch_device_memory_total_bytes:max", "uuid:gpuwatch_processes:count",
                "instance:gpuwatch_process_device_memory_bytes:sum",
                "pod:gpuwatch_process_device_memory_bytes:sum", "GpuwatchGpuMemoryNearlyFull"}))
      << rules.dump();

  const std::string pid = std::to_string(steps.pid());
  const std::string site =
      "gpuwatch_site_live_bytes{pid=\"" + pid + "\",site=\"" + LeakSite() + "\"}";
  ASSERT_TRUE(steps.Step(3));
  EXPECT_TRUE(PollUntil([&] { return OnlyValue(prom.Query(site)) == 3.0 * kMiB; }, 60000))
      << prom.Query(site).dump() << prom.log();
  // The rest of the process, as Prometheus stored it: the 256 KiB staging
  // buffer, three pageable copies of 256 KiB, three marks; a scrape with no
  // problem. A scrape on a busy machine may miss the 1 s that Prometheus
  // and the exporter give it (its series then go stale until the next):
  // until all of them read so at once (a hang guard of 60 s).
  const std::vector<std::pair<std::string, double>> expected = {
      {"gpuwatch_device_memory_live_bytes{pid=\"" + pid + "\"}", 3.0 * kMiB + 256.0 * kKiB},
      {"gpuwatch_transfer_bytes_total{pid=\"" + pid +
           "\",direction=\"h2d\",host_memory=\"pageable\"}",
       3.0 * 256 * kKiB},
      {"gpuwatch_marks_total{pid=\"" + pid + "\"}", 3.0},
      {"gpuwatch_site_live_bytes{pid=\"" + pid + "\",site=\"other\"}", 0.0},
      {"gpuwatch_exporter_scrape_problems", 0.0},
      {"up{job=\"gpuwatch\"}", 1.0}};
  std::string last;
  EXPECT_TRUE(PollUntil(
      [&] {
        for (const auto& [query, value] : expected) {
          const json result = prom.Query(query);
          if (OnlyValue(result) != value) {
            last = query + " = " + result.dump();
            return false;
          }
        }
        return true;
      },
      60000))
      << last;
  const json labels = prom.Query(site)[0]["metric"];
  EXPECT_EQ(labels["command"], "live_steps") << labels.dump();
  EXPECT_EQ(labels["host"].get<std::string>().empty(), false) << labels.dump();

  // Two more steps: the series rises, and its derivative is positive.
  ASSERT_TRUE(steps.Step(2));
  const std::string growth = "deriv(" + site + "[30s])";
  EXPECT_TRUE(PollUntil(
      [&] {
        return OnlyValue(prom.Query(site)) == 5.0 * kMiB && OnlyValue(prom.Query(growth)) > 0;
      },
      60000))
      << prom.Query(growth).dump();

  // The program ends: its series go stale, the exporter's stay.
  const ProcessResult r = steps.Finish();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(PollUntil(
      [&] {
        const json now = prom.Query("gpuwatch_site_live_bytes{pid=\"" + pid + "\"}");
        return now.is_array() && now.empty() &&
               OnlyValue(prom.Query("gpuwatch_exporter_processes")) == 0.0;
      },
      60000))
      << prom.Query(site).dump() << prom.Query("gpuwatch_exporter_processes").dump();

  const ProcessResult stopped = exporter.Stop();
  EXPECT_FALSE(stopped.signaled) << stopped.signal;
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
}

// The queries of docs/prometheus.md's PromQL section: each one is the lines
// after a comment, up to the next comment or the block's end.
std::vector<std::pair<std::string, std::string>> DocsQueries() {
  std::vector<std::pair<std::string, std::string>> queries;  // (comment, query)
  const std::string doc = ReadFile(kSourceDir + "/docs/prometheus.md");
  const size_t begin = doc.find("```promql\n");
  const size_t end = doc.find("```\n", begin + 10);
  if (begin == std::string::npos || end == std::string::npos) return queries;
  std::istringstream lines(doc.substr(begin + 10, end - begin - 10));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("# ", 0) == 0) {
      queries.emplace_back(line.substr(2), "");
    } else if (!line.empty() && !queries.empty()) {
      std::string& query = queries.back().second;
      // One query per line; a line indented under it continues it.
      if (!query.empty() && line[0] != ' ') queries.emplace_back(queries.back().first, "");
      queries.back().second += (queries.back().second.empty() ? "" : "\n") + line;
    }
  }
  return queries;
}

// Every query the docs give runs in a real server and, where the process
// has what it asks about (growth, copies, marks), returns series: a query
// whose sides share no labels returns nothing, silently (issue 36).
TEST_F(ExporterScraped, EveryQueryInTheDocsReturnsSeriesInPrometheus) {
  const std::vector<std::pair<std::string, std::string>> queries = DocsQueries();
  ASSERT_GE(queries.size(), 10u) << "the PromQL section of docs/prometheus.md was not found";
  Prometheus& prom = *prometheus;
  ASSERT_NO_FATAL_FAILURE(StepsScrapedApart());
  // What this process never does: run out of memory, stop or idle; and
  // dcgm-exporter's series, which this server does not scrape (the join's
  // rows are checked by promtool: examples/prometheus/gpuwatch-rules.test.yml).
  const auto expect_empty = [](const std::string& query) {
    return query.find("out_of_memory") != std::string::npos ||
           query.find("gpuwatch_process_state") != std::string::npos ||
           query.find("DCGM_") != std::string::npos;
  };
  for (const auto& [comment, query] : queries) {
    json result;
    const bool ok = PollUntil(
        [&] {
          result = prom.Query(query);
          return result.is_array() && (expect_empty(query) || !result.empty());
        },
        30000);
    EXPECT_TRUE(ok) << comment << ":\n" << query << "\n= " << result.dump();
    if (expect_empty(query)) {
      EXPECT_TRUE(result.is_array() && result.empty()) << query;
    }
  }
}

// Every PromQL expression of the Grafana dashboard (deploy/grafana/gpuwatch.json),
// with its variables as Grafana fills them for "All" (`$instance` = `.*`,
// `$__rate_interval` = 1m), runs in a real server that scraped live_steps
// three steps apart, and returns data of the panel's shape: an instant
// vector, at least one series where this process has some (it never stops,
// idles or runs out of memory: the inactive panel returns none), and on each
// series every label the panel's legend names, but those of a pod or
// container, which this process is not in.
TEST_F(ExporterScraped, EveryQueryOfTheGrafanaDashboardReturnsDataInPrometheus) {
  const json dashboard = json::parse(ReadFile(kSourceDir + "/deploy/grafana/gpuwatch.json"));
  ASSERT_EQ(dashboard["uid"], "gpuwatch");
  // (panel title, expression, legend) of every target, rows' panels included.
  std::vector<std::tuple<std::string, std::string, std::string>> targets;
  std::set<int> ids;
  std::function<void(const json&)> walk = [&](const json& panels) {
    for (const json& panel : panels) {
      EXPECT_TRUE(ids.insert(panel["id"].get<int>()).second) << "panel id twice: " << panel["id"];
      if (panel.contains("panels")) walk(panel["panels"]);
      for (const json& target : panel.value("targets", json::array())) {
        EXPECT_EQ(target["datasource"]["uid"], "${datasource}") << panel["title"];
        targets.emplace_back(panel["title"], target["expr"], target.value("legendFormat", ""));
      }
    }
  };
  walk(dashboard["panels"]);
  ASSERT_GE(targets.size(), 12u);
  const std::string variable_query = dashboard["templating"]["list"][1]["definition"];
  ASSERT_EQ(variable_query, "label_values(gpuwatch_exporter_processes, instance)");

  Prometheus& prom = *prometheus;
  ASSERT_NO_FATAL_FAILURE(StepsScrapedApart());
  EXPECT_EQ(prom.Query("gpuwatch_exporter_processes")[0]["metric"].value("instance", ""),
            "127.0.0.1:" + std::to_string(server->port()));
  const auto replace_all = [](std::string text, const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to);
    return text;
  };
  const std::set<std::string> not_here = {"namespace", "pod", "pod_uid", "container_id"};
  for (const auto& [title, expr, legend] : targets) {
    const std::string query =
        replace_all(replace_all(expr, "$__rate_interval", "1m"), "$instance", ".*");
    const bool none = title == "Device memory held by inactive processes";
    std::vector<std::string> labels;  // those the legend names: {{label}}
    for (size_t at = legend.find("{{"); at != std::string::npos; at = legend.find("{{", at + 2))
      labels.push_back(legend.substr(at + 2, legend.find("}}", at) - at - 2));
    json result;
    std::string missing;
    const bool ok = PollUntil(
        [&] {
          result = prom.Query(query);
          if (!result.is_array() || (!none && result.empty())) return false;
          missing.clear();
          for (const json& series : result) {
            for (const std::string& label : labels) {
              if (not_here.count(label) == 0 && !series["metric"].contains(label))
                missing += label + " ";
            }
          }
          return missing.empty();
        },
        30000);
    EXPECT_TRUE(ok) << title << ":\n" << query << "\n= " << result.dump() << "\nno " << missing;
    if (none) EXPECT_TRUE(result.is_array() && result.empty()) << title << ": " << result.dump();
  }
}

// The rule on device memory held by a process that does nothing fires in a
// real server: a process that holds 2.25 MiB and makes no CUDA call for the
// exporter's --idle-after of 1 s, with the rule's `for: 10m` cut to 2 s in a
// copy of the example rules.
TEST(Exporter, TheAlertOnMemoryHeldWhileInactiveFiresInPrometheus) {
  SKIP_WITHOUT(kPrometheus);
  std::string rules = ReadFile(kSourceDir + "/examples/prometheus/gpuwatch-rules.yml");
  const size_t rule = rules.find("alert: GpuwatchDeviceMemoryHeldWhileInactive");
  ASSERT_NE(rule, std::string::npos);
  const size_t for_at = rules.find("for: 10m", rule);
  ASSERT_NE(for_at, std::string::npos);
  rules.replace(for_at, 8, "for: 2s");
  ScopedTempDir dir;
  WriteFile(dir.path() + "/rules.yml", rules);
  Stepper steps(dir, dir.path() + "/live");
  ASSERT_TRUE(ReadyAndStepped(steps, 2));
  Exporter exporter(dir.path() + "/live", {"--idle-after", "1"});
  ASSERT_NE(exporter.port(), 0) << exporter.first_line();
  Prometheus prom(dir, exporter.port(), dir.path() + "/rules.yml");
  ASSERT_TRUE(prom.ready()) << prom.log();

  const std::string pid = std::to_string(steps.pid());
  const std::string firing =
      "ALERTS{alertname=\"GpuwatchDeviceMemoryHeldWhileInactive\",alertstate=\"firing\",pid=\"" +
      pid + "\"}";
  json result;
  ASSERT_TRUE(PollUntil(
      [&] {
        result = prom.Query(firing);
        return result.is_array() && !result.empty();
      },
      90000))
      << result.dump() << prom.log();
  ASSERT_EQ(result.size(), 1u) << result.dump();
  const json& labels = result[0]["metric"];
  EXPECT_EQ(labels["state"], "idle") << result.dump();
  EXPECT_EQ(labels["command"], "live_steps") << result.dump();
  EXPECT_EQ(labels["severity"], "warning") << result.dump();
  // What it holds, and for how long it has done nothing.
  EXPECT_EQ(OnlyValue(prom.Query("gpuwatch_process_device_memory_bytes{pid=\"" + pid + "\"}")),
            2.0 * kMiB + 256.0 * kKiB);
  EXPECT_GE(OnlyValue(prom.Query("gpuwatch_process_idle_seconds{pid=\"" + pid + "\"}")), 1.0);
}

// Three processes on a node of four GPUs, each using its device 0: under
// CUDA_VISIBLE_DEVICES=2, =3,1 and =2,0 that is GPU 2, 3 and 2 again. Each
// device series carries its GPU's UUID, NVML index and PCI bus id as
// dcgm-exporter spells them, and in Prometheus `sum by (UUID)` adds the
// first and the third, where `sum by (device)` would add all three.
TEST(Exporter, DevicesAreLabelledByTheirPhysicalGpuAndSumByUuidAddsTheRightOnes) {
  SKIP_WITHOUT(kPrometheus);
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  const auto visible = [](const char* devices) {
    return std::map<std::string, std::string>{{"GWSIM_DEVICE_COUNT", "4"},
                                              {"CUDA_VISIBLE_DEVICES", devices}};
  };
  Stepper a(dir, live, "a", visible("2"));
  Stepper b(dir, live, "b", visible("3,1"));
  Stepper c(dir, live, "c", visible("2,0"));
  // 0.25 MiB at start and 1 MiB a step: 1.25, 2.25 and 3.25 MiB.
  ASSERT_TRUE(ReadyAndStepped(a, 1));
  ASSERT_TRUE(ReadyAndStepped(b, 2));
  ASSERT_TRUE(ReadyAndStepped(c, 3));
  Exporter exporter(live, {"--timeout-ms", "60000"});
  ASSERT_NE(exporter.port(), 0) << exporter.first_line();
  Prometheus prom(dir, exporter.port());
  ASSERT_TRUE(prom.ready()) << prom.log();

  const std::string gpu2 = "GPU-67777369-6d2d-6465-7669-63652d303200";  // "gwsim-device-02"
  const std::string gpu3 = "GPU-67777369-6d2d-6465-7669-63652d303300";
  const std::string pids =
      std::to_string(a.pid()) + "|" + std::to_string(b.pid()) + "|" + std::to_string(c.pid());
  const std::string per_gpu =
      "sum by (UUID, gpu, pci_bus_id) (gpuwatch_device_memory_live_bytes{pid=~\"" + pids + "\"})";
  json result;
  ASSERT_TRUE(PollUntil(
      [&] {
        result = prom.Query(per_gpu);
        return result.is_array() && result.size() == 2;
      },
      90000))
      << result.dump() << prom.log();
  std::map<std::string, std::pair<json, double>> by_uuid;
  for (const json& r : result) {
    by_uuid[r["metric"].value("UUID", "")] = {r["metric"],
                                              std::stod(r["value"][1].get<std::string>())};
  }
  ASSERT_EQ(by_uuid.count(gpu2), 1u) << result.dump();
  ASSERT_EQ(by_uuid.count(gpu3), 1u) << result.dump();
  EXPECT_EQ(by_uuid[gpu2].second, 4.0 * kMiB + 512.0 * kKiB) << result.dump();
  EXPECT_EQ(by_uuid[gpu2].first["gpu"], "2") << result.dump();
  EXPECT_EQ(by_uuid[gpu2].first["pci_bus_id"], "00000000:03:00.0") << result.dump();
  EXPECT_EQ(by_uuid[gpu3].second, 2.0 * kMiB + 256.0 * kKiB) << result.dump();
  EXPECT_EQ(by_uuid[gpu3].first["gpu"], "3") << result.dump();
  EXPECT_EQ(by_uuid[gpu3].first["pci_bus_id"], "00000000:04:00.0") << result.dump();
  // Each process's own series: device "0" all three.
  const json one =
      prom.Query("gpuwatch_device_memory_live_bytes{pid=\"" + std::to_string(b.pid()) + "\"}");
  ASSERT_TRUE(one.is_array() && one.size() == 1) << one.dump();
  EXPECT_EQ(one[0]["metric"]["device"], "0") << one.dump();
  EXPECT_EQ(one[0]["metric"]["UUID"], gpu3) << one.dump();
  // The recording rule gives the same sums.
  EXPECT_TRUE(PollUntil(
      [&] {
        return OnlyValue(prom.Query("uuid:gpuwatch_device_memory_live_bytes:sum{UUID=\"" + gpu3 +
                                    "\"}")) == 2.0 * kMiB + 256.0 * kKiB;
      },
      60000));
}

TEST(Exporter, TheTextfileIsWholeAndPromtoolReadsIt) {
  SKIP_WITHOUT(kPromtool);
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  Stepper steps(dir, live);
  ASSERT_TRUE(ReadyAndStepped(steps, 4));
  const std::string out = dir.path() + "/textfile";
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  // However long a busy machine takes the process to answer (a hang guard
  // of 60 s).
  const ProcessResult r = RunProcess(
      {kCli, "exporter", "--textfile", out, "--once", "--timeout-ms", "60000", "--dir", live}, {},
      "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  // Only the file: the temporary one was renamed over it.
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(out)) {
    names.push_back(e.path().filename());
  }
  EXPECT_EQ(names, std::vector<std::string>{"gpuwatch.prom"});
  const std::string file = out + "/gpuwatch.prom";
  const std::string text = ReadFile(file);
  const ProcessResult check =
      RunProcess({"/bin/sh", "-c", kPromtool + " check metrics < '" + file + "'"}, {}, "");
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err << text;
  const std::string series = "gpuwatch_site_live_bytes{pid=\"" + std::to_string(steps.pid()) +
                             "\",command=\"live_steps\",rank=\"\",host=\"";
  const std::string line = LineWith(text, {series, "site=\"" + LeakSite() + "\"}"});
  ASSERT_FALSE(line.empty()) << text;
  EXPECT_EQ(line.substr(line.rfind(' ') + 1), std::to_string(4 * kMiB)) << line;
  EXPECT_NE(text.find("# HELP gpuwatch_site_live_bytes "), std::string::npos);
  EXPECT_NE(text.find("# TYPE gpuwatch_transfer_bytes_total counter"), std::string::npos);
  EXPECT_NE(text.find("\ngpuwatch_exporter_scrape_problems 0\n"), std::string::npos) << text;

  // A directory that is not there: one line, status 2.
  const ProcessResult missing = RunProcess(
      {kCli, "exporter", "--textfile", dir.path() + "/none", "--once", "--dir", live}, {}, "");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "gpuwatch exporter: cannot write " + dir.path() +
                             "/none/gpuwatch.prom: No such file or directory\n");
}

ProcessResult RunExporter(const std::string& listen, const std::string& live_dir) {
  return RunProcess({kCli, "exporter", "--listen", listen, "--dir", live_dir}, {}, "");
}

TEST(Exporter, ABadListenValueIsOneLineAndStatus2) {
  ScopedTempDir dir;
  const std::map<std::string, std::string> cases = {
      {"127.0.0.1", "no port (expected HOST:PORT or :PORT, e.g. 127.0.0.1:9468)"},
      {"127.0.0.1:", "the port is not a number from 0 to 65535"},
      {"127.0.0.1:http", "the port is not a number from 0 to 65535"},
      {"127.0.0.1:65536", "the port is not a number from 0 to 65535"},
      {"127.0.0.1:-1", "the port is not a number from 0 to 65535"},
      {"9468",
       "a port alone: write :9468 for every address or 127.0.0.1:9468 for this machine "
       "only"},
      {"::1:9468", "an IPv6 address goes in brackets: [::1]:9468"},
  };
  for (const auto& [value, reason] : cases) {
    const ProcessResult r = RunExporter(value, dir.path());
    EXPECT_EQ(r.exit_code, 2) << value;
    std::string expected = "gpuwatch exporter: bad --listen '" + value + "': ";
    expected += reason;
    expected += "\n";
    EXPECT_EQ(r.err, expected);
  }
}

TEST(Exporter, APortInUseIsOneLineAndStatus2) {
  ScopedTempDir dir;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string value = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  const ProcessResult r = RunExporter(value, dir.path());
  close(fd);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "gpuwatch exporter: cannot listen on '" + value + "': Address already in use\n");
}

TEST(Exporter, AnUnsafeLiveDirectoryIsOneLineAndStatus2) {
  ScopedTempDir dir;
  const std::string link = dir.path() + "/link";
  ASSERT_EQ(symlink(dir.path().c_str(), link.c_str()), 0);
  const ProcessResult r = RunExporter("127.0.0.1:0", link);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("gpuwatch exporter: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(link), std::string::npos) << r.err;
}

// A process that stops answering (SIGSTOP) costs a scrape 1 s, not a hang:
// it is counted as a problem, and the others are served.
TEST(Exporter, AProcessThatStopsAnsweringIsAProblemNotAHang) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  Stepper stopped(dir, live);
  ScopedTempDir other_dir;
  Stepper healthy(other_dir, live);
  ASSERT_TRUE(stopped.ready() && healthy.ready()) << stopped.err() << healthy.err();
  ASSERT_TRUE(healthy.Step(2));
  Exporter exporter(live);
  ASSERT_NE(exporter.port(), 0) << exporter.first_line();
  ASSERT_TRUE(StopProcess(stopped.pid()));
  // Each scrape is answered while the process stays stopped: no hang. On a
  // busy machine the healthy process too may miss a scrape's 1 s: scraped
  // again until it is in (a hang guard of 30 scrapes).
  HttpResponse r;
  for (int i = 0; i < 30; ++i) {
    r = HttpGet(exporter.port(), "/metrics", 30000);
    if (r.status != 200 || r.body.find("\ngpuwatch_exporter_processes 1\n") != std::string::npos) {
      break;
    }
  }
  kill(stopped.pid(), SIGCONT);
  ASSERT_EQ(r.status, 200) << exporter.Stop().err;
  EXPECT_NE(r.body.find("\ngpuwatch_exporter_scrape_problems 1\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\ngpuwatch_exporter_processes 1\n"), std::string::npos) << r.body;
  const std::string line =
      LineWith(r.body, {"gpuwatch_site_live_bytes{pid=\"" + std::to_string(healthy.pid()) + "\"",
                        "site=\"" + LeakSite() + "\"}"});
  EXPECT_EQ(line.substr(line.rfind(' ') + 1), std::to_string(2 * kMiB)) << r.body;
  // Of the stopped process, its state and what is known of it only.
  const std::string stopped_pid = "pid=\"" + std::to_string(stopped.pid()) + "\"";
  for (const std::string& l : LinesStartingWith(r.body, "gpuwatch_")) {
    if (l.find(stopped_pid) != std::string::npos) {
      EXPECT_EQ(l.rfind("gpuwatch_process_", 0), 0u) << l;
      EXPECT_EQ(l.rfind("gpuwatch_process_start_time_seconds", 0), std::string::npos) << l;
    }
  }
  EXPECT_NE(LineWith(r.body, {"gpuwatch_process_state{" + stopped_pid, "state=\"stopped\"} 1"}), "")
      << r.body;
}

TEST(Exporter, SigintStopsItWithStatus0) {
  ScopedTempDir dir;
  RunningProcess child =
      StartProcess({kCli, "exporter", "--listen", "127.0.0.1:0", "--dir", dir.path()}, {}, "");
  ASSERT_TRUE(PollUntil(
      [&] {
        ReadAvailable(child, 100);
        return child.err_text.find('\n') != std::string::npos || child.err < 0;
      },
      30000, 0));
  // It serves: an empty directory is no process and no problem.
  const std::string prefix = "gpuwatch exporter: serving /metrics on http://127.0.0.1:";
  ASSERT_EQ(child.err_text.rfind(prefix, 0), 0u) << child.err_text;
  const HttpResponse metrics =
      HttpGet(std::atoi(child.err_text.c_str() + prefix.size()), "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("\ngpuwatch_exporter_processes 0\n"), std::string::npos)
      << metrics.body;
  kill(child.pid, SIGINT);
  const ProcessResult r = FinishProcess(child, 30000);
  EXPECT_FALSE(r.signaled) << r.signal;
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// Clients that send their headers a byte every 500 ms (120 bytes: 60 s)
// hold HTTP workers; a real scrape is still answered, well within their
// time, and each of them is closed at the request deadline (5 s), long
// before it has sent all. Before: the HTTP server had two workers and waited
// 30 s for a request; two such clients made a scrape wait 28 to 58 s.
TEST(Exporter, SlowClientsDoNotStarveAScrape) {
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  Stepper steps(dir, live);
  ASSERT_TRUE(ReadyAndStepped(steps, 1));
  Exporter exporter(live);
  ASSERT_NE(exporter.port(), 0) << exporter.first_line();
  std::string headers = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
  headers.append(120 - headers.size(), 'a');
  std::vector<std::unique_ptr<Trickler>> slow(4);
  for (auto& t : slow) {
    t = std::make_unique<Trickler>(ConnectTcp(exporter.port()), headers, 500);
  }
  for (auto& t : slow) t->WaitSent(2);
  const HttpResponse r = HttpGet(exporter.port(), "/metrics", 20000);
  ASSERT_EQ(r.status, 200) << exporter.Stop().err;
  const std::string line =
      LineWith(r.body, {"gpuwatch_site_live_bytes{pid=\"" + std::to_string(steps.pid()) + "\"",
                        "site=\"" + LeakSite() + "\"}"});
  EXPECT_EQ(line.substr(line.rfind(' ') + 1), std::to_string(kMiB)) << r.body;
  for (auto& t : slow) {
    t->Join();
    ASSERT_TRUE(t->connected());
    EXPECT_TRUE(t->closed());
    EXPECT_LT(t->sent(), t->length());
  }
}

// The live directory did not exist when the exporter started; another user
// makes it and serves a process of its own in it. Each scrape checks the
// directory again: the other user's process is not exported, the scrape has
// one problem, and the exporter says why, once. Before: the directory was
// checked at start only, and the other user's process was exported.
TEST(Exporter, ALiveDirectoryAnotherUserMakesLaterIsRefusedAtEachScrape) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make the directory as another user";
  ScopedTempDir dir;
  ASSERT_EQ(chmod(dir.path().c_str(), 0777), 0);
  const std::string live = dir.path() + "/live";
  Exporter exporter(live);
  ASSERT_NE(exporter.port(), 0) << exporter.first_line();
  const HttpResponse empty = HttpGet(exporter.port(), "/metrics", 30000);
  ASSERT_EQ(empty.status, 200);
  EXPECT_NE(empty.body.find("\ngpuwatch_exporter_scrape_problems 0\n"), std::string::npos);
  const std::string answer =
      R"({"schema":"gpuwatch-live","version":1,"command":["planted"],"marks":7})"
      "\n";
  const pid_t theirs = ServeAsAnotherUser(65534, live, answer, /*make_dir=*/true);
  ASSERT_GT(theirs, 0);
  const HttpResponse r = HttpGet(exporter.port(), "/metrics", 30000);
  Reap(theirs);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body.find("planted"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\ngpuwatch_exporter_processes 0\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\ngpuwatch_exporter_scrape_problems 1\n"), std::string::npos) << r.body;
  const ProcessResult stopped = exporter.Stop();
  EXPECT_EQ(stopped.exit_code, 0);
  const std::string why =
      "gpuwatch exporter: " + live + " is owned by uid 65534, not by this user (uid 0)\n";
  EXPECT_NE(stopped.err.find(why), std::string::npos) << stopped.err;
  EXPECT_EQ(stopped.err.find(why), stopped.err.rfind(why)) << stopped.err;
}

// Whether this machine has IPv6 loopback (a container may have none).
bool HasIpv6Loopback() {
  const int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

// `--listen [::1]:0`: served on IPv6 loopback (through the exporter's relay:
// Debian's civetweb has no IPv6), and a real Prometheus scrapes it there.
TEST(Exporter, PrometheusScrapesItOverIpv6Loopback) {
  SKIP_WITHOUT(kPrometheus);
  if (!HasIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback (::1) on this machine";
  ScopedTempDir dir;
  const std::string live = dir.path() + "/live";
  Stepper steps(dir, live);
  ASSERT_TRUE(steps.ready()) << steps.err();
  Exporter exporter(live, {}, "[::1]:0", "[::1]");
  ASSERT_NE(exporter.port(), 0) << exporter.first_line();
  Prometheus prom(dir, exporter.port(), kSourceDir + "/examples/prometheus/gpuwatch-rules.yml", {},
                  "[::1]");
  ASSERT_TRUE(prom.ready()) << prom.log();
  ASSERT_TRUE(steps.Step(2));
  const std::string site = "gpuwatch_site_live_bytes{pid=\"" + std::to_string(steps.pid()) +
                           "\",site=\"" + LeakSite() + "\"}";
  const std::string up =
      "up{job=\"gpuwatch\",instance=\"[::1]:" + std::to_string(exporter.port()) + "\"}";
  EXPECT_TRUE(PollUntil(
      [&] { return OnlyValue(prom.Query(site)) == 2.0 * kMiB && OnlyValue(prom.Query(up)) == 1; },
      60000))
      << prom.Query(site).dump() << prom.Query(up).dump() << prom.log();
  EXPECT_EQ(steps.Finish().exit_code, 0);
  const ProcessResult stopped = exporter.Stop();
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
}

// `--listen :0` is every address: IPv6 and, on a dual-stack socket, IPv4.
TEST(Exporter, AColonAndAPortServesIpv6AndIpv4Clients) {
  if (!HasIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback (::1) on this machine";
  ScopedTempDir dir;
  Exporter exporter(dir.path(), {}, ":0", "[::]");
  ASSERT_NE(exporter.port(), 0) << exporter.first_line();
  const HttpResponse v6 = HttpGet(exporter.port(), "/metrics", 30000, true);
  EXPECT_EQ(v6.status, 200);
  EXPECT_NE(v6.body.find("\ngpuwatch_exporter_processes 0\n"), std::string::npos) << v6.body;
  if (ReadFile("/proc/sys/net/ipv6/bindv6only") != "1\n") {
    const HttpResponse v4 = HttpGet(exporter.port(), "/metrics", 30000);
    EXPECT_EQ(v4.status, 200);
    EXPECT_NE(v4.body.find("\ngpuwatch_exporter_processes 0\n"), std::string::npos) << v4.body;
  }
  const ProcessResult stopped = exporter.Stop();
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
}

}  // namespace
}  // namespace gpuwatch::testing
