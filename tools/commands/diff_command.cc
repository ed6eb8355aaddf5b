// `gpuwatch diff BASE NEW`: what grew, shrank, appeared or went away between
// two reports, in total and per site. Sites are matched by their stacks
// (SiteKey), not by id: ids differ from run to run.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

#include "libgpuwatch/report/format.h"
#include "tools/commands.h"
#include "tools/reading/report_reader.h"

namespace gpuwatch::tools {

namespace {

struct SiteFigures {
  const ReportSite* base_site = nullptr;
  const ReportSite* new_site = nullptr;
  uint64_t leaked[2] = {0, 0};  // [base, new]
  uint64_t allocated[2] = {0, 0};
  uint64_t peak[2] = {0, 0};
  double rate[2] = {0, 0};  // growth suspects' rate; 0 = not a suspect
  std::string unit;
};

void Collect(const ReportModel& m, int side, std::map<std::string, SiteFigures>* sites) {
  auto at = [&](const ReportSite& site) -> SiteFigures& {
    SiteFigures& f = (*sites)[SiteKey(site)];
    (side == 0 ? f.base_site : f.new_site) = &site;
    return f;
  };
  for (const LeakSite& s : m.leaks_device.sites) at(s).leaked[side] += s.bytes;
  for (const AllocSite& s : m.sites) {
    at(s).allocated[side] += s.alloc_bytes - std::min(s.alloc_bytes, s.host_alloc_bytes);
  }
  for (const PeakSite& s : m.peak.sites) at(s).peak[side] += s.bytes;
  if (m.growth.has_value()) {
    for (const GrowthSite& s : m.growth->suspects) {
      SiteFigures& f = at(s);
      f.rate[side] += s.rate;
      f.unit = s.unit;
    }
  }
}

const char* Status(uint64_t base, uint64_t now) {
  if (base == now) return "same";
  if (base == 0) return "new";
  if (now == 0) return "gone";
  return now > base ? "grew" : "shrank";
}

std::string PadRight(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

// now - base, saturated: counts up to 2^64 - 1 must not overflow a signed type.
int64_t Delta(uint64_t base, uint64_t now) {
  constexpr uint64_t kMax = INT64_MAX;
  if (now >= base) return now - base > kMax ? INT64_MAX : static_cast<int64_t>(now - base);
  return base - now > kMax ? INT64_MIN : -static_cast<int64_t>(base - now);
}

void TotalRow(FILE* out, const char* name, uint64_t base, uint64_t now, bool bytes) {
  const std::string b = bytes ? FormatBytes(base) : std::to_string(base);
  const std::string n = bytes ? FormatBytes(now) : std::to_string(now);
  std::string change;
  if (bytes) {
    change = SignedBytes(Delta(base, now));
  } else {
    const int64_t d = Delta(base, now);
    change = (d > 0 ? "+" : "") + std::to_string(d);
  }
  std::fprintf(out, "  %s %12s %12s %12s  %s\n", PadRight(name, 22).c_str(), b.c_str(), n.c_str(),
               change.c_str(), base == now ? "" : PercentChange(base, now).c_str());
}

const ReportSite& SiteOf(const SiteFigures& f) {
  return f.new_site != nullptr ? *f.new_site : *f.base_site;
}

enum class Figure { kLeaked, kAllocated, kPeak };

// One per-site section: the sites whose figure changed, biggest change first.
void SiteSection(FILE* out, const char* title, const std::map<std::string, SiteFigures>& sites,
                 Figure which, size_t top) {
  struct Row {
    const SiteFigures* f;
    uint64_t base;
    uint64_t now;
  };
  std::vector<Row> rows;
  for (const auto& [key, f] : sites) {
    const uint64_t* v = which == Figure::kLeaked      ? f.leaked
                        : which == Figure::kAllocated ? f.allocated
                                                      : f.peak;
    if (v[0] != v[1]) rows.push_back({&f, v[0], v[1]});
  }
  if (rows.empty()) return;
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    const uint64_t da = a.now > a.base ? a.now - a.base : a.base - a.now;
    const uint64_t db = b.now > b.base ? b.now - b.base : b.base - b.now;
    if (da != db) return da > db;
    return Describe(SiteOf(*a.f)) < Describe(SiteOf(*b.f));
  });
  std::fprintf(out, "\n%s:\n", title);
  for (size_t i = 0; i < rows.size() && i < top; ++i) {
    const Row& r = rows[i];
    std::fprintf(out, "  %-6s %12s  %10s -> %-10s  %s\n", Status(r.base, r.now),
                 SignedBytes(Delta(r.base, r.now)).c_str(), FormatBytes(r.base).c_str(),
                 FormatBytes(r.now).c_str(), Describe(SiteOf(*r.f)).c_str());
  }
  if (rows.size() > top) {
    std::fprintf(out, "  ... and %zu more sites (--top to show more)\n", rows.size() - top);
  }
}

std::string Rate(double rate, const std::string& unit) {
  return rate <= 0 ? "-" : FormatRate(rate, unit, RateStyle::kCompact);
}

void GrowthSection(FILE* out, const std::map<std::string, SiteFigures>& sites, size_t top) {
  std::vector<const SiteFigures*> rows;
  for (const auto& [key, f] : sites) {
    if (std::llround(f.rate[0]) != std::llround(f.rate[1])) rows.push_back(&f);
  }
  if (rows.empty()) return;
  std::sort(rows.begin(), rows.end(), [](const SiteFigures* a, const SiteFigures* b) {
    return std::fabs(a->rate[1] - a->rate[0]) > std::fabs(b->rate[1] - b->rate[0]);
  });
  std::fprintf(out, "\nGrowth suspects (rate):\n");
  for (size_t i = 0; i < rows.size() && i < top; ++i) {
    const SiteFigures& f = *rows[i];
    const char* status = f.rate[0] <= 0          ? "new"
                         : f.rate[1] <= 0        ? "gone"
                         : f.rate[1] > f.rate[0] ? "faster"
                                                 : "slower";
    std::fprintf(out, "  %-6s %14s -> %-14s  %s\n", status, Rate(f.rate[0], f.unit).c_str(),
                 Rate(f.rate[1], f.unit).c_str(), Describe(SiteOf(f)).c_str());
  }
}

// Per phase (the phases section, by path): the peak while it was open, and
// the bytes it allocated and left live, where any of them changed.
struct PhaseFigures {
  uint64_t peak[2] = {0, 0};
  uint64_t allocated[2] = {0, 0};
  uint64_t live[2] = {0, 0};
};

void CollectPhases(const ReportModel& m, int side, std::map<std::string, PhaseFigures>* out) {
  if (!m.phases.has_value()) return;
  for (const PhasePath& p : m.phases->paths) {
    PhaseFigures& f = (*out)[p.path];
    f.peak[side] = p.peak_bytes;
    f.allocated[side] = p.alloc_bytes;
    f.live[side] = p.live_bytes;
  }
}

// False when no phase changed.
bool PhaseSection(FILE* out, const std::map<std::string, PhaseFigures>& phases, size_t top) {
  std::vector<std::pair<const std::string*, const PhaseFigures*>> rows;
  for (const auto& [path, f] : phases) {
    if (f.peak[0] != f.peak[1] || f.allocated[0] != f.allocated[1] || f.live[0] != f.live[1]) {
      rows.emplace_back(&path, &f);
    }
  }
  if (rows.empty()) return false;
  auto change = [](const PhaseFigures& f) {
    return f.peak[1] > f.peak[0] ? f.peak[1] - f.peak[0] : f.peak[0] - f.peak[1];
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
    return change(*a.second) > change(*b.second);
  });
  std::fprintf(out, "\nPhases (device memory while open; allocated and live in the phase):\n");
  for (size_t i = 0; i < rows.size() && i < top; ++i) {
    const PhaseFigures& f = *rows[i].second;
    std::string extra;
    if (f.allocated[0] != f.allocated[1]) {
      extra += "  allocated " + FormatBytes(f.allocated[0]) + " -> " + FormatBytes(f.allocated[1]);
    }
    if (f.live[0] != f.live[1]) {
      extra += "  live " + FormatBytes(f.live[0]) + " -> " + FormatBytes(f.live[1]);
    }
    std::fprintf(out, "  %-6s %12s  %10s -> %-10s  %s%s\n", Status(f.peak[0], f.peak[1]),
                 SignedBytes(Delta(f.peak[0], f.peak[1])).c_str(), FormatBytes(f.peak[0]).c_str(),
                 FormatBytes(f.peak[1]).c_str(), rows[i].first->c_str(), extra.c_str());
  }
  if (rows.size() > top) {
    std::fprintf(out, "  ... and %zu more phases (--top to show more)\n", rows.size() - top);
  }
  return true;
}

}  // namespace

int DiffCommand(const DiffOptions& options, FILE* out) {
  Report base;
  Report now;
  std::string error;
  if (!ReadReport(options.base, &base, &error) || !ReadReport(options.now, &now, &error)) {
    std::fprintf(stderr, "gpuwatch diff: %s\n", error.c_str());
    return 2;
  }
  const size_t top = static_cast<size_t>(std::max(options.top, 1));
  std::map<std::string, SiteFigures> sites;
  Collect(base.model, 0, &sites);
  Collect(now.model, 1, &sites);

  std::fprintf(out, "gpuwatch diff %s -> %s\n\n", base.path.c_str(), now.path.c_str());
  std::fprintf(out, "  %s %12s %12s %12s\n", PadRight("", 22).c_str(), "base", "new", "change");
  const ReportTotals& bt = base.model.totals;
  const ReportTotals& nt = now.model.totals;
  TotalRow(out, "device live at exit", base.model.leaks_device.bytes, now.model.leaks_device.bytes,
           true);
  TotalRow(out, "device peak", bt.device_peak_bytes, nt.device_peak_bytes, true);
  // Device and pinned host memory apart (host rows only when either run has any).
  const KindSums base_device = SumKinds(bt, false);
  const KindSums now_device = SumKinds(nt, false);
  TotalRow(out, "device bytes allocated", base_device.alloc_bytes, now_device.alloc_bytes, true);
  TotalRow(out, "device allocations", base_device.allocs, now_device.allocs, false);
  const KindSums base_host = SumKinds(bt, true);
  const KindSums now_host = SumKinds(nt, true);
  if (base_host.allocs != 0 || now_host.allocs != 0) {
    TotalRow(out, "host bytes allocated", base_host.alloc_bytes, now_host.alloc_bytes, true);
    TotalRow(out, "host allocations", base_host.allocs, now_host.allocs, false);
  }
  TotalRow(out, "kernel launches", bt.kernel_launches, nt.kernel_launches, false);

  SiteSection(out, "Live at exit (leaked), by site", sites, Figure::kLeaked, top);
  GrowthSection(out, sites, top);
  SiteSection(out, "Live at the peak, by site", sites, Figure::kPeak, top);
  SiteSection(out, "Device bytes allocated, by site", sites, Figure::kAllocated, top);
  std::map<std::string, PhaseFigures> phases;
  CollectPhases(base.model, 0, &phases);
  CollectPhases(now.model, 1, &phases);
  const bool phases_changed = PhaseSection(out, phases, top);
  bool any_change = false;
  for (const auto& [key, f] : sites) {
    any_change = any_change || f.leaked[0] != f.leaked[1] || f.allocated[0] != f.allocated[1] ||
                 f.peak[0] != f.peak[1] || std::llround(f.rate[0]) != std::llround(f.rate[1]);
  }
  if (!any_change) {
    std::fprintf(out, "\nNo site changed%s.\n", phases_changed ? " (phases did: above)" : "");
  }
  return 0;
}

}  // namespace gpuwatch::tools
