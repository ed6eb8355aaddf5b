#include "interpose/agent/status.h"

#include <unistd.h>

#include <vector>

#include "interpose/agent/reports.h"
#include "interpose/calls/calls.h"
#include "libgpuwatch/analysis/site_resolver.h"
#include "libgpuwatch/base/log.h"
#include "libgpuwatch/base/status_page.h"

namespace gpuwatch {

void OpenStatus(const std::string& dir) {
  std::vector<const char*> names;
  for (const CallbackSpec& spec : CallbackRegistry()) names.push_back(spec.name);
  std::string problem;
  if (!OpenStatusPage(StatusPagePath(dir, getpid()), names, &problem)) {
    Warn("no status page (gpuwatch why): %s", problem.c_str());
  }
}

void StatusTick(Agent& agent, uint64_t checkpoint_ns) {
  if (g_status_page.load(std::memory_order_acquire) == nullptr) return;
  const TrackerSnapshot totals = agent.events().Totals();
  StatusUpdateProcess(totals.device_bytes_by_device.data(), kStatusDevices, checkpoint_ns,
                      agent.attach.output_path);
  const std::vector<StatusSiteRequest> sites = StatusSitesToResolve();
  if (sites.empty() || CurrentSession()->stacks() == nullptr) return;
  std::lock_guard<Mutex> lock(agent.reports.report_mu);  // the reports' symbolizer
  SiteResolver resolver(CurrentSession()->stacks(), SharedSymbolizer(agent),
                        CurrentSession()->alloc_fns());
  for (const StatusSiteRequest& r : sites) {
    StatusWriteSite(r.slot, r.stack_id, resolver.LocationOf(r.stack_id));
  }
}

}  // namespace gpuwatch
