// `gpuwatch merge FILE... -o OUT`: one report from the reports of many
// processes (DataLoader workers, ranks of a distributed job). The result is a
// gpuwatch report itself (trigger "merge"), so `report`, `check` and `diff`
// read it: totals summed, a per-process table ("processes"), sites summed
// across processes, matched by their stacks (site ids are renumbered), and
// phases by path, PyTorch's blocks as sums. It is written in the schema's current version, with a
// frame table.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "libgpuwatch/base/version.h"
#include "libgpuwatch/report/file.h"
#include "libgpuwatch/report/format.h"
#include "libgpuwatch/report/report_schema.h"
#include "tools/commands.h"
#include "tools/reading/report_reader.h"

namespace gpuwatch::tools {

namespace {

template <typename T>
void MergeCounts(const T& from, T* into) {
  for (const CountField<T>& f : T::Counts()) {
    uint64_t& m = into->*f.member;
    const uint64_t v = from.*f.member;
    switch (f.merge) {
      case MergeRule::kSum:
        m += v;
        break;
      case MergeRule::kMax:
        m = std::max(m, v);
        break;
      case MergeRule::kMin:
        m = std::min(m, v);
        break;
    }
  }
}

void SumMap(const CountMap& from, CountMap* into) {
  for (const auto& [name, n] : from) (*into)[name] += n;
}

// What a site list merges beyond its counts.
void MergeMore(const LeakSite& from, LeakSite* into) { SumMap(from.kinds, &into->kinds); }
void MergeMore(const GrowthSite& from, GrowthSite* into) {
  into->rate += from.rate;
  into->from = std::min(into->from, from.from);
  into->to = std::max(into->to, from.to);
}
void MergeMore(const AllocSite& from, AllocSite* into) {
  if (into->sizes.size() < from.sizes.size()) into->sizes.resize(from.sizes.size());
  for (size_t b = 0; b < from.sizes.size(); ++b) into->sizes[b] += from.sizes[b];
}
void MergeMore(const ReportSite& /*from*/, ReportSite* /*into*/) {}

class SiteIds {
 public:
  uint32_t IdOf(const ReportSite& site) {
    auto [it, inserted] = ids_.emplace(SiteKey(site), static_cast<uint32_t>(ids_.size() + 1));
    return it->second;
  }

 private:
  std::map<std::string, uint32_t> ids_;
};

// Entries of one site list merged by stack: counts by their rule (T's field
// table), the rest (location, category, frames) taken from the first.
template <typename T>
class SiteMerger {
 public:
  explicit SiteMerger(SiteIds* ids) : ids_(ids) {}

  void Add(const T& site, const std::string& extra_key = "") {
    const auto [it, added] = index_.try_emplace(SiteKey(site) + extra_key, merged_.size());
    if (added) {
      T& entry = merged_.emplace_back(site);
      entry.site = ids_->IdOf(site);
      entry.processes = 1;
      if constexpr (std::is_same_v<T, GrowthSite>) entry.series.clear();
      return;
    }
    T& m = merged_[it->second];
    MergeCounts(site, &m);
    MergeMore(site, &m);
    ++m.processes;
  }

  // Largest `by` first; ties in the order of the inputs.
  std::vector<T> Sorted(uint64_t T::*by) {
    std::stable_sort(merged_.begin(), merged_.end(),
                     [by](const T& a, const T& b) { return a.*by > b.*by; });
    return std::move(merged_);
  }

 private:
  SiteIds* ids_;
  std::map<std::string, size_t> index_;
  std::vector<T> merged_;
};

// The reports' counts of T summed (totals: peak figures are summed too, see
// docs/report-format.md).
template <typename T>
void SumCounts(const T& from, T* into) {
  for (const CountField<T>& f : T::Counts()) into->*f.member += from.*f.member;
}

LeakList MergeLeakList(const std::vector<Report>& reports, LeakList ReportModel::*which,
                       SiteIds* ids) {
  SiteMerger<LeakSite> sites(ids);
  LeakList out;
  for (const Report& r : reports) {
    const LeakList& l = r.model.*which;
    SumCounts(l, &out);
    for (const LeakSite& site : l.sites) sites.Add(site);
  }
  out.sites = sites.Sorted(&LeakSite::bytes);
  // What counts as leaked, as the library splits it.
  out.split = SplitLeaks(out, nullptr, false).figures;
  return out;
}

// The transfers sections' totals by direction and host memory kind, merged
// by their field table (the sites and findings are each process's own).
std::optional<ReportTransfers> MergeTransfers(const std::vector<Report>& reports) {
  std::map<std::pair<std::string, std::string>, TransferTotal> totals;
  bool any = false;
  for (const Report& r : reports) {
    if (!r.model.transfers.has_value()) continue;
    any = true;
    for (const TransferTotal& t : r.model.transfers->totals) {
      const auto [it, added] = totals.try_emplace({t.direction, t.host});
      if (added) {
        it->second.direction = t.direction;
        it->second.host = t.host;
      }
      MergeCounts<TransferFigures>(t, &it->second);
    }
  }
  if (!any) return std::nullopt;
  ReportTransfers out;
  out.process_figures = false;
  for (auto& [key, entry] : totals) out.totals.push_back(std::move(entry));
  return out;
}

// The sites of one report by id, for the site references of its phases
// section (a phase's peak site need not be in any list: then it is matched
// by its location alone).
class SiteRefs {
 public:
  explicit SiteRefs(const ReportModel& m) {
    for (const ReportSite& s : m.sites) Add(s);
    for (const ReportSite& s : m.peak.sites) Add(s);
    for (const ReportSite& s : m.leaks_device.sites) Add(s);
    for (const ReportSite& s : m.leaks_host.sites) Add(s);
    for (const ReportSite& s : m.leaks_ipc_imported.sites) Add(s);
    if (m.growth.has_value()) {
      for (const ReportSite& s : m.growth->suspects) Add(s);
    }
  }

  // `ref` with the merged report's site id.
  template <typename Ref>
  Ref Merged(const Ref& ref, SiteIds* ids) const {
    Ref out = ref;
    const auto it = by_id_.find(ref.site);
    if (it != by_id_.end()) {
      out.site = ids->IdOf(*it->second);
    } else {
      ReportSite site;
      site.location = ref.location;
      out.site = ids->IdOf(site);
    }
    return out;
  }

 private:
  void Add(const ReportSite& s) { by_id_.emplace(s.site, &s); }
  std::map<uint64_t, const ReportSite*> by_id_;
};

// The phases sections by path: counts merged by their rules (PhasePath's
// and ReportPhases' field tables). A phase's peak is the highest any one
// process reached while it was open (each process's own device memory: a sum
// of peaks reached at different times on different devices would be no
// process's), with that process's pid, rank and sites; on a tie the first's.
std::optional<ReportPhases> MergePhases(const std::vector<Report>& reports, SiteIds* ids) {
  struct PathBefore {
    bool operator()(const std::string& a, const std::string& b) const {
      return PhasePathBefore(a, b);
    }
  };
  std::map<std::string, PhasePath, PathBefore> paths;
  ReportPhases merged;
  for (const Report& r : reports) {
    if (!r.model.phases.has_value()) continue;
    const ReportPhases& phases = *r.model.phases;
    const SiteRefs refs(r.model);
    MergeCounts(phases, &merged);
    merged.live_known = merged.live_known && phases.live_known;
    for (const PhasePath& e : phases.paths) {
      const auto [it, added] = paths.try_emplace(e.path);
      PhasePath& m = it->second;
      if (added) {
        m.path = e.path;
        m.depth = e.depth;
      }
      const bool higher = !m.peak_pid.has_value() || e.peak_bytes > m.peak_bytes;
      MergeCounts(e, &m);
      for (const auto& [direction, c] : e.copies) MergeCounts(c, &m.copies[direction]);
      ++m.processes;
      if (!higher) continue;
      const ReportProcess& process = r.model.process;
      m.peak_pid = process.pid;
      m.peak_rank = process.rank;
      m.peak_site.reset();
      if (e.peak_site.has_value()) m.peak_site = refs.Merged(*e.peak_site, ids);
      m.peak_top_site.reset();
      if (e.peak_top_site.has_value()) m.peak_top_site = refs.Merged(*e.peak_top_site, ids);
    }
  }
  if (paths.empty()) return std::nullopt;
  for (auto& [path, entry] : paths) merged.paths.push_back(std::move(entry));
  return merged;
}

}  // namespace

// The calls that failed, merged by call and code: counts summed, the first
// and last times the extremes, and the site of the earliest first failure
// (its stack); each process's sticky errors as they are, with its pid and
// rank, in the order of the inputs, their sites renumbered. None when no
// input had the section.
std::optional<ReportCudaErrors> MergeCudaErrors(const std::vector<Report>& reports, SiteIds* ids) {
  std::optional<ReportCudaErrors> merged;
  std::map<std::string, size_t> index;  // "domain#api#code" -> calls
  for (const Report& r : reports) {
    if (!r.model.cuda_errors.has_value()) continue;
    const ReportCudaErrors& e = *r.model.cuda_errors;
    if (!merged.has_value()) merged.emplace();
    merged->omitted_calls += e.omitted_calls;
    for (const ErrorCallSite& c : e.calls) {
      const std::string key = c.domain + "#" + c.api + "#" + std::to_string(c.code);
      const auto [it, added] = index.try_emplace(key, merged->calls.size());
      if (added) {
        ErrorCallSite& entry = merged->calls.emplace_back(c);
        entry.site = ids->IdOf(c);
        entry.processes = 1;
        continue;
      }
      ErrorCallSite& m = merged->calls[it->second];
      if (c.first_ns < m.first_ns) {  // the earliest first failure's site
        m.site = ids->IdOf(c);
        m.location = c.location;
        m.stack = c.stack;
        m.frames = c.frames;
        m.category = c.category;
      }
      ++m.processes;
      MergeCounts(c, &m);
    }
    for (StickyErrorSite s : e.sticky) {
      s.site = ids->IdOf(s);
      for (KernelBeforeErrorSite& k : s.kernels) k.site = ids->IdOf(k);
      s.pid = r.model.process.pid;
      s.rank = r.model.process.rank;
      merged->sticky.push_back(std::move(s));
    }
  }
  if (merged.has_value()) {
    std::stable_sort(
        merged->calls.begin(), merged->calls.end(),
        [](const ErrorCallSite& a, const ErrorCallSite& b) { return a.count > b.count; });
  }
  return merged;
}

int MergeCommand(const MergeOptions& options, FILE* out) {
  if (options.files.empty()) {
    std::fprintf(stderr, "gpuwatch merge: no input reports given\n");
    return 2;
  }
  if (options.output.empty()) {
    std::fprintf(stderr, "gpuwatch merge: no output file given (-o OUT)\n");
    return 2;
  }
  // Never over one of its inputs (the same file, by any path).
  struct stat written {};
  if (stat(options.output.c_str(), &written) == 0) {
    for (const std::string& file : options.files) {
      struct stat input {};
      if (stat(file.c_str(), &input) == 0 && input.st_dev == written.st_dev &&
          input.st_ino == written.st_ino) {
        std::fprintf(stderr,
                     "gpuwatch merge: the output %s is the input %s; write the merged report "
                     "elsewhere\n",
                     options.output.c_str(), file.c_str());
        return 2;
      }
    }
  }
  std::vector<Report> reports(options.files.size());
  std::map<std::pair<std::string, uint64_t>, std::string> seen;  // (host, pid) -> file
  for (size_t i = 0; i < options.files.size(); ++i) {
    std::string error;
    if (!ReadReport(options.files[i], &reports[i], &error)) {
      std::fprintf(stderr, "gpuwatch merge: %s\n", error.c_str());
      return 2;
    }
    const ReportProcess& process = reports[i].model.process;
    if (reports[i].model.trigger == "merge") {
      std::fprintf(stderr, "gpuwatch merge: %s is a merged report already; merge the originals\n",
                   options.files[i].c_str());
      return 2;
    }
    const auto key = std::make_pair(process.host, process.pid);
    auto [it, inserted] = seen.emplace(key, options.files[i]);
    if (!inserted) {
      std::fprintf(stderr,
                   "gpuwatch merge: %s and %s are both reports of process %llu on %s; merge "
                   "takes one report per process\n",
                   it->second.c_str(), options.files[i].c_str(),
                   static_cast<unsigned long long>(key.second), key.first.c_str());
      return 2;
    }
  }

  SiteIds ids;
  ReportModel merged;
  merged.trigger = "merge";
  merged.gpuwatch_version = kGpuwatchVersion;
  merged.attach = "merge";
  merged.merged_from = reports.size();
  SiteMerger<PeakSite> peak_sites(&ids);
  SiteMerger<AllocSite> all_sites(&ids);
  SiteMerger<GrowthSite> suspects(&ids);
  std::set<std::string> bases;
  ReportGrowth& growth = merged.growth.emplace();
  for (const Report& r : reports) {
    const ReportModel& m = r.model;
    ReportTotals& totals = merged.totals;
    SumCounts(m.totals, &totals);
    for (const auto& [name, row] : m.totals.kinds) SumCounts(row, &totals.kinds[name]);
    for (const auto& [name, row] : m.totals.copies) SumCounts(row, &totals.copies[name]);
    MergedProcess& p = merged.processes.emplace_back();
    p.file = r.path;
    p.pid = m.process.pid;
    p.host = m.process.host;
    p.rank = m.process.rank;
    p.command = m.process.command;
    p.trigger = m.trigger;
    p.elapsed_ns = m.process.elapsed_ns;
    p.device_peak_bytes = m.totals.device_peak_bytes;
    p.device_current_bytes = m.totals.device_current_bytes;
    p.leaked_bytes = SplitLeaks(m.leaks_device, nullptr, false).leaked_bytes;
    p.allocs = SumKinds(m.totals, false).allocs + SumKinds(m.totals, true).allocs;
    merged.process.elapsed_ns = std::max(merged.process.elapsed_ns, m.process.elapsed_ns);
    merged.stack_depth = std::max(merged.stack_depth, m.stack_depth);
    SumCounts(m.peak, &merged.peak);
    SumMap(m.peak.kinds, &merged.peak.kinds);
    for (const PeakSite& s : m.peak.sites) peak_sites.Add(s);
    for (const AllocSite& s : m.sites) all_sites.Add(s);
    // PyTorch's blocks: the sums only (a segment's address means something
    // in its own process alone).
    if (m.torch_blocks.has_value()) {
      if (!merged.torch_blocks.has_value()) merged.torch_blocks.emplace();
      MergeCounts(*m.torch_blocks, &*merged.torch_blocks);
    }
    if (m.growth.has_value()) {
      if (m.growth->basis != "none") bases.insert(m.growth->basis);
      growth.samples = std::max(growth.samples, m.growth->samples);
      for (const GrowthSite& s : m.growth->suspects) suspects.Add(s, "#" + s.unit);
    }
  }
  merged.peak.sites_time_ns = 0;  // a sum of times means nothing
  merged.leaks_device = MergeLeakList(reports, &ReportModel::leaks_device, &ids);
  merged.leaks_host = MergeLeakList(reports, &ReportModel::leaks_host, &ids);
  merged.leaks_ipc_imported = MergeLeakList(reports, &ReportModel::leaks_ipc_imported, &ids);
  merged.peak.sites = peak_sites.Sorted(&PeakSite::bytes);
  merged.sites = all_sites.Sorted(&AllocSite::alloc_bytes);
  growth.basis = bases.empty() ? "none" : bases.size() == 1 ? *bases.begin() : "mixed";
  growth.suspects = suspects.Sorted(&GrowthSite::growth_bytes);

  // Written as the library writes a report: each distinct frame once, in the
  // frame table, and each site's `stack` of indices into it.
  json doc = json::object();
  merged.transfers = MergeTransfers(reports);
  merged.phases = MergePhases(reports, &ids);
  merged.cuda_errors = MergeCudaErrors(reports, &ids);
  merged.BuildFrameTable();
  merged.ToJson(&doc);
  std::string error;
  if (!WriteFileAtomically(options.output, DumpReport(std::move(doc)), &error)) {
    std::fprintf(stderr, "gpuwatch merge: %s\n", error.c_str());
    return 2;
  }
  const uint64_t peak_bytes = merged.peak.device_bytes;
  const uint64_t leaked_bytes = merged.leaks_device.split.LeakedBytesOf(merged.leaks_device.bytes);
  std::fprintf(out, "%8s  %5s  %10s  %10s  %s\n", "pid", "rank", "peak", "leaked", "report");
  for (const MergedProcess& p : merged.processes) {
    std::fprintf(out, "%8llu  %5s  %10s  %10s  %s\n", static_cast<unsigned long long>(p.pid),
                 p.rank.empty() ? "-" : p.rank.c_str(), FormatBytes(p.device_peak_bytes).c_str(),
                 FormatBytes(p.leaked_bytes).c_str(), p.file.c_str());
  }
  std::fprintf(out, "%8s  %5s  %10s  %10s\n", "total", "", FormatBytes(peak_bytes).c_str(),
               FormatBytes(leaked_bytes).c_str());
  std::fprintf(out, "gpuwatch merge: %zu reports merged into %s\n", reports.size(),
               options.output.c_str());
  return 0;
}

}  // namespace gpuwatch::tools
