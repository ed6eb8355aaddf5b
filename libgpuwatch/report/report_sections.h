// The report's sections, for report*.cc only (report.h is the API): each
// builds its typed section (report_model.h) or its JSON from a snapshot and
// what AnalyzeReport computed, and the stderr summary's lines from the same.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_REPORT_SECTIONS_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_REPORT_SECTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "libgpuwatch/analysis/growth.h"
#include "libgpuwatch/record/transfers.h"
#include "libgpuwatch/report/report.h"
#include "libgpuwatch/report/report_model.h"
#include "nlohmann/json.hpp"

namespace gpuwatch {

// "1 copy", "3 copies".
inline std::string Copies(uint64_t n) { return CountOf(n, "copy", "copies"); }

// A site entry's id, location and stack, and its category and suppression
// rule when `c` is given.
void FillSite(uint32_t id, const SiteClass* c, SiteResolver* sites, ReportSite* out);

// Copies of one direction. With a transfers section, its totals: directions
// resolved from activity records (cudaMemcpyDefault, cuMemcpy) and graph
// copies included, so that both places give one answer; else the tracker's.
// An alloc_churn finding's figures, from a churning site of the analysis.
AllocChurn AllocChurnOf(const ChurnSite& c, SiteResolver* sites);

CopyTotals CopiesOf(const TrackerSnapshot& snap, const ReportContext& context, CopyKind kind);

// report_transfers.cc: the `transfers` section and its summary lines.
ReportTransfers TransfersSection(const TransfersSnapshot& t, const ReportAnalysis& analysis,
                                 SiteResolver* sites);
std::string TransferSummary(const TransfersSnapshot& t, const ReportAnalysis& analysis,
                            SiteResolver* sites);

// report_growth.cc: the `growth` and `timeline` sections and the summary's
// growth line.
ReportGrowth GrowthSection(const TimelineSnapshot& t, const ReportAnalysis& analysis,
                           const Suppressions* suppressions, const PhasesSnapshot* phases,
                           SiteResolver* sites);
ReportTimeline TimelineSection(const TimelineSnapshot& t, SiteResolver* sites);
std::string GrowthSummary(const ReportAnalysis& analysis, const Suppressions* suppressions,
                          SiteResolver* sites);

// report_phases.cc: the `phases` section and the summary's phase line.
ReportPhases PhasesSection(const PhasesSnapshot& p, const TrackerSnapshot& snap,
                           SiteResolver* sites);
std::string PhaseSummary(const PhasesSnapshot& p);

// report_regions.cc: the `regions` section (pool regions still registered)
// and the summary's line about them ("" when none is).
ReportRegions RegionsSection(const RegionsSnapshot& r, const TrackerSnapshot& snap,
                             const PhasesSnapshot* phases, SiteResolver* sites);
std::string RegionSummary(const RegionsSnapshot& r, SiteResolver* sites);

// report_errors.cc: the `cuda_errors` section, and the summary's lines
// about it (which lead the summary of a run that failed).
ReportCudaErrors CudaErrorsSection(const CudaErrorsSnapshot& e, SiteResolver* sites);
std::string ErrorSummary(const CudaErrorsSnapshot& e, SiteResolver* sites);

// report_torch.cc: the `torch_blocks` section: PyTorch's segments as
// handed over, each matched by address to the live allocation that is it.
ReportTorchBlocks TorchBlocksSection(const ReportTorchBlocks& given, const TrackerSnapshot& snap,
                                     SiteResolver* sites);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_REPORT_SECTIONS_H_
