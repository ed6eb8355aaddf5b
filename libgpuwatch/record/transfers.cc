#include "libgpuwatch/record/transfers.h"

#include <algorithm>
#include <iterator>

#include "libgpuwatch/base/enum_names.h"

namespace gpuwatch {

const char* HostKindName(HostKind kind) {
  static constexpr const char* kNames[] = {"unknown", "pageable", "pinned", "managed", "device"};
  static_assert(std::size(kNames) == static_cast<size_t>(kNumHostKinds));
  return EnumName(kind, kNames, "unknown");
}

int HistogramBucket(uint64_t bytes) {
  if (bytes <= 1) return 0;
  const int b = 63 - __builtin_clzll(bytes);
  return std::min(b, kHistogramBuckets - 1);
}

namespace {

void Add(TransferStats* s, const CopyRecord& r, bool timed) {
  s->count += 1;
  s->bytes += r.bytes;
  if (!timed) return;
  const uint64_t ns = r.end_ns > r.start_ns ? r.end_ns - r.start_ns : 0;
  s->timed_count += 1;
  s->timed_bytes += r.bytes;
  s->duration_ns += ns;
  if (r.bytes >= kBandwidthMinBytes && ns > 0) {
    s->bw_bytes += r.bytes;
    s->bw_ns += ns;
  }
}

}  // namespace

void Transfers::Aggregate(uint32_t stack_id, const CopyRecord& r, bool timed, bool async,
                          TransfersSnapshot* totals, SiteMap* sites) {
  const int k = static_cast<int>(r.kind);
  const int h = static_cast<int>(r.host);
  Add(&totals->totals[k][h], r, timed);
  SiteTransfers& site = (*sites)[stack_id];
  Add(&site.all, r, timed);
  Add(&site.by_kind[k], r, timed);
  Add(&site.by_host[h], r, timed);
  (async ? site.async_count : site.sync_count) += 1;
  if (r.bytes < kSmallCopyBytes) {
    site.small_count += 1;
    site.small_bytes += r.bytes;
  }
  if (!async && r.kind == CopyKind::kDeviceToHost) site.sync_d2h_count += 1;
  if (r.host == HostKind::kPageable && (async || r.bytes >= kLargeCopyBytes)) {
    const int d = r.kind == CopyKind::kDeviceToHost ? 1 : 0;
    site.pageable_flagged_count[d] += 1;
    site.pageable_flagged_bytes[d] += r.bytes;
  }
  site.histogram[HistogramBucket(r.bytes)] += 1;
  const uint64_t ns = r.end_ns > r.start_ns ? r.end_ns - r.start_ns : 0;
  if (timed && r.bytes >= kBandwidthMinBytes && ns > 0) {
    const double gbps = static_cast<double>(r.bytes) / static_cast<double>(ns);
    totals->best_gbps[k] = std::max(totals->best_gbps[k], gbps);
  }
}

void Transfers::AggregateUntimed(const CopyCall& call, TransfersSnapshot* totals, SiteMap* sites) {
  CopyRecord r;
  r.bytes = call.bytes;
  r.kind = call.kind;
  r.host = call.kind == CopyKind::kDeviceToDevice || call.kind == CopyKind::kPeer
               ? HostKind::kDevice
               : call.host;
  Aggregate(call.stack_id, r, /*timed=*/false, call.async, totals, sites);
}

void Transfers::Register(uint64_t key, const CopyCall& call) {
  bool dropped = pending_.size() >= kMaxPending;
  CopyCall replaced;
  if (!dropped) pending_.Upsert(key, call, &replaced, &dropped);
  if (!dropped) return;
  totals_.pending_dropped += 1;  // table full, or no memory to grow it
  AggregateUntimed(call, &totals_, &sites_);
}

void Transfers::OnCopyCall(const CopyCall& call, bool activity) {
  std::lock_guard<Mutex> lock(mu_);
  if (activity) {
    Register(PendingKey(call.correlation), call);
  } else {
    AggregateUntimed(call, &totals_, &sites_);
  }
}

void Transfers::OnCopyFailed(uint32_t correlation) {
  std::lock_guard<Mutex> lock(mu_);
  CopyCall gone;
  pending_.Erase(PendingKey(correlation), &gone);
}

void Transfers::OnGraphCopy(uint32_t correlation, uint64_t node, const CopyCall& call,
                            bool activity) {
  std::lock_guard<Mutex> lock(mu_);
  if (activity) {
    Register(GraphKey(correlation, node), call);
  } else {
    AggregateUntimed(call, &totals_, &sites_);
  }
}

void Transfers::OnGraphLaunchFailed(uint32_t correlation, uint64_t node) {
  std::lock_guard<Mutex> lock(mu_);
  CopyCall gone;
  pending_.Erase(GraphKey(correlation, node), &gone);
}

uint32_t Transfers::Join(uint64_t key, const CopyRecord& record) {
  CopyCall* call = pending_.Find(key);
  if (call == nullptr) return UINT32_MAX;
  CopyRecord r = record;
  if (r.kind == CopyKind::kUnknown) r.kind = call->kind;
  const uint32_t site = call->stack_id;
  Aggregate(site, r, /*timed=*/true, call->async || record.async, &totals_, &sites_);
  if (--call->records == 0) {
    CopyCall done;
    pending_.Erase(key, &done);
  }
  return site;
}

uint32_t Transfers::OnCopyRecord(const CopyRecord& record) {
  std::lock_guard<Mutex> lock(mu_);
  // A runtime copy was registered under the runtime call's id, a driver copy
  // under the driver call's; a graph node's under its launch's and its id.
  const uint32_t ids[2] = {record.runtime_correlation, record.correlation};
  for (int i = 0; i < 2; ++i) {
    if (i == 0 && record.runtime_correlation == 0) continue;
    const uint64_t key =
        record.graph_node != 0 ? GraphKey(ids[i], record.graph_node) : PendingKey(ids[i]);
    const uint32_t site = Join(key, record);
    if (site != UINT32_MAX) return site;
  }
  // No call waits for it: its copy was counted from its call already (or
  // was not made while gpuwatch recorded).
  totals_.unmatched_records += 1;
  return 0;
}

void Transfers::Settle() {
  std::lock_guard<Mutex> lock(mu_);
  // A batch waiting for several records: what is left of its bytes is not
  // known per copy; count the rest as one.
  pending_.ForEach([this](uint64_t /*key*/, const CopyCall& call) {
    AggregateUntimed(call, &totals_, &sites_);
  });
  pending_.Clear();
}

double Gbps(uint64_t bytes, uint64_t ns) {
  return ns == 0 ? 0.0 : static_cast<double>(bytes) / static_cast<double>(ns);
}

namespace {

void AddStats(TransferStats* into, const TransferStats& from) {
  into->count += from.count;
  into->bytes += from.bytes;
  into->timed_count += from.timed_count;
  into->timed_bytes += from.timed_bytes;
  into->duration_ns += from.duration_ns;
  into->bw_bytes += from.bw_bytes;
  into->bw_ns += from.bw_ns;
}

}  // namespace

void MergeInto(SiteTransfers* into, const SiteTransfers& from) {
  AddStats(&into->all, from.all);
  for (int i = 0; i < kNumCopyKinds; ++i) AddStats(&into->by_kind[i], from.by_kind[i]);
  for (int i = 0; i < kNumHostKinds; ++i) AddStats(&into->by_host[i], from.by_host[i]);
  into->sync_count += from.sync_count;
  into->async_count += from.async_count;
  into->small_count += from.small_count;
  into->small_bytes += from.small_bytes;
  into->sync_d2h_count += from.sync_d2h_count;
  for (int d = 0; d < 2; ++d) {
    into->pageable_flagged_count[d] += from.pageable_flagged_count[d];
    into->pageable_flagged_bytes[d] += from.pageable_flagged_bytes[d];
  }
  for (int i = 0; i < kHistogramBuckets; ++i) into->histogram[i] += from.histogram[i];
}

std::vector<TransferFinding> FindTransferIssues(
    const std::vector<std::pair<uint32_t, SiteTransfers>>& sites,
    const std::array<double, kNumCopyKinds>& best_gbps) {
  std::vector<TransferFinding> out;
  for (const auto& [site, t] : sites) {
    // One finding of this site.
    auto add = [&out, site = site](const char* type, uint64_t count, uint64_t bytes,
                                   CopyKind direction, const char* advice) -> TransferFinding& {
      TransferFinding& f = out.emplace_back();
      f.type = type;
      f.site = site;
      f.count = count;
      f.bytes = bytes;
      f.direction = direction;
      f.advice = advice;
      return f;
    };
    for (int d = 0; d < 2; ++d) {
      if (t.pageable_flagged_count[d] == 0) continue;
      add("pageable", t.pageable_flagged_count[d], t.pageable_flagged_bytes[d],
          d == 0 ? CopyKind::kHostToDevice : CopyKind::kDeviceToHost,
          d == 0 ? "copies from pageable host memory are staged through a bounce buffer and "
                   "an async one runs synchronously: allocate the host buffer with "
                   "cudaMallocHost or cudaHostRegister"
                 : "copies to pageable host memory are staged through a bounce buffer and "
                   "an async one runs synchronously: allocate the host buffer with "
                   "cudaMallocHost or cudaHostRegister");
    }
    if (t.small_count >= kSmallCopyStormCount) {
      add("small_copies", t.small_count, t.small_bytes, CopyKind::kUnknown,
          "many copies under 64 KiB from one site: each pays the full launch latency; "
          "batch them into one buffer (or cudaMemcpyBatchAsync)");
    }
    if (t.sync_d2h_count >= kSyncD2HLoopCount) {
      add("sync_d2h_loop", t.sync_d2h_count,
          t.by_kind[static_cast<int>(CopyKind::kDeviceToHost)].bytes, CopyKind::kDeviceToHost,
          "synchronous device-to-host copies repeated at one site stall the host each "
          "time: copy asynchronously into pinned memory, or less often");
    }
    for (int k = 0; k < kNumCopyKinds; ++k) {
      const TransferStats& s = t.by_kind[k];
      const double gbps = Gbps(s.bw_bytes, s.bw_ns);
      if (s.bw_ns == 0 || best_gbps[k] <= 0 || gbps >= kSlowBandwidthFraction * best_gbps[k]) {
        continue;
      }
      TransferFinding& f = add("slow_copies", s.count, s.bw_bytes, static_cast<CopyKind>(k),
                               "these copies reach under a quarter of the best bandwidth seen "
                               "in the same direction (pageable memory, small or strided "
                               "transfers)");
      f.gbps = gbps;
      f.best_gbps = best_gbps[k];
    }
  }
  std::sort(out.begin(), out.end(), [](const TransferFinding& a, const TransferFinding& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    if (a.count != b.count) return a.count > b.count;
    return a.site < b.site;
  });
  return out;
}

TransfersSnapshot Transfers::Totals() const {
  std::lock_guard<Mutex> lock(mu_);
  TransfersSnapshot snap = totals_;
  SiteMap unused;
  pending_.ForEach(
      [&](uint64_t /*key*/, const CopyCall& call) { AggregateUntimed(call, &snap, &unused); });
  return snap;
}

TransfersSnapshot Transfers::Snapshot() const {
  std::lock_guard<Mutex> lock(mu_);
  TransfersSnapshot snap = totals_;
  // The calls still waiting for a record count too, as Settle() would count
  // them: a copy happened whether or not its record arrived yet.
  SiteMap sites = sites_;
  pending_.ForEach(
      [&](uint64_t /*key*/, const CopyCall& call) { AggregateUntimed(call, &snap, &sites); });
  snap.sites.assign(sites.begin(), sites.end());
  std::sort(snap.sites.begin(), snap.sites.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return snap;
}

}  // namespace gpuwatch
