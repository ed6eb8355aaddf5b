// The `cuda_errors` section: the CUDA calls that returned an error, the
// first sticky error of each context with the call where it surfaced, and
// the kernels launched on that context since its last successful
// synchronization (docs/report-format.md, "CUDA errors").

// report_model.h includes this file in its middle (these types build on
// ReportSite and the field tables); included first, this brings it in.
#include "libgpuwatch/report/report_model.h"

#ifndef GPUWATCH_LIBGPUWATCH_REPORT_MODEL_ERRORS_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_MODEL_ERRORS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace gpuwatch {

class ReportFieldReader;

// cuda_errors.calls[]: one call and code, its site the stack of the first.
// clang-format off
#define GPUWATCH_ERROR_CALL_COUNTS(X) X(count, kSum) X(first_ns, kMin) X(last_ns, kMax)
// clang-format on
struct ErrorCallSite : ReportSite {
  GPUWATCH_COUNTS(ErrorCallSite, GPUWATCH_ERROR_CALL_COUNTS)
  std::string api;     // CUPTI's function name, e.g. "cudaMemcpy"
  std::string domain;  // "runtime" (a cudaError_t) or "driver" (a CUresult)
  int64_t code = 0;
  std::string name;  // "cudaErrorIllegalAddress"; "" when not known
};

// cuda_errors.sticky[].kernels[]: a launch before the error, its site the
// stack of its kernel's first launch.
// clang-format off
#define GPUWATCH_KERNEL_BEFORE_ERROR_COUNTS(X) X(stream, kMax) X(launch_ns, kMin) X(before_ns, kMax)
// clang-format on
struct KernelBeforeErrorSite : ReportSite {
  GPUWATCH_COUNTS(KernelBeforeErrorSite, GPUWATCH_KERNEL_BEFORE_ERROR_COUNTS)
  std::string kernel;   // demangled
  std::string mangled;  // as the driver knows it
};

// cuda_errors.sticky[]: a context's first sticky error, its site the call
// where it surfaced.
// clang-format off
#define GPUWATCH_STICKY_ERROR_COUNTS(X) \
  X(time_ns, kMin) X(context, kMax) X(omitted_kernels, kSum)
// clang-format on
struct StickyErrorSite : ReportSite {
  GPUWATCH_COUNTS(StickyErrorSite, GPUWATCH_STICKY_ERROR_COUNTS)
  std::string api;
  std::string domain;
  int64_t code = 0;
  std::string name;
  int64_t device = 0;
  std::vector<KernelBeforeErrorSite> kernels;  // oldest first
  // A merged report's: the process it happened in (absent in a process's own).
  std::optional<uint64_t> pid;
  std::string rank;  // "" when that process had none
};

struct ReportCudaErrors {
  std::vector<ErrorCallSite> calls;  // first seen first
  uint64_t omitted_calls = 0;        // failures of (call, code) pairs beyond the table
  std::vector<StickyErrorSite> sticky;
  // The run ended on a sticky error: its live memory was live when it failed.
  bool run_failed() const { return !sticky.empty(); }
  void ForEachSite(const std::function<void(ReportSite&)>& fn);
};

nlohmann::json CudaErrorsJson(const ReportCudaErrors& e);
ReportCudaErrors ReadCudaErrors(ReportFieldReader* r, const nlohmann::json& section);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_MODEL_ERRORS_H_
