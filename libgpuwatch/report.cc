#include "libgpuwatch/report.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <unordered_map>

#include "libgpuwatch/growth.h"
#include "libgpuwatch/mixed_stack.h"
#include "libgpuwatch/stack_table.h"
#include "libgpuwatch/suppressions.h"
#include "libgpuwatch/trace_json.h"
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

json FrameTableJson(const std::vector<const Frame*>& table) {
  json out = json::array();
  for (const Frame* f : table) {
    json frame = {
        {"function", f->function}, {"file", f->file}, {"line", f->line}, {"module", f->module}};
    if (f->inlined) frame["inlined"] = true;
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
  // One pass over every live allocation: groups are found through a flat
  // table indexed by canonical id (ids are dense), not a hash map.
  std::vector<LeakGroup> out;
  std::vector<uint32_t> slot;  // canonical id -> index in out + 1; 0 = none yet
  for (const LiveAlloc& a : live) {
    if (IsDeviceKind(a.kind) != device) continue;
    const uint32_t site = sites->Canonical(a.stack_id);
    if (site >= slot.size()) slot.resize(std::max<size_t>(site + 1, slot.size() * 2), 0);
    if (slot[site] == 0) {
      out.emplace_back().stack_id = site;
      slot[site] = static_cast<uint32_t>(out.size());
    }
    LeakGroup& g = out[slot[site] - 1];
    g.bytes += a.size;
    g.count += 1;
    g.kind_bytes[static_cast<int>(a.kind)] += a.size;
    g.oldest_ns = std::min(g.oldest_ns, a.time_ns);
  }
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
                    {"stack", sites->StackOf(g.stack_id)}});
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
                    {"stack", sites->StackOf(peak[i].first)}});
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
    m.host_allocs += t.host_allocs;
    m.host_alloc_bytes += t.host_alloc_bytes;
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
                    {"host_allocs", t.host_allocs},
                    {"host_alloc_bytes", t.host_alloc_bytes},
                    {"stack", sites->StackOf(all[i].first)}});
  }
  return list;
}

json StatsJson(const TransferStats& t) {
  json j = {{"count", t.count}, {"bytes", t.bytes}};
  if (t.timed_count > 0) {
    j["timed_count"] = t.timed_count;
    j["duration_ns"] = t.duration_ns;
    j["gbps"] = Gbps(t.timed_bytes, t.duration_ns);
  }
  return j;
}

// Transfer sites merged as the report shows them (Canonical), busiest first.
std::vector<std::pair<uint32_t, SiteTransfers>> MergedTransferSites(const TransfersSnapshot& t,
                                                                    SiteResolver* sites) {
  std::unordered_map<uint32_t, SiteTransfers> merged;
  for (const auto& [id, site] : t.sites) MergeInto(&merged[sites->Canonical(id)], site);
  std::vector<std::pair<uint32_t, SiteTransfers>> out(merged.begin(), merged.end());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    if (a.second.all.duration_ns != b.second.all.duration_ns) {
      return a.second.all.duration_ns > b.second.all.duration_ns;
    }
    if (a.second.all.bytes != b.second.all.bytes) return a.second.all.bytes > b.second.all.bytes;
    return a.first < b.first;
  });
  return out;
}

std::string Copies(uint64_t n) { return CountOf(n, "copy", "copies"); }

// Where each finding is, as the user reads it: "file:line", with the function
// added when another finding of the list sits at the same line in another
// site (two template instances, say), and the site id when even that is the
// same.
std::vector<std::string> FindingLocations(const std::vector<TransferFinding>& findings,
                                          SiteResolver* sites) {
  std::vector<std::string> where;
  where.reserve(findings.size());
  for (const TransferFinding& f : findings) where.push_back(sites->LocationOf(f.site));
  const auto clash = [&](size_t i) {
    for (size_t j = 0; j < findings.size(); ++j) {
      if (j != i && findings[j].site != findings[i].site && where[j] == where[i]) return true;
    }
    return false;
  };
  std::vector<bool> clashed(findings.size());
  for (size_t i = 0; i < findings.size(); ++i) clashed[i] = clash(i);
  for (size_t i = 0; i < findings.size(); ++i) {
    if (!clashed[i]) continue;
    const std::vector<Frame>& frames = sites->FramesOf(findings[i].site);
    const Frame* f = SiteFrame(frames);
    if (f == nullptr && !frames.empty()) f = &frames.front();
    if (f != nullptr && !f->function.empty()) where[i] += " (" + f->function + ")";
  }
  for (size_t i = 0; i < findings.size(); ++i) {
    if (clashed[i] && clash(i)) where[i] += " [site " + std::to_string(findings[i].site) + "]";
  }
  return where;
}

std::string FindingText(const TransferFinding& f, const std::string& where) {
  char buf[1024];
  if (f.type == "pageable") {
    std::snprintf(buf, sizeof(buf), "%s (%s) %s pageable memory at %s: pin it",
                  Copies(f.count).c_str(), FormatBytes(f.bytes).c_str(),
                  f.direction == CopyKind::kDeviceToHost ? "to" : "from", where.c_str());
  } else if (f.type == "small_copies") {
    std::snprintf(buf, sizeof(buf), "%s under 64 KiB at %s: batch them", Copies(f.count).c_str(),
                  where.c_str());
  } else if (f.type == "sync_d2h_loop") {
    std::snprintf(buf, sizeof(buf),
                  "%" PRIu64 " synchronous device-to-host %s at %s stall the host each time",
                  f.count, f.count == 1 ? "copy" : "copies", where.c_str());
  } else {
    std::snprintf(buf, sizeof(buf), "%s copies at %s reach %.1f GB/s, best %s is %.1f GB/s",
                  CopyKindName(f.direction), where.c_str(), f.gbps, CopyKindName(f.direction),
                  f.best_gbps);
  }
  return buf;
}

json TransfersSection(const TransfersSnapshot& t, SiteResolver* sites) {
  json totals = json::array();
  for (int k = 0; k < kNumCopyKinds; ++k) {
    for (int h = 0; h < kNumHostKinds; ++h) {
      const TransferStats& s = t.totals[k][h];
      if (s.count == 0) continue;
      json entry = StatsJson(s);
      entry["direction"] = CopyKindName(static_cast<CopyKind>(k));
      entry["host"] = HostKindName(static_cast<HostKind>(h));
      totals.push_back(std::move(entry));
    }
  }
  json best = json::object();
  for (int k = 0; k < kNumCopyKinds; ++k) {
    if (t.best_gbps[k] > 0) best[CopyKindName(static_cast<CopyKind>(k))] = t.best_gbps[k];
  }
  const auto merged = MergedTransferSites(t, sites);
  json list = json::array();
  for (size_t i = 0; i < merged.size() && i < kMaxSitesPerSection; ++i) {
    const auto& [id, site] = merged[i];
    json entry = StatsJson(site.all);
    entry["site"] = id;
    entry["location"] = sites->LocationOf(id);
    entry["sync"] = site.sync_count;
    entry["async"] = site.async_count;
    json directions = json::object();
    for (int k = 0; k < kNumCopyKinds; ++k) {
      if (site.by_kind[k].count > 0) {
        directions[CopyKindName(static_cast<CopyKind>(k))] = StatsJson(site.by_kind[k]);
      }
    }
    json hosts = json::object();
    for (int h = 0; h < kNumHostKinds; ++h) {
      if (site.by_host[h].count > 0) {
        hosts[HostKindName(static_cast<HostKind>(h))] = StatsJson(site.by_host[h]);
      }
    }
    json histogram = json::array();
    for (int b = 0; b < kHistogramBuckets; ++b) {
      if (site.histogram[b] == 0) continue;
      histogram.push_back(
          {{"min_bytes", b == 0 ? 0 : uint64_t{1} << b}, {"count", site.histogram[b]}});
    }
    entry["directions"] = directions;
    entry["hosts"] = hosts;
    entry["histogram"] = histogram;
    entry["stack"] = sites->StackOf(id);
    list.push_back(std::move(entry));
  }
  json findings = json::array();
  const std::vector<TransferFinding> found = FindTransferIssues(merged, t.best_gbps);
  const std::vector<std::string> where = FindingLocations(found, sites);
  for (size_t i = 0; i < found.size(); ++i) {
    const TransferFinding& f = found[i];
    json entry = {{"type", f.type},    {"site", f.site},   {"location", sites->LocationOf(f.site)},
                  {"count", f.count},  {"bytes", f.bytes}, {"message", FindingText(f, where[i])},
                  {"advice", f.advice}};
    if (f.type == "slow_copies" || f.type == "pageable") {
      entry["direction"] = CopyKindName(f.direction);
    }
    if (f.type == "slow_copies") {
      entry["gbps"] = f.gbps;
      entry["best_gbps"] = f.best_gbps;
    }
    findings.push_back(std::move(entry));
  }
  return {{"totals", totals},
          {"best_gbps", best},
          {"sites", list},
          {"findings", findings},
          {"unmatched_records", t.unmatched_records},
          {"pending_dropped", t.pending_dropped}};
}

// Copies of one direction. With a transfers section, its totals: directions
// resolved from activity records (cudaMemcpyDefault, cuMemcpy) and graph
// copies included, so that both places give one answer; else the tracker's.
CopyTotals CopiesOf(const TrackerSnapshot& snap, const ReportContext& context, CopyKind kind) {
  const int k = static_cast<int>(kind);
  if (context.transfers == nullptr) return snap.copies[k];
  CopyTotals c;
  for (const TransferStats& s : context.transfers->totals[k]) {
    c.count += s.count;
    c.bytes += s.bytes;
  }
  return c;
}

json KernelsSection(const std::vector<KernelStats>& kernels, bool timing) {
  uint64_t launches = 0;
  json list = json::array();
  for (const KernelStats& k : kernels) {
    launches += k.launches;
    if (list.size() >= kMaxSitesPerSection) continue;
    json entry = {{"name", DemangleKernel(k.name)}, {"mangled", k.name}, {"launches", k.launches}};
    if (k.timed > 0) {
      entry["timed"] = k.timed;
      entry["gpu_ns"] = k.gpu_ns;
    }
    list.push_back(std::move(entry));
  }
  return {
      {"launches", launches}, {"distinct", kernels.size()}, {"timing", timing}, {"kernels", list}};
}

json LifecycleSection(const LifecycleFigures& l) {
  json blocked = json::object();
  uint64_t total = 0;
  for (int i = 0; i < kNumSyncKinds; ++i) {
    blocked[SyncKindName(static_cast<SyncKind>(i))] = {{"ns", l.sync_ns[i]},
                                                       {"count", l.sync_count[i]}};
    total += l.sync_ns[i];
  }
  blocked["total_ns"] = total;
  json j = {{"first_call_ns", l.first_call_ns},
            {"context_ready_ns", l.context_ready_ns},
            {"first_call_observed", l.first_call_observed},
            {"blocked", blocked}};
  j["init_latency_ns"] = l.context_ready_ns >= l.first_call_ns && l.context_ready_ns != 0
                             ? json(l.context_ready_ns - l.first_call_ns)
                             : json(nullptr);
  j["teardown_ns"] = l.teardown_ns >= 0 ? json(l.teardown_ns) : json(nullptr);
  j["exit_status"] = l.exit_status >= 0 ? json(l.exit_status) : json(nullptr);
  return j;
}

std::string TransferSummary(const TransfersSnapshot& t, SiteResolver* sites) {
  std::string out;
  char line[512];
  for (int k = 0; k < kNumCopyKinds; ++k) {
    TransferStats dir;
    std::string hosts;
    for (int h = 0; h < kNumHostKinds; ++h) {
      const TransferStats& s = t.totals[k][h];
      if (s.count == 0) continue;
      dir.count += s.count;
      dir.bytes += s.bytes;
      dir.duration_ns += s.duration_ns;
      dir.timed_bytes += s.timed_bytes;
      if (h != static_cast<int>(HostKind::kDevice) && h != static_cast<int>(HostKind::kUnknown)) {
        hosts += std::string(hosts.empty() ? "" : ", ") + HostKindName(static_cast<HostKind>(h)) +
                 " " + std::to_string(s.count);
      }
    }
    if (dir.count == 0) continue;
    char timing[64] = "not timed";
    if (dir.duration_ns != 0) {
      std::snprintf(timing, sizeof(timing), "%.2f ms, %.1f GB/s",
                    static_cast<double>(dir.duration_ns) / 1e6,
                    Gbps(dir.timed_bytes, dir.duration_ns));
    }
    std::snprintf(line, sizeof(line), "gpuwatch: transfers %s: %s, %s, %s%s%s%s\n",
                  CopyKindName(static_cast<CopyKind>(k)), Copies(dir.count).c_str(),
                  FormatBytes(dir.bytes).c_str(), timing, hosts.empty() ? "" : " (", hosts.c_str(),
                  hosts.empty() ? "" : ")");
    out += line;
  }
  // Up to four findings: the largest of each type first, so that one kind of
  // problem does not hide the others.
  const auto findings = FindTransferIssues(MergedTransferSites(t, sites), t.best_gbps);
  std::vector<const TransferFinding*> shown;
  for (const TransferFinding& f : findings) {
    const bool type_shown = std::any_of(
        shown.begin(), shown.end(), [&](const TransferFinding* s) { return s->type == f.type; });
    if (!type_shown) shown.push_back(&f);
  }
  for (const TransferFinding& f : findings) {
    if (shown.size() >= 4) break;
    if (std::find(shown.begin(), shown.end(), &f) == shown.end()) shown.push_back(&f);
  }
  std::vector<TransferFinding> listed;
  for (size_t i = 0; i < shown.size() && i < 4; ++i) listed.push_back(*shown[i]);
  const std::vector<std::string> where = FindingLocations(listed, sites);
  for (size_t i = 0; i < listed.size(); ++i) {
    out += "gpuwatch: finding: " + FindingText(listed[i], where[i]) + "\n";
  }
  return out;
}

// What a report says of a site besides its figures: the built-in category
// its stack falls in and the suppression rule that matched it.
SiteClass ClassifySite(const std::vector<Frame>& frames, const Suppressions* suppressions,
                       SuppressionKind kind, bool pytorch_per_tensor) {
  std::vector<FrameView> views;
  views.reserve(frames.size());
  for (const Frame& f : frames) views.push_back({f.function, f.file, f.module});
  SiteClass c;
  c.category = CategoryOf(views, pytorch_per_tensor);
  c.category_off = pytorch_per_tensor && c.category.empty() && !CategoryOf(views).empty();
  if (suppressions != nullptr) c.suppressed = suppressions->Match(kind, views);
  return c;
}

void AddSiteClass(const SiteClass& c, json* entry) {
  if (!c.category.empty() || c.category_off) (*entry)["category"] = std::string(c.category);
  if (c.suppressed != nullptr) (*entry)["suppressed"] = c.suppressed->Text();
}

// Marks each listed leak site with its category and suppression, and splits
// the section's bytes into leaked, suppressed and kept by libraries (a site
// both suppressed and in a category counts as suppressed; omitted sites count
// as leaked).
void ClassifyLeaks(const Suppressions* suppressions, SiteResolver* sites, json* section) {
  uint64_t suppressed_bytes = 0;
  uint64_t suppressed_count = 0;
  uint64_t categorized_bytes = 0;
  uint64_t categorized_count = 0;
  json categories = json::object();
  for (json& site : (*section)["sites"]) {
    const SiteClass& c =
        sites->ClassOf(site["site"].get<uint32_t>(), suppressions, SuppressionKind::kLeak);
    AddSiteClass(c, &site);
    const uint64_t bytes = site["bytes"].get<uint64_t>();
    const uint64_t count = site["count"].get<uint64_t>();
    if (c.suppressed != nullptr) {
      suppressed_bytes += bytes;
      suppressed_count += count;
    } else if (!c.category.empty()) {
      categorized_bytes += bytes;
      categorized_count += count;
      const std::string name(c.category);
      categories[name] = categories.value(name, uint64_t{0}) + bytes;
    }
  }
  json& s = *section;
  s["leaked_bytes"] = s["bytes"].get<uint64_t>() - suppressed_bytes - categorized_bytes;
  s["leaked_count"] = s["count"].get<uint64_t>() - suppressed_count - categorized_count;
  s["suppressed_bytes"] = suppressed_bytes;
  s["categorized_bytes"] = categorized_bytes;
  s["categories"] = categories;
}

json SamplesJson(const std::vector<GrowthSample>& samples) {
  json list = json::array();
  for (const GrowthSample& sample : samples) {
    json entry = {{"time_ns", sample.time_ns}, {"device_bytes", sample.device_bytes}};
    if (sample.mark != 0) {
      entry["mark"] = sample.mark;
      entry["label"] = sample.label;
    }
    list.push_back(std::move(entry));
  }
  return list;
}

// Sites listed in timeline.sites at most.
constexpr size_t kMaxTimelineSites = 10;

// The sites (merged like the leak sites) that held the most device bytes at
// any sample of either series, with their bytes at every sample of both, so
// that the timeline can be drawn stacked by site (`gpuwatch report --format
// html`). Two passes, so only the chosen sites' series are ever held.
json TimelineSites(const TimelineSnapshot& t, SiteResolver* sites) {
  const std::vector<GrowthSample>* series[] = {&t.marks, &t.periodic};
  std::unordered_map<uint32_t, uint64_t> most;  // canonical id -> most bytes at a sample
  std::unordered_map<uint32_t, uint64_t> at_sample;
  for (const auto* samples : series) {
    for (const GrowthSample& sample : *samples) {
      at_sample.clear();
      for (const auto& [id, bytes] : sample.sites) at_sample[sites->Canonical(id)] += bytes;
      for (const auto& [id, bytes] : at_sample) most[id] = std::max(most[id], bytes);
    }
  }
  std::vector<std::pair<uint32_t, uint64_t>> top(most.begin(), most.end());
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (top.size() > kMaxTimelineSites) top.resize(kMaxTimelineSites);
  std::unordered_map<uint32_t, size_t> index;  // canonical id -> position in top
  for (size_t i = 0; i < top.size(); ++i) index.emplace(top[i].first, i);
  std::vector<std::vector<uint64_t>> bytes_at[2];
  for (int s = 0; s < 2; ++s) {
    bytes_at[s].assign(top.size(), std::vector<uint64_t>(series[s]->size(), 0));
    for (size_t i = 0; i < series[s]->size(); ++i) {
      for (const auto& [id, bytes] : (*series[s])[i].sites) {
        const auto it = index.find(sites->Canonical(id));
        if (it != index.end()) bytes_at[s][it->second][i] += bytes;
      }
    }
  }
  json list = json::array();
  for (size_t i = 0; i < top.size(); ++i) {
    const uint32_t id = top[i].first;
    list.push_back({{"site", id},
                    {"location", sites->LocationOf(id)},
                    {"max_bytes", top[i].second},
                    {"marks", std::move(bytes_at[0][i])},
                    {"periodic", std::move(bytes_at[1][i])},
                    {"stack", sites->StackOf(id)}});
  }
  return list;
}

json TimelineSection(const TimelineSnapshot& t, SiteResolver* sites) {
  return {{"capacity", t.capacity},
          {"interval_ms", t.interval_ms},
          {"marks", {{"total", t.marks_total}, {"samples", SamplesJson(t.marks)}}},
          {"periodic", {{"total", t.periodic_total}, {"samples", SamplesJson(t.periodic)}}},
          {"sites", TimelineSites(t, sites)}};
}

// Growth suspects from the marks when the program made any, else from the
// periodic samples (growth.h has the rules).
json GrowthSection(const TimelineSnapshot& t, const Suppressions* suppressions,
                   SiteResolver* sites) {
  const bool by_mark = !t.marks.empty();
  const std::vector<GrowthSample>& samples = by_mark ? t.marks : t.periodic;
  const GrowthUnit unit = by_mark ? GrowthUnit::kMark : GrowthUnit::kSecond;
  json list = json::array();
  for (GrowthSuspect& g :
       FindGrowthSuspects(samples, unit, [sites](uint32_t id) { return sites->Canonical(id); })) {
    json entry = {{"site", g.site},
                  {"location", sites->LocationOf(g.site)},
                  {"rate", g.rate},
                  {"unit", GrowthUnitName(g.unit)},
                  {"first_bytes", g.first_bytes},
                  {"last_bytes", g.last_bytes},
                  {"growth_bytes", g.last_bytes - g.first_bytes},
                  {"from", g.from},
                  {"to", g.to},
                  {"samples", g.samples},
                  {"series", std::move(g.series)},
                  {"stack", sites->StackOf(g.site)}};
    AddSiteClass(sites->ClassOf(g.site, suppressions, SuppressionKind::kGrowth), &entry);
    list.push_back(std::move(entry));
  }
  return {{"basis", samples.empty() ? "none" : GrowthUnitName(unit)},
          {"samples", samples.size()},
          {"suspects", list}};
}

// One line for the stderr summary: how many sites keep growing, and the one
// that grows most (outside suppressions and categories).
std::string GrowthSummary(const TimelineSnapshot& t, const Suppressions* suppressions,
                          SiteResolver* sites) {
  const bool by_mark = !t.marks.empty();
  const std::vector<GrowthSuspect> suspects = FindGrowthSuspects(
      by_mark ? t.marks : t.periodic, by_mark ? GrowthUnit::kMark : GrowthUnit::kSecond,
      [sites](uint32_t id) { return sites->Canonical(id); });
  std::vector<const GrowthSuspect*> counted;
  for (const GrowthSuspect& g : suspects) {
    const SiteClass c = sites->ClassOf(g.site, suppressions, SuppressionKind::kGrowth);
    if (c.suppressed == nullptr && c.category.empty()) counted.push_back(&g);
  }
  if (counted.empty()) return "";
  const GrowthSuspect& top = *counted.front();
  char line[768];
  std::snprintf(line, sizeof(line),
                "gpuwatch: growing: %zu %s; most: +%s per %s at %s (%s -> %s)\n", counted.size(),
                counted.size() == 1 ? "site" : "sites",
                FormatBytes(static_cast<uint64_t>(std::llround(top.rate))).c_str(),
                GrowthUnitName(top.unit), sites->LocationOf(top.site).c_str(),
                FormatBytes(top.first_bytes).c_str(), FormatBytes(top.last_bytes).c_str());
  return line;
}

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

std::string CountOf(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

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

SiteResolver::SiteResolver(const StackTable* stacks, Symbolizer* symbolizer)
    : stacks_(stacks), shared_symbolizer_(symbolizer) {}
SiteResolver::~SiteResolver() = default;

const std::vector<Frame>& SiteResolver::FramesOf(uint32_t stack_id) {
  auto it = cache_.find(stack_id);
  if (it != cache_.end()) return it->second;
  std::vector<Frame> frames;
  if (stacks_ != nullptr && stack_id != 0) {
    const std::span<const uintptr_t> pcs = stacks_->Get(stack_id);
    if (!pcs.empty()) {
      Symbolizer* symbolizer = shared_symbolizer_;
      if (symbolizer == nullptr) {
        if (own_symbolizer_ == nullptr) own_symbolizer_ = std::make_unique<Symbolizer>();
        symbolizer = own_symbolizer_.get();
      }
      SymbolizeMixedStack(symbolizer, pcs, &frames);  // Python frames merged in
    }
  }
  return cache_.emplace(stack_id, std::move(frames)).first->second;
}

const std::vector<uint32_t>& SiteResolver::StackOf(uint32_t stack_id) {
  auto it = stack_indices_.find(stack_id);
  if (it != stack_indices_.end()) return it->second;
  std::vector<uint32_t> indices;
  std::string key;
  for (const Frame& f : FramesOf(stack_id)) {
    key.assign(f.module);
    key += '\0';
    key += f.function;
    key += '\0';
    key += f.file;
    key += '\0';
    key += std::to_string(f.line);
    key += f.inlined ? 'i' : 'o';  // the same line inlined or not: two frames
    const auto [at, added] =
        frame_index_.try_emplace(key, static_cast<uint32_t>(frame_table_.size()));
    if (added) frame_table_.push_back(&f);
    indices.push_back(at->second);
  }
  return stack_indices_.emplace(stack_id, std::move(indices)).first->second;
}

void SiteResolver::ClearFrameTable() {
  frame_table_.clear();
  frame_index_.clear();
  stack_indices_.clear();
}

uint32_t SiteResolver::Canonical(uint32_t stack_id) {
  if (stack_id < canonical_flat_.size() && canonical_flat_[stack_id] != kUnresolved) {
    return canonical_flat_[stack_id];
  }
  if (auto it = canonical_.find(stack_id); it != canonical_.end()) return it->second;
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
  if (stack_id < canonical_flat_.size()) {
    canonical_flat_[stack_id] = canonical;
  } else {
    canonical_.emplace(stack_id, canonical);
  }
  return canonical;
}

void SiteResolver::Prepare(std::vector<uint32_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (!ids.empty() && ids.back() >= canonical_flat_.size()) {
    canonical_flat_.resize(size_t{ids.back()} + 1, kUnresolved);
  }
  for (const uint32_t id : ids) Canonical(id);
}

const SiteClass& SiteResolver::ClassOf(uint32_t stack_id, const Suppressions* suppressions,
                                       SuppressionKind kind) {
  const uint64_t key = (uint64_t{static_cast<uint8_t>(kind)} << 32) | stack_id;
  if (auto it = classes_.find(key); it != classes_.end()) return it->second;
  return classes_
      .emplace(key, ClassifySite(FramesOf(stack_id), suppressions, kind, pytorch_per_tensor_))
      .first->second;
}

std::string SiteResolver::LocationOf(uint32_t stack_id) {
  const std::vector<Frame>& frames = FramesOf(stack_id);
  if (const Frame* f = SiteFrame(frames)) {
    return std::string(Basename(f->file)) + ":" + std::to_string(f->line);
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
  sites->ClearFrameTable();
  json kinds = json::object();
  for (int i = 0; i < kNumMemKinds; ++i) {
    kinds[MemKindName(static_cast<MemKind>(i))] = KindJson(snap.kinds[i]);
  }
  json copies = json::object();
  for (int i = 0; i < kNumCopyKinds; ++i) {
    const CopyTotals c = CopiesOf(snap, context, static_cast<CopyKind>(i));
    if (c.count == 0) continue;
    copies[CopyKindName(static_cast<CopyKind>(i))] = json{{"count", c.count}, {"bytes", c.bytes}};
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
        {"python_frames_dropped", context.python_frames_dropped},
        {"oom_count", context.oom_count}}},
      {"stack_depth", context.depth},
      {"tool_frames", context.tool_frames},
      {"unwinder", context.unwinder},
      {"unwind_fallbacks", context.unwind_fallbacks},
  };
  if (!context.pytorch_allocator.empty()) {
    report["process"]["pytorch_allocator"] = context.pytorch_allocator;
  }
  std::vector<uint32_t> ids;
  for (const auto& [id, t] : snap.sites) ids.push_back(id);
  for (const LiveAlloc& a : snap.live) ids.push_back(a.stack_id);
  for (const auto& [id, bytes] : snap.peak_sites) ids.push_back(id);
  if (context.oom != nullptr) ids.push_back(context.oom->stack_id);
  if (context.transfers != nullptr) {
    for (const auto& [id, t] : context.transfers->sites) ids.push_back(id);
  }
  if (context.timeline != nullptr) {
    for (const auto* series : {&context.timeline->marks, &context.timeline->periodic}) {
      for (const GrowthSample& sample : *series) {
        for (const auto& [id, bytes] : sample.sites) ids.push_back(id);
      }
    }
  }
  if (context.trace != nullptr) {
    for (const uint32_t id : TraceSiteIds(*context.trace)) ids.push_back(id);
  }
  sites->Prepare(std::move(ids));
  report["leaks"] = {{"device", LeakSection(GroupLive(snap.live, true, sites), sites)},
                     {"host", LeakSection(GroupLive(snap.live, false, sites), sites)}};
  report["peak"] = PeakSection(snap, sites);
  ClassifyLeaks(context.suppressions, sites, &report["leaks"]["device"]);
  ClassifyLeaks(context.suppressions, sites, &report["leaks"]["host"]);
  report["sites"] = SitesSection(snap, sites);
  if (context.timeline != nullptr) {
    report["growth"] = GrowthSection(*context.timeline, context.suppressions, sites);
    report["timeline"] = TimelineSection(*context.timeline, sites);
  }
  if (context.transfers != nullptr)
    report["transfers"] = TransfersSection(*context.transfers, sites);
  if (context.kernels != nullptr) {
    report["kernels"] = KernelsSection(*context.kernels, context.kernel_timing);
  }
  report["lifecycle"] = LifecycleSection(context.lifecycle);
  if (context.trace != nullptr) report["trace"] = TraceSectionJson(*context.trace, snap, sites);
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
                     {"stack", sites->StackOf(oom.stack_id)}};
  }
  report["frame_table"] = FrameTableJson(sites->frame_table());
  return DumpReport(std::move(report));  // the trace's events compact
}

uint64_t LeakedDeviceBytes(const TrackerSnapshot& snap, SiteResolver* sites,
                           const Suppressions* suppressions) {
  // As in the report: only the listed sites are classified; the rest count
  // as leaked.
  uint64_t leaked = 0;
  const std::vector<LeakGroup> groups = GroupLive(snap.live, true, sites);
  for (size_t i = 0; i < groups.size(); ++i) {
    if (i < kMaxSitesPerSection) {
      const SiteClass& c = sites->ClassOf(groups[i].stack_id, suppressions, SuppressionKind::kLeak);
      if (c.suppressed != nullptr || !c.category.empty()) continue;
    }
    leaked += groups[i].bytes;
  }
  return leaked;
}

std::string BuildSummaryText(const TrackerSnapshot& snap, const ReportContext& context,
                             SiteResolver* sites, const std::string& path) {
  constexpr size_t kTopSites = 5;
  std::string out;
  char line[768];
  uint64_t device_allocs = 0;
  uint64_t host_allocs = 0;
  uint64_t copies = 0;
  for (int k = 0; k < kNumMemKinds; ++k) {
    (IsDeviceKind(static_cast<MemKind>(k)) ? device_allocs : host_allocs) += snap.kinds[k].allocs;
  }
  for (int k = 0; k < kNumCopyKinds; ++k)
    copies += CopiesOf(snap, context, static_cast<CopyKind>(k)).count;
  char host[64] = "";
  if (host_allocs != 0) {
    std::snprintf(host, sizeof(host), " (and %" PRIu64 " of pinned host memory)", host_allocs);
  }
  std::snprintf(line, sizeof(line),
                "gpuwatch: %" PRIu64 " device allocations%s, %s, %" PRIu64
                " kernel launches; device peak %s\n",
                device_allocs, host, Copies(copies).c_str(), snap.launches,
                FormatBytes(snap.device_peak_bytes).c_str());
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
    std::snprintf(line, sizeof(line), "gpuwatch: still live: %s of %s memory in %s from %s\n",
                  FormatBytes(bytes).c_str(), device ? "device" : "pinned host",
                  CountOf(count, "allocation", "allocations").c_str(),
                  CountOf(groups.size(), "site", "sites").c_str());
    out += line;
    for (size_t i = 0; i < groups.size() && i < kTopSites; ++i) {
      const std::vector<Frame>& frames = sites->FramesOf(groups[i].stack_id);
      const Frame* site = SiteFrame(frames);
      const std::string function =
          site != nullptr ? site->function : (frames.empty() ? "" : frames.front().function);
      std::snprintf(line, sizeof(line), "gpuwatch:   %10s in %6" PRIu64 " at %s%s%s%s\n",
                    FormatBytes(groups[i].bytes).c_str(), groups[i].count,
                    sites->LocationOf(groups[i].stack_id).c_str(), function.empty() ? "" : " (",
                    function.c_str(), function.empty() ? "" : ")");
      out += line;
    }
  }
  if (snap.unknown_frees > 0) {
    out += "gpuwatch: " + CountOf(snap.unknown_frees, "free", "frees") + " of unknown pointers\n";
  }
  if (context.timeline != nullptr) {
    out += GrowthSummary(*context.timeline, context.suppressions, sites);
  }
  if (context.transfers != nullptr) out += TransferSummary(*context.transfers, sites);
  if (context.kernels != nullptr && !context.kernels->empty()) {
    const KernelStats& top = context.kernels->front();
    uint64_t launches = 0;
    for (const KernelStats& k : *context.kernels) launches += k.launches;
    std::snprintf(line, sizeof(line), "gpuwatch: kernels: %s of %s; most: %s x%" PRIu64 "\n",
                  CountOf(launches, "launch", "launches").c_str(),
                  CountOf(context.kernels->size(), "kernel", "kernels").c_str(),
                  DemangleKernel(top.name).c_str(), top.launches);
    out += line;
  }
  const LifecycleFigures& l = context.lifecycle;
  uint64_t blocked = 0;
  for (const uint64_t ns : l.sync_ns) blocked += ns;
  if (l.context_ready_ns != 0 || blocked != 0) {
    const double init_ms = l.context_ready_ns >= l.first_call_ns
                               ? static_cast<double>(l.context_ready_ns - l.first_call_ns) / 1e6
                               : 0.0;
    std::snprintf(line, sizeof(line),
                  "gpuwatch: lifecycle: CUDA init %.1f ms%s; host blocked in synchronization "
                  "%.1f ms\n",
                  init_ms, l.first_call_observed ? "" : " (from attach)",
                  static_cast<double>(blocked) / 1e6);
    out += line;
  }
  if (!path.empty()) out += "gpuwatch: report written to " + path + "\n";
  return out;
}

bool SetReportTeardown(const std::string& path, uint64_t teardown_ns, std::string* error) {
  std::string text;
  {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
      *error = "cannot open " + path + ": " + std::strerror(errno);
      return false;
    }
    char buf[65536];
    for (;;) {
      const ssize_t n = read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
    close(fd);
  }
  json report = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!report.is_object() || !report.contains("lifecycle")) {
    *error = path + " is not a gpuwatch report";
    return false;
  }
  report["lifecycle"]["teardown_ns"] = teardown_ns;
  return WriteFileAtomically(path, DumpReport(std::move(report)), error);
}

namespace {

// Under a file size limit (`ulimit -f`) a write past it raises SIGXFSZ, whose
// default action ends the process. While a report is written the signal is
// blocked on this thread, and the one a failed write raised is discarded:
// the write fails with EFBIG, which costs the report, not the host.
class FileSizeSignalGuard {
 public:
  FileSizeSignalGuard() {
    sigemptyset(&xfsz_);
    sigaddset(&xfsz_, SIGXFSZ);
    blocked_ = pthread_sigmask(SIG_BLOCK, &xfsz_, &old_) == 0;
  }
  ~FileSizeSignalGuard() {
    if (!blocked_) return;
    sigset_t pending;
    if (sigismember(&old_, SIGXFSZ) == 0 && sigpending(&pending) == 0 &&
        sigismember(&pending, SIGXFSZ) == 1) {
      const timespec now{};
      sigtimedwait(&xfsz_, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  FileSizeSignalGuard(const FileSizeSignalGuard&) = delete;
  FileSizeSignalGuard& operator=(const FileSizeSignalGuard&) = delete;

 private:
  sigset_t xfsz_{};
  sigset_t old_{};
  bool blocked_ = false;
};

}  // namespace

bool WriteFileAtomically(const std::string& path, const std::string& contents, std::string* error) {
  const FileSizeSignalGuard no_sigxfsz;
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
