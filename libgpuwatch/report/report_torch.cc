// The `torch_blocks` section (report_sections.h): PyTorch's segments as the
// Python side handed them over, each named by the gpuwatch site whose
// allocation starts at its address.
#include <cstdlib>
#include <unordered_map>

#include "libgpuwatch/report/report_model.h"
#include "libgpuwatch/report/report_sections.h"

namespace gpuwatch {

ReportTorchBlocks TorchBlocksSection(const ReportTorchBlocks& given, const TrackerSnapshot& snap,
                                     SiteResolver* sites) {
  std::unordered_map<uint64_t, uint32_t> device_sites;  // a device allocation's address -> stack
  for (const LiveAlloc& a : snap.live) {
    if (IsDeviceKind(a.kind)) device_sites.emplace(a.address, a.stack_id);
  }
  ReportTorchBlocks out = given;
  out.unmatched_segments = 0;
  for (TorchSegment& s : out.segments) {
    s.site.reset();
    const uint64_t address = std::strtoull(s.address.c_str(), nullptr, 16);
    const auto it = device_sites.find(address);
    if (address == 0 || it == device_sites.end()) {
      ++out.unmatched_segments;
      continue;
    }
    const uint32_t site = sites->Canonical(it->second);
    s.site = ReportSiteRef{site, sites->LocationOf(site)};
  }
  return out;
}

}  // namespace gpuwatch
