#include "libgpuwatch/report/live_state.h"

#include <algorithm>
#include <optional>

#include "libgpuwatch/report/report_model.h"
#include "libgpuwatch/symbolize/mixed_stack.h"
#include "nlohmann/json.hpp"

namespace gpuwatch {

using json = nlohmann::json;

void LiveHistory::Add(uint64_t time_ns, uint64_t device_bytes, uint64_t h2d_bytes,
                      uint64_t d2h_bytes, std::vector<std::pair<uint32_t, uint64_t>>* sites) {
  if (samples_.size() == kSamples) samples_.pop_front();
  samples_.push_back(
      {time_ns, device_bytes, h2d_bytes, d2h_bytes, LargestSites(sites, kSitesPerSample)});
}

void LiveActivity::Reset(uint64_t now_ns, uint64_t now_unix_ms) {
  seen_ = 0;
  last_ns_ = now_ns;
  last_unix_ms_ = now_unix_ms;
}

void LiveActivity::Tick(const TrackerSnapshot& totals, uint64_t now_ns, uint64_t now_unix_ms) {
  uint64_t sum = totals.launches;
  for (const KindTotals& k : totals.kinds) sum += k.allocs + k.frees;
  for (const CopyTotals& c : totals.copies) sum += c.count;
  if (sum == seen_) return;
  seen_ = sum;
  last_ns_ = now_ns;
  last_unix_ms_ = now_unix_ms;
}

namespace {

// A site's bytes in a list sorted by id: 0 when the list has every site and
// not this one; unknown when it was trimmed to its largest sites (a live
// history sample with kSitesPerSample).
std::optional<uint64_t> BytesIn(const std::vector<std::pair<uint32_t, uint64_t>>& sites,
                                uint32_t site, bool trimmed) {
  const auto it = std::lower_bound(sites.begin(), sites.end(), std::make_pair(site, uint64_t{0}));
  if (it != sites.end() && it->first == site) return it->second;
  if (trimmed) return std::nullopt;
  return 0;
}

// A site's bytes in a history sample, summed over the stack ids that are one
// site to the user.
std::optional<uint64_t> SampleBytes(const LiveHistory::Sample& sample,
                                    const std::vector<uint32_t>& ids) {
  const bool trimmed = sample.sites.size() >= LiveHistory::kSitesPerSample;
  uint64_t sum = 0;
  for (uint32_t id : ids) {
    const auto b = BytesIn(sample.sites, id, trimmed);
    if (!b.has_value()) return std::nullopt;
    sum += *b;
  }
  return sum;
}

uint64_t MarkBytes(const GrowthSample& mark, const std::vector<uint32_t>& ids) {
  uint64_t sum = 0;
  for (uint32_t id : ids) sum += BytesIn(mark.sites, id, /*trimmed=*/false).value_or(0);
  return sum;
}

// Bytes per minute from (t0, b0) to (t1, b1); null when less than 5 s apart.
json PerMinute(uint64_t t0, uint64_t b0, uint64_t t1, uint64_t b1) {
  if (t1 <= t0 || t1 - t0 < 5000000000ULL) return nullptr;
  const double per_ns =
      (static_cast<double>(b1) - static_cast<double>(b0)) / static_cast<double>(t1 - t0);
  return static_cast<int64_t>(per_ns * 60e9);
}

json PerSecond(uint64_t t0, uint64_t b0, uint64_t t1, uint64_t b1) {
  if (t1 <= t0 || b1 < b0) return nullptr;
  return static_cast<uint64_t>(static_cast<double>(b1 - b0) * 1e9 / static_cast<double>(t1 - t0));
}

}  // namespace

std::string BuildLiveState(const LiveInputs& in, SiteResolver* sites) {
  const TrackerSnapshot& t = *in.totals;
  json doc = {{"schema", kLiveSchema},
              {"version", kLiveVersion},
              {"pid", in.pid},
              {"host", in.host},
              {"rank", in.rank},
              {"command", in.command},
              {"started_unix_ms", in.started_unix_ms},
              {"now_unix_ms", in.now_unix_ms},
              {"uptime_ns", t.time_ns}};
  uint64_t device_count = 0;
  json kinds = json::object();
  uint64_t allocs = 0;
  uint64_t frees = 0;
  for (int k = 0; k < kNumMemKinds; ++k) {
    const KindTotals& kt = t.kinds[k];
    allocs += kt.allocs;
    frees += kt.frees;
    if (IsDeviceKind(static_cast<MemKind>(k))) device_count += kt.current_count;
    if (kt.allocs == 0) continue;
    kinds[MemKindName(static_cast<MemKind>(k))] = {
        {"live_bytes", kt.current_bytes}, {"peak_bytes", kt.peak_bytes},
        {"live_count", kt.current_count}, {"allocs", kt.allocs},
        {"alloc_bytes", kt.alloc_bytes},  {"frees", kt.frees}};
  }
  doc["device"] = {{"live_bytes", t.device_current_bytes},
                   {"peak_bytes", t.device_peak_bytes},
                   {"live_count", device_count}};
  json devices = json::array();
  for (int d = 0; d < kMaxTrackedDevices; ++d) {
    if (t.device_peak_bytes_by_device[d] == 0) continue;
    const DeviceIdentity none;
    const DeviceIdentity& id = in.device_identity != nullptr ? (*in.device_identity)[d] : none;
    const auto text = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
    devices.push_back(
        {{"device", d},
         {"live_bytes", t.device_bytes_by_device[d]},
         {"peak_bytes", t.device_peak_bytes_by_device[d]},
         {"total_bytes",
          in.device_total_bytes[d] != 0 ? json(in.device_total_bytes[d]) : json(nullptr)},
         {"uuid", text(id.uuid)},
         {"pci_bus_id", text(id.pci_bus_id)},
         {"gpu", id.gpu >= 0 ? json(id.gpu) : json(nullptr)}});
  }
  doc["devices"] = std::move(devices);
  doc["cgroup"] = {{"container_id", in.cgroup.container_id},
                   {"systemd_unit", in.cgroup.systemd_unit},
                   {"pod_uid", in.cgroup.pod_uid},
                   {"namespace", in.cgroup.pod_namespace},
                   {"pod", in.cgroup.pod_name}};
  doc["kinds"] = std::move(kinds);
  doc["counters"] = {{"allocs", allocs},
                     {"frees", frees},
                     {"ooms", in.ooms},
                     {"kernel_launches", t.launches},
                     {"unknown_frees", t.unknown_frees}};
  json transfers = json::array();
  if (in.transfers != nullptr) {
    for (int d = 0; d < kNumCopyKinds; ++d) {
      for (int h = 0; h < kNumHostKinds; ++h) {
        const TransferStats& s = in.transfers->totals[d][h];
        if (s.count == 0) continue;
        transfers.push_back({{"direction", CopyKindName(static_cast<CopyKind>(d))},
                             {"host", HostKindName(static_cast<HostKind>(h))},
                             {"count", s.count},
                             {"bytes", s.bytes},
                             {"timed_count", s.timed_count},
                             {"duration_ns", s.duration_ns}});
      }
    }
  }
  doc["transfers"] = std::move(transfers);
  doc["parent"] = in.parent_pid != 0
                      ? json{{"pid", in.parent_pid}, {"start_ticks", in.parent_start_ticks}}
                      : json(nullptr);
  doc["activity"] = {{"last_unix_ms", in.activity != nullptr ? in.activity->last_unix_ms() : 0},
                     {"idle_ns", in.activity != nullptr ? in.activity->IdleNs(in.now_ns) : 0}};
  if (in.torch_blocks != nullptr) {
    const ReportTorchBlocks& b = *in.torch_blocks;
    doc["torch"] = {{"moment", b.moment},
                    {"reserved_bytes", b.reserved_bytes},
                    {"allocated_bytes", b.allocated_bytes},
                    {"segments", b.segment_count}};
  }

  // Over the last minute: from the oldest sample kept to now.
  const LiveHistory::Sample* oldest = nullptr;
  json history = json::array();
  if (in.history != nullptr && !in.history->samples().empty()) {
    oldest = &in.history->samples().front();
    for (const LiveHistory::Sample& s : in.history->samples()) history.push_back(s.device_bytes);
  }
  const uint64_t h2d = t.copies[static_cast<int>(CopyKind::kHostToDevice)].bytes;
  const uint64_t d2h = t.copies[static_cast<int>(CopyKind::kDeviceToHost)].bytes;
  doc["rates"] = {
      {"window_ns", oldest != nullptr ? t.time_ns - std::min(t.time_ns, oldest->time_ns) : 0},
      {"device_bytes_per_min", oldest != nullptr ? PerMinute(oldest->time_ns, oldest->device_bytes,
                                                             t.time_ns, t.device_current_bytes)
                                                 : json(nullptr)},
      {"h2d_bytes_per_s", oldest != nullptr
                              ? PerSecond(oldest->time_ns, oldest->h2d_bytes, t.time_ns, h2d)
                              : json(nullptr)},
      {"d2h_bytes_per_s", oldest != nullptr
                              ? PerSecond(oldest->time_ns, oldest->d2h_bytes, t.time_ns, d2h)
                              : json(nullptr)}};
  doc["history"] = {{"interval_ms", 1000}, {"device_bytes", std::move(history)}};
  doc["marks"] = in.last_marks.empty() ? 0 : in.last_marks.back().mark;

  // The sites that hold the most now. Stack ids that read the same after
  // trimming are one site (SiteResolver::Canonical); only the largest are
  // resolved, so that a reader costs the same with 10 sites or 10,000.
  std::vector<std::pair<uint32_t, uint64_t>> ranked = in.sites;
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  struct Row {
    uint32_t site = 0;
    uint64_t bytes = 0;
    std::vector<uint32_t> ids;
  };
  std::vector<Row> rows;
  uint64_t other_bytes = 0;
  uint64_t other_count = 0;
  const size_t candidates = 2 * in.top;
  for (size_t i = 0; i < ranked.size(); ++i) {
    const auto& [id, bytes] = ranked[i];
    if (bytes == 0) continue;
    if (i >= candidates) {
      other_bytes += bytes;
      ++other_count;
      continue;
    }
    const uint32_t site = sites->Canonical(id);
    auto row =
        std::find_if(rows.begin(), rows.end(), [site](const Row& r) { return r.site == site; });
    if (row == rows.end()) {
      rows.push_back({site, 0, {}});
      row = rows.end() - 1;
    }
    row->bytes += bytes;
    row->ids.push_back(id);
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.bytes > b.bytes; });
  for (size_t i = in.top; i < rows.size(); ++i) {
    other_bytes += rows[i].bytes;
    ++other_count;
  }
  if (rows.size() > in.top) rows.resize(in.top);
  doc["other_sites"] = {{"count", other_count}, {"live_bytes", other_bytes}};
  for (Row& row : rows) std::sort(row.ids.begin(), row.ids.end());

  json site_list = json::array();
  for (const Row& row : rows) {
    json e = {
        {"site", row.site}, {"location", sites->LocationOf(row.site)}, {"live_bytes", row.bytes}};
    const std::vector<Frame>& frames = sites->FramesOf(row.site);
    if (const Frame* f = SiteFrame(frames)) e["function"] = f->function;
    json growth_min = nullptr;
    json spark = json::array();
    if (oldest != nullptr) {
      if (const auto then = SampleBytes(*oldest, row.ids)) {
        growth_min = PerMinute(oldest->time_ns, *then, t.time_ns, row.bytes);
      }
      for (const LiveHistory::Sample& s : in.history->samples()) {
        const auto b = SampleBytes(s, row.ids);
        spark.push_back(b.has_value() ? json(*b) : json(nullptr));
      }
    }
    e["growth_per_min"] = std::move(growth_min);
    json growth_mark = nullptr;
    if (in.last_marks.size() >= 2) {
      // The marks kept may be more than one apart (the series is thinned).
      const GrowthSample& m0 = in.last_marks[in.last_marks.size() - 2];
      const GrowthSample& m1 = in.last_marks.back();
      if (m1.mark > m0.mark) {
        growth_mark = (static_cast<int64_t>(MarkBytes(m1, row.ids)) -
                       static_cast<int64_t>(MarkBytes(m0, row.ids))) /
                      static_cast<int64_t>(m1.mark - m0.mark);
      }
    }
    e["growth_per_mark"] = std::move(growth_mark);
    e["history"] = std::move(spark);
    site_list.push_back(std::move(e));
  }
  doc["sites"] = std::move(site_list);
  return doc.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace gpuwatch
