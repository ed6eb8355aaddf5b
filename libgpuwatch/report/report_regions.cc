// The `regions` section: pool regions still registered through NVTX's memory
// extension (record/regions.h), each shown inside the allocation that holds
// it and named by the stack that registered it.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "libgpuwatch/report/report_sections.h"

namespace gpuwatch {

namespace {

std::string Hex(uint64_t address) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%" PRIx64, address);
  return text;
}

// The live allocations by address, to find the one that holds an address.
class Holders {
 public:
  explicit Holders(const std::vector<LiveAlloc>& live) : live_(live) {
    order_.reserve(live.size());
    for (size_t i = 0; i < live.size(); ++i) order_.push_back(i);
    std::sort(order_.begin(), order_.end(),
              [&live](size_t a, size_t b) { return live[a].address < live[b].address; });
  }
  // The allocation [address, address + size) lies in, when it was made no
  // later than the region (an older region at a reused address lies in
  // none); null: none.
  const LiveAlloc* Of(const PoolRegion& r) const {
    auto it = std::upper_bound(order_.begin(), order_.end(), r.address,
                               [this](uint64_t a, size_t i) { return a < live_[i].address; });
    if (it == order_.begin()) return nullptr;
    const LiveAlloc& a = live_[*(it - 1)];
    const bool inside =
        r.address - a.address < a.size && r.size <= a.size - (r.address - a.address);
    return inside && a.time_ms <= r.time_ms ? &a : nullptr;
  }

 private:
  const std::vector<LiveAlloc>& live_;
  std::vector<size_t> order_;
};

struct SiteRegions {
  uint64_t count = 0;
  uint64_t bytes = 0;
  uint32_t oldest_ms = UINT32_MAX;
  uint64_t outside_count = 0;  // in no live allocation
  uint64_t outside_bytes = 0;
  std::map<uint32_t, uint64_t> phase_bytes;    // phase -> bytes
  std::map<uint32_t, uint64_t> segment_bytes;  // holder's canonical site -> bytes
};

struct Holding {
  uint64_t count = 0;
  uint64_t bytes = 0;
};

// The key with the most bytes (the lowest of equals); 0 when empty.
uint32_t Largest(const std::map<uint32_t, uint64_t>& bytes) {
  uint32_t best = 0;
  uint64_t most = 0;
  for (const auto& [key, b] : bytes) {
    if (b > most) {
      most = b;
      best = key;
    }
  }
  return best;
}

template <typename Row>
void SortByBytes(std::vector<Row>* rows) {
  std::sort(rows->begin(), rows->end(), [](const Row& a, const Row& b) {
    return a.second.bytes != b.second.bytes ? a.second.bytes > b.second.bytes : a.first < b.first;
  });
}

}  // namespace

ReportRegions RegionsSection(const RegionsSnapshot& r, const TrackerSnapshot& snap,
                             const PhasesSnapshot* phases, SiteResolver* sites) {
  const Holders holders(snap.live);
  std::unordered_map<uint32_t, SiteRegions> by_site;
  std::map<uint64_t, Holding> by_holder;  // holder's address
  std::map<uint64_t, Holding> by_heap;    // heap's handle
  std::map<uint64_t, const LiveAlloc*> holder_of;
  uint64_t live_bytes = 0;
  uint64_t outside_count = 0;
  uint64_t outside_bytes = 0;
  for (const PoolRegion& region : r.live) {
    live_bytes += region.size;
    SiteRegions& s = by_site[sites->Canonical(region.stack_id)];
    ++s.count;
    s.bytes += region.size;
    s.oldest_ms = std::min(s.oldest_ms, region.time_ms);
    if (region.phase != 0) s.phase_bytes[region.phase] += region.size;
    Holding& heap = by_heap[region.heap];
    ++heap.count;
    heap.bytes += region.size;
    const LiveAlloc* holder = holders.Of(region);
    if (holder == nullptr) {
      ++s.outside_count;
      s.outside_bytes += region.size;
      ++outside_count;
      outside_bytes += region.size;
      continue;
    }
    s.segment_bytes[sites->Canonical(holder->stack_id)] += region.size;
    Holding& h = by_holder[holder->address];
    ++h.count;
    h.bytes += region.size;
    holder_of[holder->address] = holder;
  }

  std::vector<std::pair<uint32_t, SiteRegions>> site_rows(by_site.begin(), by_site.end());
  SortByBytes(&site_rows);
  ReportRegions out;
  for (size_t i = 0; i < site_rows.size(); ++i) {
    const auto& [site, s] = site_rows[i];
    if (i >= kMaxSitesPerSection) {
      ++out.omitted_sites;
      out.omitted_bytes += s.bytes;
      continue;
    }
    RegionSite& e = out.sites.emplace_back();
    FillSite(site, nullptr, sites, &e);
    e.caller = sites->CallerOf(site);
    e.count = s.count;
    e.bytes = s.bytes;
    e.oldest_ns = uint64_t{s.oldest_ms} * 1000000;
    e.outside_count = s.outside_count;
    e.outside_bytes = s.outside_bytes;
    const int p = phases != nullptr ? phases->IndexOf(Largest(s.phase_bytes)) : -1;
    if (p >= 0) e.phase = phases->paths[p];
    if (!s.segment_bytes.empty()) {
      const uint32_t segment = Largest(s.segment_bytes);
      e.segment = ReportSiteRef{segment, sites->LocationOf(segment)};
    }
  }

  std::vector<std::pair<uint64_t, Holding>> holder_rows(by_holder.begin(), by_holder.end());
  SortByBytes(&holder_rows);
  for (size_t i = 0; i < holder_rows.size() && i < kMaxSitesPerSection; ++i) {
    const LiveAlloc& a = *holder_of[holder_rows[i].first];
    RegionSegment& e = out.segments.emplace_back();
    FillSite(sites->Canonical(a.stack_id), nullptr, sites, &e);
    e.address = Hex(a.address);
    e.size = a.size;
    e.kind = MemKindName(a.kind);
    e.region_count = holder_rows[i].second.count;
    e.region_bytes = holder_rows[i].second.bytes;
  }

  for (size_t i = 0; i < r.heaps.size() && i < kMaxSitesPerSection; ++i) {
    const PoolHeap& h = r.heaps[i];
    RegionHeap& e = out.heaps.emplace_back();
    FillSite(sites->Canonical(h.stack_id), nullptr, sites, &e);
    e.address = Hex(h.address);
    e.size = h.size;
    if (const auto it = by_heap.find(h.handle); it != by_heap.end()) {
      e.region_count = it->second.count;
      e.region_bytes = it->second.bytes;
    }
  }

  const RegionCounters& c = r.counters;
  ReportRegionCounters& n = out.counters;
  n.registered = c.registered;
  n.unregistered = c.unregistered;
  n.resized = c.resized;
  n.released_by_reset = c.released_by_reset;
  n.replaced = c.replaced;
  n.unknown_unregisters = c.unknown_unregisters;
  n.unknown_resizes = c.unknown_resizes;
  n.unknown_heaps = c.unknown_heaps;
  n.dropped = c.dropped;
  n.heaps_registered = c.heaps_registered;
  n.heaps_unregistered = c.heaps_unregistered;
  n.heaps_reset = c.heaps_reset;
  n.heaps_dropped = c.heaps_dropped;
  out.live_count = r.live.size();
  out.live_bytes = live_bytes;
  out.outside_count = outside_count;
  out.outside_bytes = outside_bytes;
  return out;
}

std::string RegionSummary(const RegionsSnapshot& r, SiteResolver* sites) {
  if (r.live.empty()) return "";
  std::unordered_map<uint32_t, uint64_t> bytes;
  uint64_t total = 0;
  for (const PoolRegion& region : r.live) {
    bytes[sites->Canonical(region.stack_id)] += region.size;
    total += region.size;
  }
  std::pair<uint32_t, uint64_t> top{0, 0};
  for (const auto& [site, b] : bytes) {
    if (b > top.second || (b == top.second && site < top.first)) top = {site, b};
  }
  const std::string caller = sites->CallerOf(top.first);
  return "gpuwatch: pool regions still registered: " + FormatBytes(total) + " in " +
         CountOf(r.live.size(), "region", "regions") + "; largest " + FormatBytes(top.second) +
         " registered at " + sites->LocationOf(top.first) +
         (caller.empty() ? "" : " from " + caller) + "\n";
}

}  // namespace gpuwatch
