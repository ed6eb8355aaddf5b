#include "libgpuwatch/report.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>
#include <random>
#include <unordered_map>

#include "libgpuwatch/stack_table.h"
#include "libgpuwatch/version.h"
#include "nlohmann/json.hpp"

namespace gpuwatch {

namespace {

using nlohmann::json;

json KindJson(const KindTotals& t) {
  return json{{"current_bytes", t.current_bytes}, {"current_count", t.current_count},
              {"peak_bytes", t.peak_bytes},       {"allocs", t.allocs},
              {"alloc_bytes", t.alloc_bytes},     {"frees", t.frees}};
}

// Sites listed per section at most; the rest are summed in "omitted".
constexpr size_t kMaxSitesPerSection = 1000;

json FramesJson(const std::vector<Frame>& frames) {
  json out = json::array();
  for (const Frame& f : frames) {
    json frame = {
        {"function", f.function}, {"file", f.file}, {"line", f.line}, {"module", f.module}};
    if (f.inlined) frame["inlined"] = true;
    out.push_back(std::move(frame));
  }
  return out;
}

// Live allocations grouped by site, device kinds and host kinds apart.
struct LeakGroup {
  uint32_t stack_id = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::array<uint64_t, kNumMemKinds> kind_bytes{};
  uint64_t oldest_ns = UINT64_MAX;
};

std::vector<LeakGroup> GroupLive(const std::vector<LiveAlloc>& live, bool device,
                                 SiteResolver* sites) {
  std::unordered_map<uint32_t, LeakGroup> groups;
  for (const LiveAlloc& a : live) {
    if (IsDeviceKind(a.kind) != device) continue;
    const uint32_t site = sites->Canonical(a.stack_id);
    LeakGroup& g = groups[site];
    g.stack_id = site;
    g.bytes += a.size;
    g.count += 1;
    g.kind_bytes[static_cast<int>(a.kind)] += a.size;
    g.oldest_ns = std::min(g.oldest_ns, a.time_ns);
  }
  std::vector<LeakGroup> out;
  out.reserve(groups.size());
  for (auto& [id, g] : groups) out.push_back(g);
  std::sort(out.begin(), out.end(), [](const LeakGroup& a, const LeakGroup& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.stack_id < b.stack_id;
  });
  return out;
}

json LeakSection(const std::vector<LeakGroup>& groups, SiteResolver* sites) {
  json list = json::array();
  uint64_t omitted_bytes = 0;
  uint64_t omitted_sites = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const LeakGroup& g = groups[i];
    if (i >= kMaxSitesPerSection) {
      omitted_bytes += g.bytes;
      ++omitted_sites;
      continue;
    }
    json kinds = json::object();
    for (int k = 0; k < kNumMemKinds; ++k) {
      if (g.kind_bytes[k] != 0) kinds[MemKindName(static_cast<MemKind>(k))] = g.kind_bytes[k];
    }
    list.push_back({{"site", g.stack_id},
                    {"location", sites->LocationOf(g.stack_id)},
                    {"bytes", g.bytes},
                    {"count", g.count},
                    {"kinds", kinds},
                    {"oldest_ns", g.oldest_ns},
                    {"frames", FramesJson(sites->FramesOf(g.stack_id))}});
  }
  uint64_t total_bytes = 0;
  uint64_t total_count = 0;
  for (const LeakGroup& g : groups) {
    total_bytes += g.bytes;
    total_count += g.count;
  }
  return {{"bytes", total_bytes},
          {"count", total_count},
          {"sites", list},
          {"omitted_sites", omitted_sites},
          {"omitted_bytes", omitted_bytes}};
}

json PeakSection(const TrackerSnapshot& snap, SiteResolver* sites) {
  std::unordered_map<uint32_t, uint64_t> merged;
  for (const auto& [id, bytes] : snap.peak_sites) merged[sites->Canonical(id)] += bytes;
  std::vector<std::pair<uint32_t, uint64_t>> peak(merged.begin(), merged.end());
  std::sort(peak.begin(), peak.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  json list = json::array();
  for (size_t i = 0; i < peak.size() && i < kMaxSitesPerSection; ++i) {
    list.push_back({{"site", peak[i].first},
                    {"location", sites->LocationOf(peak[i].first)},
                    {"bytes", peak[i].second},
                    {"frames", FramesJson(sites->FramesOf(peak[i].first))}});
  }
  json kinds = json::object();
  for (int k = 0; k < kNumMemKinds; ++k) {
    kinds[MemKindName(static_cast<MemKind>(k))] = snap.kinds[k].peak_bytes;
  }
  return {{"device_bytes", snap.device_peak_bytes},
          {"sites_at_device_bytes", snap.peak_sites_device_bytes},
          {"sites_time_ns", snap.peak_sites_time_ns},
          {"kinds", kinds},
          {"sites", list}};
}

json SitesSection(const TrackerSnapshot& snap, SiteResolver* sites) {
  std::unordered_map<uint32_t, SiteTotals> merged;
  for (const auto& [id, t] : snap.sites) {
    SiteTotals& m = merged[sites->Canonical(id)];
    m.allocs += t.allocs;
    m.alloc_bytes += t.alloc_bytes;
    m.live_bytes += t.live_bytes;
    m.live_count += t.live_count;
    m.largest = std::max(m.largest, t.largest);
  }
  std::vector<std::pair<uint32_t, SiteTotals>> all(merged.begin(), merged.end());
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.second.alloc_bytes != b.second.alloc_bytes
               ? a.second.alloc_bytes > b.second.alloc_bytes
               : a.first < b.first;
  });
  json list = json::array();
  for (size_t i = 0; i < all.size() && i < kMaxSitesPerSection; ++i) {
    const SiteTotals& t = all[i].second;
    list.push_back({{"site", all[i].first},
                    {"location", sites->LocationOf(all[i].first)},
                    {"allocs", t.allocs},
                    {"alloc_bytes", t.alloc_bytes},
                    {"largest", t.largest},
                    {"live_device_bytes", t.live_bytes},
                    {"live_device_count", t.live_count},
                    {"frames", FramesJson(sites->FramesOf(all[i].first))}});
  }
  return list;
}

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", value, kUnits[unit]);
  return buf;
}

SiteResolver::SiteResolver(const StackTable* stacks) : stacks_(stacks) {}
SiteResolver::~SiteResolver() = default;

const std::vector<Frame>& SiteResolver::FramesOf(uint32_t stack_id) {
  auto it = cache_.find(stack_id);
  if (it != cache_.end()) return it->second;
  std::vector<Frame> frames;
  if (stacks_ != nullptr && stack_id != 0) {
    const std::span<const uintptr_t> pcs = stacks_->Get(stack_id);
    if (!pcs.empty()) {
      if (symbolizer_ == nullptr) symbolizer_ = std::make_unique<Symbolizer>();
      symbolizer_->SymbolizeStack(pcs, &frames);
      TrimTop(&frames, IsToolFrame);
    }
  }
  return cache_.emplace(stack_id, std::move(frames)).first->second;
}

uint32_t SiteResolver::Canonical(uint32_t stack_id) {
  auto it = canonical_.find(stack_id);
  if (it != canonical_.end()) return it->second;
  const std::vector<Frame>& frames = FramesOf(stack_id);
  uint32_t canonical = stack_id;
  if (!frames.empty()) {
    // Keyed by what the user reads (function, file, line), not by pc: the
    // compiler may unroll one source-level call into several call sites.
    std::string key;
    for (const Frame& f : frames) {
      key += f.module;
      key += '\0';
      key += f.function;
      key += '\0';
      if (f.line > 0) {
        key += f.file;
        key += ':' + std::to_string(f.line);
      } else {
        key += std::to_string(f.offset);
      }
      key += '\n';
    }
    canonical = by_frames_.emplace(std::move(key), stack_id).first->second;
  }
  canonical_.emplace(stack_id, canonical);
  return canonical;
}

void SiteResolver::Prepare(std::vector<uint32_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (const uint32_t id : ids) Canonical(id);
}

std::string SiteResolver::LocationOf(uint32_t stack_id) {
  const std::vector<Frame>& frames = FramesOf(stack_id);
  for (const Frame& f : frames) {
    if (f.line > 0 && !f.file.empty()) {
      return std::string(Basename(f.file)) + ":" + std::to_string(f.line);
    }
  }
  if (!frames.empty()) {
    const Frame& f = frames.front();
    if (!f.function.empty()) {
      return f.function + " (" + std::string(Basename(f.module)) + ")";
    }
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%s+0x%" PRIxPTR, std::string(Basename(f.module)).c_str(),
                  f.offset);
    return buf;
  }
  return "<no stack>";
}

std::string BuildReportJson(const TrackerSnapshot& snap, const ReportContext& context,
                            SiteResolver* sites) {
  json kinds = json::object();
  for (int i = 0; i < kNumMemKinds; ++i) {
    kinds[MemKindName(static_cast<MemKind>(i))] = KindJson(snap.kinds[i]);
  }
  json copies = json::object();
  for (int i = 0; i < kNumCopyKinds; ++i) {
    if (snap.copies[i].count == 0) continue;
    copies[CopyKindName(static_cast<CopyKind>(i))] =
        json{{"count", snap.copies[i].count}, {"bytes", snap.copies[i].bytes}};
  }
  uint64_t live_device_count = 0;
  uint64_t live_host_count = 0;
  for (const LiveAlloc& a : snap.live) {
    (IsDeviceKind(a.kind) ? live_device_count : live_host_count) += 1;
  }
  uint64_t live_host_bytes = snap.kinds[static_cast<int>(MemKind::kPinnedHost)].current_bytes +
                             snap.kinds[static_cast<int>(MemKind::kRegisteredHost)].current_bytes;

  json report = {
      {"schema", "gpuwatch-report"},
      {"version", kReportSchemaVersion},
      {"trigger", context.trigger},
      {"label", context.label},
      {"gpuwatch",
       {{"version", kGpuwatchVersion},
        {"attach", context.attach_mode},
        {"cupti", context.cupti_path}}},
      {"process",
       {{"pid", context.pid},
        {"host", context.host},
        {"rank", context.rank},
        {"command", context.command},
        {"elapsed_ns", snap.time_ns}}},
      {"totals",
       {{"device_current_bytes", snap.device_current_bytes},
        {"device_peak_bytes", snap.device_peak_bytes},
        {"device_live_count", live_device_count},
        {"host_current_bytes", live_host_bytes},
        {"host_live_count", live_host_count},
        {"unknown_frees", snap.unknown_frees},
        {"kernel_launches", snap.launches},
        {"kinds", kinds},
        {"copies", copies},
        {"dropped_allocs", snap.dropped_allocs},
        {"stacks_dropped", context.stacks_dropped},
        {"oom_count", context.oom_count}}},
      {"stack_depth", context.depth},
  };
  std::vector<uint32_t> ids;
  for (const auto& [id, t] : snap.sites) ids.push_back(id);
  for (const LiveAlloc& a : snap.live) ids.push_back(a.stack_id);
  for (const auto& [id, bytes] : snap.peak_sites) ids.push_back(id);
  if (context.oom != nullptr) ids.push_back(context.oom->stack_id);
  sites->Prepare(std::move(ids));
  report["leaks"] = {{"device", LeakSection(GroupLive(snap.live, true, sites), sites)},
                     {"host", LeakSection(GroupLive(snap.live, false, sites), sites)}};
  report["peak"] = PeakSection(snap, sites);
  report["sites"] = SitesSection(snap, sites);
  if (context.oom != nullptr) {
    const OomInfo& oom = *context.oom;
    report["oom"] = {{"size", oom.size},
                     {"kind", MemKindName(oom.kind)},
                     {"api", oom.api},
                     {"error", oom.error},
                     {"device", oom.device},
                     {"device_free_bytes", oom.device_free},
                     {"device_total_bytes", oom.device_total},
                     {"site", oom.stack_id},
                     {"location", sites->LocationOf(oom.stack_id)},
                     {"frames", FramesJson(sites->FramesOf(oom.stack_id))}};
  }
  return report.dump(2) + "\n";
}

std::string BuildSummaryText(const TrackerSnapshot& snap, SiteResolver* sites,
                             const std::string& path) {
  constexpr size_t kTopSites = 5;
  std::string out;
  char line[768];
  uint64_t allocs = 0;
  uint64_t copies = 0;
  for (const auto& k : snap.kinds) allocs += k.allocs;
  for (const auto& c : snap.copies) copies += c.count;
  std::snprintf(line, sizeof(line),
                "gpuwatch: %" PRIu64 " allocations, %" PRIu64 " copies, %" PRIu64
                " kernel launches; device peak %s\n",
                allocs, copies, snap.launches, FormatBytes(snap.device_peak_bytes).c_str());
  out += line;
  for (const bool device : {true, false}) {
    const std::vector<LeakGroup> groups = GroupLive(snap.live, device, sites);
    if (groups.empty()) continue;
    uint64_t bytes = 0;
    uint64_t count = 0;
    for (const LeakGroup& g : groups) {
      bytes += g.bytes;
      count += g.count;
    }
    std::snprintf(line, sizeof(line),
                  "gpuwatch: still live: %s of %s memory in %" PRIu64 " allocations from %zu %s\n",
                  FormatBytes(bytes).c_str(), device ? "device" : "pinned host", count,
                  groups.size(), groups.size() == 1 ? "site" : "sites");
    out += line;
    for (size_t i = 0; i < groups.size() && i < kTopSites; ++i) {
      const std::vector<Frame>& frames = sites->FramesOf(groups[i].stack_id);
      const std::string function = frames.empty() ? "" : frames.front().function;
      std::snprintf(line, sizeof(line), "gpuwatch:   %10s in %6" PRIu64 " at %s%s%s%s\n",
                    FormatBytes(groups[i].bytes).c_str(), groups[i].count,
                    sites->LocationOf(groups[i].stack_id).c_str(), function.empty() ? "" : " (",
                    function.c_str(), function.empty() ? "" : ")");
      out += line;
    }
  }
  if (snap.unknown_frees > 0) {
    std::snprintf(line, sizeof(line), "gpuwatch: %" PRIu64 " frees of unknown pointers\n",
                  snap.unknown_frees);
    out += line;
  }
  if (!path.empty()) out += "gpuwatch: report written to " + path + "\n";
  return out;
}

bool WriteFileAtomically(const std::string& path, const std::string& contents, std::string* error) {
  const std::string dir = DirName(path);
  std::random_device rd;
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), ".tmp.%08x%08x", rd(), rd());
  const std::string tmp = path + suffix;
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    *error = "cannot create a file in " + dir + ": " + std::strerror(errno);
    return false;
  }
  const char* data = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    const ssize_t n = write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = "cannot write " + tmp + ": " + std::strerror(errno);
      close(fd);
      unlink(tmp.c_str());
      return false;
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    *error = "cannot flush " + tmp + ": " + std::strerror(errno);
    unlink(tmp.c_str());
    return false;
  }
  // rename() replaces a symlink placed at `path` rather than following it.
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    *error = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace gpuwatch
