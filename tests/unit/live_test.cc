// The live view's parts that need no process: the live directory's name and
// entries (libgpuwatch/base/live_dir.h), the live state built from given
// figures (libgpuwatch/report/live_state.h: rates, growth, history, the top
// sites and the rest) and `gpuwatch top`'s frame (tools/commands/top_command.h).
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "libgpuwatch/analysis/site_resolver.h"
#include "libgpuwatch/base/live_dir.h"
#include "libgpuwatch/report/live_state.h"
#include "libgpuwatch/report/report_model.h"
#include "nlohmann/json.hpp"
#include "tools/commands/top_command.h"

namespace gpuwatch {
namespace {

using nlohmann::json;

EnvLookup Env(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(LiveDir, FromTheEnvironment) {
  EXPECT_EQ(LiveDirFromEnvironment(
                Env({{"GPUWATCH_LIVE_DIR", "/x/live"}, {"XDG_RUNTIME_DIR", "/run/user/7"}})),
            "/x/live");
  EXPECT_EQ(
      LiveDirFromEnvironment(Env({{"GPUWATCH_LIVE_DIR", ""}, {"XDG_RUNTIME_DIR", "/run/user/7"}})),
      "/run/user/7/gpuwatch");
  // A relative XDG_RUNTIME_DIR is invalid by its specification: not used.
  EXPECT_EQ(LiveDirFromEnvironment(Env({{"XDG_RUNTIME_DIR", "run"}})),
            "/tmp/gpuwatch-" + std::to_string(geteuid()));
  EXPECT_EQ(LiveDirFromEnvironment(Env({})), "/tmp/gpuwatch-" + std::to_string(geteuid()));
}

TEST(LiveDir, TheNodeRootFromTheEnvironment) {
  EXPECT_EQ(NodeDirFromEnvironment(Env({{"GPUWATCH_NODE_DIR", "/srv/gw"}})), "/srv/gw");
  EXPECT_EQ(NodeDirFromEnvironment(Env({{"GPUWATCH_NODE_DIR", ""}})), "/run/gpuwatch");
  EXPECT_EQ(NodeDirFromEnvironment(Env({})), "/run/gpuwatch");
}

// A user's directory in the node root: made by the process, 0700 (0750 with
// the root's group, from its setgid bit), and refused through a symlink or
// in a root others may write that is not sticky.
TEST(LiveDir, AUsersDirectoryInTheNodeRootIsMadeAndChecked) {
  char tmpl[] = "/tmp/gw-node-unit-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = std::string(tmpl) + "/root";
  const std::string mine = root + "/" + std::to_string(geteuid());
  std::string dir;
  NodeReader reader;
  bool absent = false;
  std::string problem;
  EXPECT_FALSE(PrepareNodeUserDir(root, &dir, &reader, &absent, &problem));
  EXPECT_TRUE(absent);

  ASSERT_EQ(mkdir(root.c_str(), 0700), 0);
  ASSERT_EQ(chmod(root.c_str(), 0777), 0);
  EXPECT_FALSE(PrepareNodeUserDir(root, &dir, &reader, &absent, &problem));
  EXPECT_FALSE(absent);
  EXPECT_EQ(problem,
            "the node root " + root + " may be written by others and is not sticky (chmod +t)");

  ASSERT_EQ(chmod(root.c_str(), 01777), 0);
  ASSERT_TRUE(PrepareNodeUserDir(root, &dir, &reader, &absent, &problem)) << problem;
  EXPECT_EQ(dir, mine);
  struct stat st {};
  ASSERT_EQ(lstat(mine.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(reader.uid, geteuid());
  EXPECT_FALSE(reader.group);
  ASSERT_EQ(rmdir(mine.c_str()), 0);

  ASSERT_EQ(chmod(root.c_str(), 03777), 0);
  ASSERT_TRUE(PrepareNodeUserDir(root, &dir, &reader, &absent, &problem)) << problem;
  ASSERT_EQ(lstat(mine.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0750u);
  EXPECT_TRUE(reader.group);
  ASSERT_EQ(rmdir(mine.c_str()), 0);

  const std::string elsewhere = std::string(tmpl) + "/elsewhere";
  ASSERT_EQ(mkdir(elsewhere.c_str(), 0700), 0);
  ASSERT_EQ(symlink(elsewhere.c_str(), mine.c_str()), 0);
  EXPECT_FALSE(PrepareNodeUserDir(root, &dir, &reader, &absent, &problem));
  EXPECT_EQ(problem, mine + ": not a directory (a symbolic link?)");
  unlink(mine.c_str());
  rmdir(elsewhere.c_str());
  rmdir(root.c_str());
  rmdir(tmpl);
}

TEST(LiveDir, SocketPathsAndEntries) {
  EXPECT_EQ(LiveSocketPath("/run/g", 1234), "/run/g/1234.sock");
  EXPECT_EQ(LiveSocketPath(std::string(100, 'd'), 1234), "");  // past sun_path's 108 bytes
  char tmpl[] = "/tmp/gw-live-unit-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  for (const char* name :
       {"12.sock", "345.sock", "012.sock", "12.sock.tmp", "x12.sock", ".sock", "7"}) {
    std::ofstream(dir + "/" + name) << "";
  }
  std::vector<pid_t> pids = ListLiveSockets(dir);
  std::sort(pids.begin(), pids.end());
  EXPECT_EQ(pids, (std::vector<pid_t>{12, 345}));
  std::string problem;
  EXPECT_FALSE(PrepareLiveDir(dir + "/12.sock", false, &problem));
  EXPECT_EQ(problem, dir + "/12.sock is not a directory");
  EXPECT_FALSE(PrepareLiveDir(dir + "/none", false, &problem));
  EXPECT_EQ(problem, dir + "/none: No such file or directory");
  ASSERT_TRUE(PrepareLiveDir(dir + "/made", true, &problem)) << problem;
  struct stat st {};
  ASSERT_EQ(stat((dir + "/made").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  std::system(("rm -rf " + dir).c_str());  // NOLINT(cert-env33-c): the test's own directory
}

constexpr uint64_t kSecond = 1000000000ULL;
constexpr uint64_t kMiB = 1 << 20;

// A state from figures: 60 s in, 10 MiB live of which site 1 holds 8 MiB
// (2 MiB a minute ago) and site 2 2 MiB (unchanged); 6 GiB copied to the
// device in the last minute.
struct Figures {
  TrackerSnapshot totals;
  TransfersSnapshot transfers;
  LiveHistory history;
  LiveInputs in;
  Figures() {
    totals.time_ns = 61 * kSecond;
    totals.device_current_bytes = 10 * kMiB;
    totals.device_peak_bytes = 12 * kMiB;
    totals.device_bytes_by_device[1] = 10 * kMiB;
    totals.device_peak_bytes_by_device[1] = 12 * kMiB;
    KindTotals& device = totals.kinds[static_cast<int>(MemKind::kDevice)];
    device = {10 * kMiB, 12 * kMiB, 2, 5, 14 * kMiB, 3};
    totals.copies[static_cast<int>(CopyKind::kHostToDevice)] = {100, 7ULL << 30};
    totals.launches = 42;
    TransferStats& pageable = transfers.totals[static_cast<int>(CopyKind::kHostToDevice)]
                                              [static_cast<int>(HostKind::kPageable)];
    pageable.count = 100;
    pageable.bytes = 7ULL << 30;
    std::vector<std::pair<uint32_t, uint64_t>> scan = {{1, 2 * kMiB}, {2, 2 * kMiB}};
    history.Add(1 * kSecond, 4 * kMiB, 1ULL << 30, 0, &scan);
    scan = {{1, 5 * kMiB}, {2, 2 * kMiB}};
    history.Add(31 * kSecond, 7 * kMiB, 4ULL << 30, 0, &scan);
    in.pid = 77;
    in.host = "node3";
    in.rank = "5";
    in.command = {"/usr/bin/python3", "train.py"};
    in.totals = &totals;
    in.transfers = &transfers;
    in.sites = {{1, 8 * kMiB}, {2, 2 * kMiB}};
    in.last_marks = {
        GrowthSample{10 * kSecond, 4, "step", 4 * kMiB, {{1, 2 * kMiB}, {2, 2 * kMiB}}},
        GrowthSample{50 * kSecond, 6, "step", 9 * kMiB, {{1, 7 * kMiB}, {2, 2 * kMiB}}}};
    in.history = &history;
    in.device_total_bytes[1] = 80ULL << 30;
    identity[1] = {"GPU-3b7d5e1a-00ff-1234-5678-9abcdef00102", "00000000:3B:00.0", 6};
    in.device_identity = &identity;
    in.cgroup = {"4a3b", "docker-4a3b.scope", "", "ml", "trainer-0"};
  }
  std::array<DeviceIdentity, kMaxTrackedDevices> identity{};
};

TEST(LiveState, RatesGrowthAndHistoryAreExact) {
  Figures f;
  SiteResolver sites(nullptr);
  const json st = json::parse(BuildLiveState(f.in, &sites));
  EXPECT_EQ(st["schema"], "gpuwatch-live");
  EXPECT_EQ(st["pid"], 77);
  EXPECT_EQ(st["rank"], "5");
  EXPECT_EQ(st["uptime_ns"], 61 * kSecond);
  EXPECT_EQ(st["device"],
            json({{"live_bytes", 10 * kMiB}, {"peak_bytes", 12 * kMiB}, {"live_count", 2}}));
  ASSERT_EQ(st["devices"].size(), 1u);
  EXPECT_EQ(st["devices"][0]["device"], 1);
  EXPECT_EQ(st["devices"][0]["total_bytes"], 80ULL << 30);
  EXPECT_EQ(st["devices"][0]["uuid"], "GPU-3b7d5e1a-00ff-1234-5678-9abcdef00102");
  EXPECT_EQ(st["devices"][0]["pci_bus_id"], "00000000:3B:00.0");
  EXPECT_EQ(st["devices"][0]["gpu"], 6);
  EXPECT_EQ(st["cgroup"], json({{"container_id", "4a3b"},
                                {"systemd_unit", "docker-4a3b.scope"},
                                {"pod_uid", ""},
                                {"namespace", "ml"},
                                {"pod", "trainer-0"}}));
  EXPECT_EQ(st["kinds"]["device"]["alloc_bytes"], 14 * kMiB);
  EXPECT_EQ(st["counters"]["kernel_launches"], 42);
  EXPECT_EQ(st["counters"]["allocs"], 5);
  ASSERT_EQ(st["transfers"].size(), 1u);
  EXPECT_EQ(st["transfers"][0]["host"], "pageable");
  EXPECT_EQ(st["transfers"][0]["bytes"], 7ULL << 30);
  // From the oldest sample (1 s) to now (61 s): 60 s.
  EXPECT_EQ(st["rates"]["window_ns"], 60 * kSecond);
  EXPECT_EQ(st["rates"]["device_bytes_per_min"], 6 * kMiB);
  EXPECT_EQ(st["rates"]["h2d_bytes_per_s"], (6ULL << 30) / 60);
  EXPECT_EQ(st["rates"]["d2h_bytes_per_s"], 0);
  EXPECT_EQ(st["history"]["device_bytes"], json({4 * kMiB, 7 * kMiB}));
  EXPECT_EQ(st["marks"], 6);
  ASSERT_EQ(st["sites"].size(), 2u);
  const json& grows = st["sites"][0];
  EXPECT_EQ(grows["site"], 1);
  EXPECT_EQ(grows["live_bytes"], 8 * kMiB);
  EXPECT_EQ(grows["growth_per_min"], 6 * kMiB);
  EXPECT_EQ(grows["growth_per_mark"], 5 * kMiB / 2);  // marks 4 to 6
  EXPECT_EQ(grows["history"], json({2 * kMiB, 5 * kMiB}));
  EXPECT_EQ(st["sites"][1]["growth_per_min"], 0);
  EXPECT_EQ(st["sites"][1]["growth_per_mark"], 0);
  EXPECT_EQ(st["other_sites"], json({{"count", 0}, {"live_bytes", 0}}));
}

TEST(LiveState, TheRestIsCountedAndTrimmedSamplesAreUnknown) {
  Figures f;
  f.in.top = 1;
  // A sample trimmed to its largest sites that does not hold site 1: its
  // bytes there are unknown, not 0.
  std::vector<std::pair<uint32_t, uint64_t>> many;
  for (uint32_t id = 100; id < 100 + LiveHistory::kSitesPerSample + 10; ++id) {
    many.emplace_back(id, 16 * kMiB);
  }
  f.history.Add(41 * kSecond, 9 * kMiB, 5ULL << 30, 0, &many);
  SiteResolver sites(nullptr);
  const json st = json::parse(BuildLiveState(f.in, &sites));
  ASSERT_EQ(st["sites"].size(), 1u);
  EXPECT_EQ(st["sites"][0]["site"], 1);
  EXPECT_EQ(st["sites"][0]["history"], json({2 * kMiB, 5 * kMiB, nullptr}));
  EXPECT_EQ(st["other_sites"], json({{"count", 1}, {"live_bytes", 2 * kMiB}}));
  // Too short a window for a rate: none rather than a wild one.
  Figures young;
  young.totals.time_ns = 4 * kSecond;
  const json early = json::parse(BuildLiveState(young.in, &sites));
  EXPECT_TRUE(early["rates"]["device_bytes_per_min"].is_null());
  EXPECT_TRUE(early["sites"][0]["growth_per_min"].is_null());
}

tools::LiveProcess Process(pid_t pid, uint64_t live, int sites) {
  json st = {{"schema", "gpuwatch-live"},
             {"pid", pid},
             {"rank", ""},
             {"command", {"/bin/app" + std::to_string(pid)}},
             {"device", {{"live_bytes", live}, {"peak_bytes", live}, {"live_count", sites}}},
             {"rates", {{"device_bytes_per_min", nullptr}}},
             {"other_sites", {{"count", 0}, {"live_bytes", 0}}}};
  json list = json::array();
  for (int i = 0; i < sites; ++i) {
    list.push_back({{"site", i},
                    {"location", "app.cc:" + std::to_string(100 + i)},
                    {"function", "f" + std::to_string(i)},
                    {"live_bytes", kMiB * (sites - i)},
                    {"history", {0, kMiB}}});
  }
  st["sites"] = list;
  tools::LiveProcess p;
  p.pid = pid;
  std::string problem;
  EXPECT_TRUE(tools::ReadLiveState(st, &p.state, &problem)) << problem;
  return p;
}

// PyTorch's blocks as last handed over (--torch-blocks): the state's "torch" member, read back,
// and one line under the process line of `gpuwatch top`, the frame still its height.
TEST(LiveState, PyTorchsReservedAndAllocatedBytesReachTop) {
  Figures f;
  ReportTorchBlocks blocks;
  blocks.moment = "snapshot";
  blocks.reserved_bytes = 20 * kMiB;
  blocks.allocated_bytes = 16 * kMiB;
  blocks.segment_count = 1;
  f.in.torch_blocks = &blocks;
  SiteResolver sites(nullptr);
  const json st = json::parse(BuildLiveState(f.in, &sites));
  EXPECT_EQ(st["torch"], json({{"moment", "snapshot"},
                               {"reserved_bytes", 20 * kMiB},
                               {"allocated_bytes", 16 * kMiB},
                               {"segments", 1}}));
  f.in.torch_blocks = nullptr;
  EXPECT_FALSE(json::parse(BuildLiveState(f.in, &sites)).contains("torch"));

  tools::LiveScan scan;
  scan.processes.push_back(Process(1000, 20 * kMiB, 30));
  std::string problem;
  ASSERT_TRUE(tools::ReadLiveState(st, &scan.processes[0].state, &problem)) << problem;
  ASSERT_TRUE(scan.processes[0].state.torch.has_value());
  EXPECT_EQ(scan.processes[0].state.torch->allocated_bytes, 16 * kMiB);
  tools::TopView view;
  view.width = 80;
  view.height = 24;
  view.selected = 1000;
  const std::vector<std::string> lines = tools::RenderTopFrame(scan, view);
  EXPECT_EQ(lines.size(), 24u);
  size_t torch_lines = 0;
  for (const std::string& l : lines) {
    torch_lines += l == "PyTorch (at snapshot): 20M reserved, 16M allocated in 1 segment";
  }
  EXPECT_EQ(torch_lines, 1u) << ::testing::PrintToString(lines);
}

// gpuwatch's thread hands the history one scan buffer every second: each
// sample keeps only its largest sites, and holds no more than them.
TEST(LiveHistory, SamplesHoldOnlyTheSitesTheyKeep) {
  LiveHistory history;
  std::vector<std::pair<uint32_t, uint64_t>> scan;
  for (size_t t = 0; t < LiveHistory::kSamples + 5; ++t) {
    scan.clear();
    for (uint32_t id = 1; id <= 10000; ++id) scan.emplace_back(id, id + t);
    history.Add(t * kSecond, 0, 0, 0, &scan);
  }
  EXPECT_GE(scan.capacity(), 10000u);
  ASSERT_EQ(history.samples().size(), LiveHistory::kSamples);
  for (const LiveHistory::Sample& s : history.samples()) {
    ASSERT_EQ(s.sites.size(), LiveHistory::kSitesPerSample);
    EXPECT_EQ(s.sites.capacity(), LiveHistory::kSitesPerSample);
    EXPECT_EQ(s.sites.front().first, 10000u - LiveHistory::kSitesPerSample + 1);
    EXPECT_EQ(s.sites.back().first, 10000u);
  }
  EXPECT_EQ(history.samples().back().sites.back().second, 10000u + LiveHistory::kSamples + 4);
}

TEST(TopFrame, FitsTheTerminalAndKeepsTheSelectionInView) {
  tools::LiveScan scan;
  for (int i = 0; i < 30; ++i) scan.processes.push_back(Process(1000 + i, kMiB * (i + 1), 25));
  tools::TopView view;
  view.width = 80;
  view.height = 24;
  view.selected = 1003;  // fourth from the bottom of 30, by live bytes
  view.clock = "10:00:00";
  view.dir = "/run/user/1000/gpuwatch";
  const std::vector<std::string> lines = tools::RenderTopFrame(scan, view);
  ASSERT_EQ(lines.size(), 24u);
  for (const std::string& l : lines) EXPECT_LE(l.size(), 80u) << l;
  EXPECT_EQ(lines[0].substr(0, 46), "gpuwatch top  10:00:00  30 processes  sort: li");
  int marked = 0;
  for (const std::string& l : lines) {
    if (l[0] == '>') {
      ++marked;
      EXPECT_NE(l.find(" 1003 "), std::string::npos) << l;
    }
  }
  EXPECT_EQ(marked, 1);
  // The selected process's sites, the largest first, then how many more.
  const auto at = [&](const std::string& text) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].find(text) != std::string::npos) return static_cast<int>(i);
    }
    return -1;
  };
  ASSERT_GE(at("app.cc:100 (f0)"), 0);
  EXPECT_LT(at("app.cc:100 (f0)"), at("app.cc:101 (f1)"));
  const int more = at("more sites");
  ASSERT_GT(more, 0);
  // 12 rows for sites at 24 lines: 11 listed, 14 more holding 14 + 13 + ... + 1 MiB.
  EXPECT_EQ(lines[static_cast<size_t>(more)], "     105M in 14 more sites");
  EXPECT_EQ(more - at("app.cc:100 (f0)"), 11);
  EXPECT_EQ(lines.back().substr(0, 14), "up/down select");
}

// Sites that read the same (one helper's line from many call paths) are one
// row in top, their bytes and histories summed, with how many call paths.
TEST(TopFrame, SitesThatReadTheSameAreOneRow) {
  tools::LiveScan scan;
  tools::LiveProcess p = Process(1000, 6 * kMiB, 3);
  p.state.sites[1].location = p.state.sites[0].location;  // f0's line, from another path
  p.state.sites[1].function = p.state.sites[0].function;
  scan.processes.push_back(p);
  tools::TopView view;
  view.width = 100;
  view.height = 24;
  view.selected = 1000;
  const std::vector<std::string> lines = tools::RenderTopFrame(scan, view);
  int rows = 0;
  for (const std::string& l : lines) {
    if (l.find("app.cc:100 (f0)") == std::string::npos) continue;
    ++rows;
    EXPECT_NE(l.find("app.cc:100 (f0), 2 call paths"), std::string::npos) << l;
    EXPECT_EQ(l.substr(0, 9), "     5.0M") << l;  // 3 + 2 MiB
  }
  EXPECT_EQ(rows, 1);
  std::vector<tools::LiveSite> sites = p.state.sites;
  tools::GroupSitesByLocation(&sites, 1000);
  ASSERT_EQ(sites.size(), 2u);
  EXPECT_EQ(sites[0].live_bytes, 5 * kMiB);
  EXPECT_EQ(sites[0].call_paths, 2u);
  ASSERT_EQ(sites[0].history.size(), 2u);
  EXPECT_EQ(sites[0].history[1], std::optional<uint64_t>(2 * kMiB));
  EXPECT_EQ(sites[1].call_paths, 1u);
}

}  // namespace
}  // namespace gpuwatch
