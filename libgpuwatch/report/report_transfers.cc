// The report's `transfers` section and the summary's transfer lines.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "libgpuwatch/report/report_sections.h"
#include "libgpuwatch/symbolize/mixed_stack.h"

namespace gpuwatch {

using nlohmann::json;

namespace {

TransferFigures FiguresOf(const TransferStats& t) {
  TransferFigures f;
  f.count = t.count;
  f.bytes = t.bytes;
  if (t.timed_count > 0) {
    f.timed_count = t.timed_count;
    f.duration_ns = t.duration_ns;
    f.gbps = Gbps(t.timed_bytes, t.duration_ns);
  }
  return f;
}

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

}  // namespace

ReportTransfers TransfersSection(const TransfersSnapshot& t, const ReportAnalysis& analysis,
                                 SiteResolver* sites) {
  ReportTransfers out;
  for (int k = 0; k < kNumCopyKinds; ++k) {
    for (int h = 0; h < kNumHostKinds; ++h) {
      const TransferStats& s = t.totals[k][h];
      if (s.count == 0) continue;
      TransferTotal& row = out.totals.emplace_back();
      static_cast<TransferFigures&>(row) = FiguresOf(s);
      row.direction = CopyKindName(static_cast<CopyKind>(k));
      row.host = HostKindName(static_cast<HostKind>(h));
    }
  }
  for (int k = 0; k < kNumCopyKinds; ++k) {
    if (t.best_gbps[k] > 0) out.best_gbps[CopyKindName(static_cast<CopyKind>(k))] = t.best_gbps[k];
  }
  const auto& merged = analysis.transfer_sites;
  for (size_t i = 0; i < merged.size() && i < kMaxSitesPerSection; ++i) {
    const auto& [id, site] = merged[i];
    TransferSite& entry = out.sites.emplace_back();
    entry.all = FiguresOf(site.all);
    entry.sync = site.sync_count;
    entry.async = site.async_count;
    for (int k = 0; k < kNumCopyKinds; ++k) {
      if (site.by_kind[k].count > 0) {
        entry.directions[CopyKindName(static_cast<CopyKind>(k))] = FiguresOf(site.by_kind[k]);
      }
    }
    for (int h = 0; h < kNumHostKinds; ++h) {
      if (site.by_host[h].count > 0) {
        entry.hosts[HostKindName(static_cast<HostKind>(h))] = FiguresOf(site.by_host[h]);
      }
    }
    for (int b = 0; b < kHistogramBuckets; ++b) {
      if (site.histogram[b] != 0) {
        entry.histogram.push_back({b == 0 ? 0 : uint64_t{1} << b, site.histogram[b]});
      }
    }
    FillSite(id, nullptr, sites, &entry);
  }
  const std::vector<TransferFinding>& found = analysis.transfer_findings;
  const std::vector<std::string> where = FindingLocations(found, sites);
  for (size_t i = 0; i < found.size(); ++i) {
    const TransferFinding& f = found[i];
    TransferFindingRow& entry = out.findings.emplace_back();
    entry.type = f.type;
    entry.site = f.site;
    entry.location = sites->LocationOf(f.site);
    entry.count = f.count;
    entry.bytes = f.bytes;
    entry.message = FindingText(f, where[i]);
    entry.advice = f.advice;
    if (f.type == "slow_copies" || f.type == "pageable") {
      entry.direction = CopyKindName(f.direction);
    }
    if (f.type == "slow_copies") {
      entry.gbps = f.gbps;
      entry.best_gbps = f.best_gbps;
    }
  }
  out.unmatched_records = t.unmatched_records;
  out.pending_dropped = t.pending_dropped;
  return out;
}

std::string TransferSummary(const TransfersSnapshot& t, const ReportAnalysis& analysis,
                            SiteResolver* sites) {
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
  const std::vector<TransferFinding>& findings = analysis.transfer_findings;
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

}  // namespace gpuwatch
