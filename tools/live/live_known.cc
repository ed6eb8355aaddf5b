#include "tools/live/live_known.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "libgpuwatch/base/config.h"
#include "tools/live/live_status.h"
#include "tools/reading/report_reader.h"

namespace gpuwatch::tools {
namespace {

constexpr size_t kMaxEnvironBytes = size_t{1} << 20;

// /proc/PID/environ as NAME=VALUE strings.
std::map<std::string, std::string> EnvironOf(pid_t pid) {
  std::map<std::string, std::string> env;
  const std::string path = "/proc/" + std::to_string(pid) + "/environ";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return env;
  std::string text;
  char buf[65536];
  for (ssize_t n; text.size() < kMaxEnvironBytes && (n = read(fd, buf, sizeof(buf))) > 0;) {
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\0', at), text.size());
    const std::string entry = text.substr(at, end - at);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
    at = end + 1;
  }
  return env;
}

std::string LocalHostName() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

int64_t MtimeNs(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// A report's figures as a live state: who, and device memory live and at
// the peak (a checkpoint's sites are not listed).
LiveState StateOfReport(const ReportModel& m) {
  LiveState s;
  const ReportTotals& t = m.totals;
  std::tie(s.host, s.rank, s.command, s.uptime_ns) =
      std::tie(m.process.host, m.process.rank, m.process.command, m.process.elapsed_ns);
  std::tie(s.live_bytes, s.peak_bytes, s.live_count, s.ooms, s.kernel_launches) =
      std::tie(t.device_current_bytes, t.device_peak_bytes, t.device_live_count, t.oom_count,
               t.kernel_launches);
  const KindSums device = SumKinds(t, /*host=*/false);
  const KindSums host = SumKinds(t, /*host=*/true);
  s.allocs = device.allocs + host.allocs;
  s.frees = device.frees + host.frees;
  return s;
}

}  // namespace

std::string ReportPathOf(pid_t pid) {
  const std::map<std::string, std::string> env = EnvironOf(pid);
  const EnvLookup lookup = [&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  std::vector<std::string> warnings;
  const Config config = ParseConfig(lookup, {}, &warnings);
  std::string path =
      ExpandOutputPattern(config.output, pid, LocalHostName(), RankFromEnvironment(lookup));
  if (!path.empty() && path[0] != '/') {
    char cwd[PATH_MAX] = {};
    const std::string link = "/proc/" + std::to_string(pid) + "/cwd";
    const ssize_t n = readlink(link.c_str(), cwd, sizeof(cwd) - 1);
    if (n <= 0) return "";
    path = std::string(cwd, static_cast<size_t>(n)) + "/" + path;
  }
  return path;
}

void LiveKnown::Update(LiveScan* scan, uint64_t now_unix_ms) {
  std::set<pid_t> listed;
  for (const LiveProcess& p : scan->processes) {
    listed.insert(p.pid);
    answers_[p.pid] = {p.proc.start_ticks, now_unix_ms, p.state};
  }
  for (LiveProcess& p : scan->silent) {
    listed.insert(p.pid);
    const auto it = answers_.find(p.pid);
    if (it != answers_.end() && it->second.start_ticks == p.proc.start_ticks) {
      p.state = it->second.state;
      p.known_from = "answer";
      p.known_age_ms = now_unix_ms - std::min(now_unix_ms, it->second.at_unix_ms);
      continue;
    }
    // Its checkpoint: a fork's child whose pattern has no %p writes its own
    // next to its parent's.
    const std::string main = ReportPathOf(p.pid);
    for (const std::string& path : {main, main + ".child-" + std::to_string(p.pid)}) {
      const int64_t mtime = main.empty() ? -1 : MtimeNs(path);
      if (mtime < 0) continue;
      Checkpoint& c = checkpoints_[p.pid];
      if (c.path != path || c.mtime_ns != mtime) {
        Report report;
        std::string error;
        if (!ReadReport(path, &report, &error) ||
            report.model.process.pid != static_cast<uint64_t>(p.pid)) {
          checkpoints_.erase(p.pid);
          continue;  // another process's report, or none yet
        }
        c = {path, mtime, StateOfReport(report.model)};
      }
      p.state = c.state;
      p.known_from = "checkpoint " + path;
      const uint64_t at_ms = static_cast<uint64_t>(mtime / 1000000);
      p.known_age_ms = now_unix_ms - std::min(now_unix_ms, at_ms);
      break;
    }
    if (!p.known_from.empty()) continue;
    // Its status page, which it writes once a second until it stops.
    if (p.status.has_value() && p.status->updated_ns != 0) {
      p.state = StateFromStatusPage(p.pid, *p.status);
      p.known_from = "status page";
      p.known_age_ms = StatusSince(p.status->updated_ns, p.status->now_ns) / 1000000;
    }
  }
  std::erase_if(answers_, [&listed](const auto& e) { return listed.count(e.first) == 0; });
  std::erase_if(checkpoints_, [&listed](const auto& e) { return listed.count(e.first) == 0; });
}

}  // namespace gpuwatch::tools
