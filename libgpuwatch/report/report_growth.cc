// The report's `growth` and `timeline` sections and the summary's growth
// line.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "libgpuwatch/report/report_sections.h"

namespace gpuwatch {

namespace {

TimelineSeries SeriesOf(uint64_t total, const std::vector<GrowthSample>& samples) {
  TimelineSeries out;
  out.total = total;
  for (const GrowthSample& sample : samples) {
    TimelineSample& s = out.samples.emplace_back();
    s.time_ns = sample.time_ns;
    s.device_bytes = sample.device_bytes;
    if (sample.mark != 0) {
      s.mark = sample.mark;
      s.label = sample.label;
    }
  }
  return out;
}

// Sites listed in timeline.sites at most.
constexpr size_t kMaxTimelineSites = 10;

// The sites (merged like the leak sites) that held the most device bytes at
// any sample of either series, with their bytes at every sample of both, so
// that the timeline can be drawn stacked by site (`gpuwatch report --format
// html`). Two passes, so only the chosen sites' series are ever held.
std::vector<TimelineSite> TimelineSites(const TimelineSnapshot& t, SiteResolver* sites) {
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
  std::vector<TimelineSite> list(top.size());
  for (size_t i = 0; i < top.size(); ++i) {
    TimelineSite& site = list[i];
    FillSite(top[i].first, nullptr, sites, &site);
    site.max_bytes = top[i].second;
    site.marks = std::move(bytes_at[0][i]);
    site.periodic = std::move(bytes_at[1][i]);
  }
  return list;
}

}  // namespace

ReportTimeline TimelineSection(const TimelineSnapshot& t, SiteResolver* sites) {
  ReportTimeline out;
  out.capacity = t.capacity;
  out.interval_ms = t.interval_ms;
  out.marks = SeriesOf(t.marks_total, t.marks);
  out.periodic = SeriesOf(t.periodic_total, t.periodic);
  out.sites = TimelineSites(t, sites);
  return out;
}

// Growth suspects from the marks when the program made any, else from the
// periodic samples (growth.h has the rules).
ReportGrowth GrowthSection(const TimelineSnapshot& t, const ReportAnalysis& analysis,
                           const Suppressions* suppressions, const PhasesSnapshot* phases,
                           SiteResolver* sites) {
  // A suspect's phase: that of its live memory (the leak groups' own).
  std::unordered_map<uint32_t, uint32_t> phase_of;  // canonical site -> path id
  if (phases != nullptr && !phases->rows.empty()) {
    for (const LeakGroup& g : analysis.device_live) {
      if (g.phase != 0) phase_of.emplace(g.stack_id, g.phase);
    }
  }
  const bool by_mark = !t.marks.empty();
  const std::vector<GrowthSample>& samples = by_mark ? t.marks : t.periodic;
  const GrowthUnit unit = by_mark ? GrowthUnit::kMark : GrowthUnit::kSecond;
  ReportGrowth out;
  out.basis = samples.empty() ? "none" : GrowthUnitName(unit);
  out.samples = samples.size();
  for (const GrowthSuspect& g : analysis.growth_suspects) {
    GrowthSite& site = out.suspects.emplace_back();
    const SiteClass& c = sites->ClassOf(g.site, suppressions, SuppressionKind::kGrowth);
    FillSite(g.site, &c, sites, &site);
    site.rate = g.rate;
    site.unit = GrowthUnitName(g.unit);
    site.first_bytes = g.first_bytes;
    site.last_bytes = g.last_bytes;
    site.growth_bytes = g.last_bytes - g.first_bytes;
    site.from = g.from;
    site.to = g.to;
    site.samples = g.samples;
    site.series = g.series;
    const auto it = phase_of.find(g.site);
    if (phases != nullptr && it != phase_of.end()) {
      if (const int p = phases->IndexOf(it->second); p >= 0) {
        site.phase = phases->paths[static_cast<size_t>(p)];
      }
    }
  }
  return out;
}

// One line for the stderr summary: how many sites keep growing, and the one
// that grows most (outside suppressions and categories).
std::string GrowthSummary(const ReportAnalysis& analysis, const Suppressions* suppressions,
                          SiteResolver* sites) {
  std::vector<const GrowthSuspect*> counted;
  for (const GrowthSuspect& g : analysis.growth_suspects) {
    const SiteClass c = sites->ClassOf(g.site, suppressions, SuppressionKind::kGrowth);
    if (c.suppressed == nullptr && c.category.empty()) counted.push_back(&g);
  }
  if (counted.empty()) return "";
  const GrowthSuspect& top = *counted.front();
  char line[768];
  std::snprintf(line, sizeof(line), "gpuwatch: growing: %zu %s; most: +%s at %s (%s -> %s)\n",
                counted.size(), counted.size() == 1 ? "site" : "sites",
                FormatRate(top.rate, GrowthUnitName(top.unit), RateStyle::kProse).c_str(),
                sites->LocationOf(top.site).c_str(), FormatBytes(top.first_bytes).c_str(),
                FormatBytes(top.last_bytes).c_str());
  return line;
}

}  // namespace gpuwatch
