#include "libgpuwatch/transfers.h"

#include <algorithm>

namespace gpuwatch {

const char* HostKindName(HostKind kind) {
  switch (kind) {
    case HostKind::kUnknown:
      return "unknown";
    case HostKind::kPageable:
      return "pageable";
    case HostKind::kPinned:
      return "pinned";
    case HostKind::kManaged:
      return "managed";
    case HostKind::kDevice:
      return "device";
  }
  return "unknown";
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

void Transfers::Aggregate(uint32_t stack_id, const CopyRecord& r, bool timed, bool async) {
  const int k = static_cast<int>(r.kind);
  const int h = static_cast<int>(r.host);
  Add(&totals_.totals[k][h], r, timed);
  SiteTransfers& site = sites_[stack_id];
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
    site.pageable_flagged_count += 1;
    site.pageable_flagged_bytes += r.bytes;
  }
  site.histogram[HistogramBucket(r.bytes)] += 1;
  const uint64_t ns = r.end_ns > r.start_ns ? r.end_ns - r.start_ns : 0;
  if (timed && r.bytes >= kBandwidthMinBytes && ns > 0) {
    const double gbps = static_cast<double>(r.bytes) / static_cast<double>(ns);
    totals_.best_gbps[k] = std::max(totals_.best_gbps[k], gbps);
  }
}

void Transfers::AggregateUntimed(const CopyCall& call) {
  CopyRecord r;
  r.bytes = call.bytes;
  r.kind = call.kind;
  Aggregate(call.stack_id, r, /*timed=*/false, call.async);
}

void Transfers::OnCopyCall(const CopyCall& call, bool activity) {
  std::lock_guard<std::mutex> lock(mu_);
  if (activity) {
    bool dropped = pending_.size() >= kMaxPending;
    CopyCall replaced;
    if (!dropped) pending_.Upsert(PendingKey(call.correlation), call, &replaced, &dropped);
    if (!dropped) return;
    totals_.pending_dropped += 1;  // table full, or no memory to grow it
  }
  AggregateUntimed(call);
}

void Transfers::OnCopyFailed(uint32_t correlation) {
  std::lock_guard<std::mutex> lock(mu_);
  CopyCall gone;
  pending_.Erase(PendingKey(correlation), &gone);
}

uint32_t Transfers::OnCopyRecord(const CopyRecord& record) {
  std::lock_guard<std::mutex> lock(mu_);
  // A runtime copy was registered under the runtime call's id, a driver copy
  // under the driver call's.
  uint64_t key = PendingKey(record.runtime_correlation);
  CopyCall* call = record.runtime_correlation != 0 ? pending_.Find(key) : nullptr;
  if (call == nullptr) {
    key = PendingKey(record.correlation);
    call = pending_.Find(key);
  }
  if (call == nullptr) {
    totals_.unmatched_records += 1;
    Aggregate(0, record, /*timed=*/true, record.async);
    return 0;
  }
  CopyRecord r = record;
  if (r.kind == CopyKind::kUnknown) r.kind = call->kind;
  const uint32_t site = call->stack_id;
  Aggregate(site, r, /*timed=*/true, call->async || record.async);
  if (--call->records == 0) {
    CopyCall done;
    pending_.Erase(key, &done);
  }
  return site;
}

void Transfers::Settle() {
  std::lock_guard<std::mutex> lock(mu_);
  // A batch waiting for several records: what is left of its bytes is not
  // known per copy; count the rest as one.
  pending_.ForEach([this](uint64_t /*key*/, const CopyCall& call) { AggregateUntimed(call); });
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
  into->pageable_flagged_count += from.pageable_flagged_count;
  into->pageable_flagged_bytes += from.pageable_flagged_bytes;
  for (int i = 0; i < kHistogramBuckets; ++i) into->histogram[i] += from.histogram[i];
}

std::vector<TransferFinding> FindTransferIssues(
    const std::vector<std::pair<uint32_t, SiteTransfers>>& sites,
    const std::array<double, kNumCopyKinds>& best_gbps) {
  std::vector<TransferFinding> out;
  for (const auto& [site, t] : sites) {
    if (t.pageable_flagged_count > 0) {
      TransferFinding f;
      f.type = "pageable";
      f.site = site;
      f.count = t.pageable_flagged_count;
      f.bytes = t.pageable_flagged_bytes;
      f.advice =
          "copies from pageable host memory are staged through a bounce buffer and an async one "
          "runs synchronously: allocate the host buffer with cudaMallocHost or cudaHostRegister";
      out.push_back(f);
    }
    if (t.small_count >= kSmallCopyStormCount) {
      TransferFinding f;
      f.type = "small_copies";
      f.site = site;
      f.count = t.small_count;
      f.bytes = t.small_bytes;
      f.advice =
          "many copies under 64 KiB from one site: each pays the full launch latency; "
          "batch them into one buffer (or cudaMemcpyBatchAsync)";
      out.push_back(f);
    }
    if (t.sync_d2h_count >= kSyncD2HLoopCount) {
      TransferFinding f;
      f.type = "sync_d2h_loop";
      f.site = site;
      f.count = t.sync_d2h_count;
      f.bytes = t.by_kind[static_cast<int>(CopyKind::kDeviceToHost)].bytes;
      f.direction = CopyKind::kDeviceToHost;
      f.advice =
          "synchronous device-to-host copies repeated at one site stall the host each "
          "time: copy asynchronously into pinned memory, or less often";
      out.push_back(f);
    }
    for (int k = 0; k < kNumCopyKinds; ++k) {
      const TransferStats& s = t.by_kind[k];
      const double gbps = Gbps(s.bw_bytes, s.bw_ns);
      if (s.bw_ns == 0 || best_gbps[k] <= 0 || gbps >= kSlowBandwidthFraction * best_gbps[k]) {
        continue;
      }
      TransferFinding f;
      f.type = "slow_copies";
      f.site = site;
      f.count = s.count;
      f.bytes = s.bw_bytes;
      f.gbps = gbps;
      f.best_gbps = best_gbps[k];
      f.direction = static_cast<CopyKind>(k);
      f.advice =
          "these copies reach under a quarter of the best bandwidth seen in the same "
          "direction (pageable memory, small or strided transfers)";
      out.push_back(f);
    }
  }
  std::sort(out.begin(), out.end(), [](const TransferFinding& a, const TransferFinding& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    if (a.count != b.count) return a.count > b.count;
    return a.site < b.site;
  });
  return out;
}

TransfersSnapshot Transfers::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  TransfersSnapshot snap = totals_;
  snap.sites.assign(sites_.begin(), sites_.end());
  std::sort(snap.sites.begin(), snap.sites.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return snap;
}

}  // namespace gpuwatch
