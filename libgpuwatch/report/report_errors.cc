// The `cuda_errors` section and the summary's lines about it.
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "libgpuwatch/record/cuda_errors.h"
#include "libgpuwatch/report/report_sections.h"
#include "libgpuwatch/symbolize/mixed_stack.h"
#include "libgpuwatch/symbolize/symbolizer.h"

namespace gpuwatch {

namespace {

const char* DomainName(ApiDomain domain) {
  return domain == ApiDomain::kRuntime ? "runtime" : "driver";
}

// The failure's call, code and site.
template <typename Site>
void FillError(const CudaErrorEvent& e, const std::string& api, SiteResolver* sites, Site* out) {
  FillSite(e.stack_id, nullptr, sites, out);
  out->api = api;
  out->domain = DomainName(e.domain);
  out->code = e.code;
  out->name = CudaErrorName(e.domain, e.code);
}

// Where a kernel was launched: its stack's site past the frames nvcc
// generates for a `<<<>>>` launch (CUDA's launch helper in its headers, the
// `__device_stub_` of the .stub.c file, and the kernel's host-side function,
// inlined, which bears the kernel's name), i.e. the line of the launch.
std::string LaunchLocation(uint32_t stack_id, const std::string& kernel, SiteResolver* sites) {
  const std::vector<Frame>& frames = sites->FramesOf(stack_id);
  size_t i = 0;
  for (; i < frames.size(); ++i) {
    const Frame& f = frames[i];
    const bool cuda_header =
        f.file.find("/include/crt/") != std::string::npos || f.file.ends_with("/cuda_runtime.h");
    const bool stub = f.file.ends_with(".stub.c") || f.function.starts_with("__device_stub_");
    if (!cuda_header && !stub && f.function != kernel) break;
  }
  if (i == 0 || i == frames.size()) return sites->LocationOf(stack_id);
  const std::vector<Frame> caller(frames.begin() + static_cast<std::ptrdiff_t>(i), frames.end());
  const Frame* site = SiteFrame(caller);
  if (site == nullptr) return sites->LocationOf(stack_id);
  return std::string(Basename(site->file)) + ":" + std::to_string(site->line);
}

// "cudaErrorIllegalAddress (700)", or the code alone when it has no name here.
std::string CodeText(ApiDomain domain, int code) {
  const char* name = CudaErrorName(domain, code);
  return *name != '\0' ? std::string(name) + " (" + std::to_string(code) + ")"
                       : "error " + std::to_string(code);
}

}  // namespace

ReportCudaErrors CudaErrorsSection(const CudaErrorsSnapshot& e, SiteResolver* sites) {
  ReportCudaErrors out;
  for (const CudaErrorCall& c : e.calls) {
    ErrorCallSite& site = out.calls.emplace_back();
    FillError(c.first, c.api, sites, &site);
    site.count = c.count;
    site.first_ns = c.first.now_ns;
    site.last_ns = c.last_ns;
  }
  out.omitted_calls = e.calls_not_kept;
  for (const StickyCudaError& s : e.sticky) {
    StickyErrorSite& site = out.sticky.emplace_back();
    FillError(s.error, s.api, sites, &site);
    site.time_ns = s.error.now_ns;
    site.context = s.error.context_uid;
    site.device = s.error.device;
    site.omitted_kernels = s.kernels_not_kept;
    for (const KernelBeforeError& k : s.kernels) {
      KernelBeforeErrorSite& kernel = site.kernels.emplace_back();
      FillSite(k.stack_id, nullptr, sites, &kernel);
      kernel.kernel = DemangleKernel(k.name);
      kernel.location = LaunchLocation(k.stack_id, kernel.kernel, sites);
      kernel.mangled = k.name;
      kernel.stream = k.stream;
      kernel.launch_ns = k.launch_ns;
      kernel.before_ns = site.time_ns > k.launch_ns ? site.time_ns - k.launch_ns : 0;
    }
  }
  return out;
}

std::string ErrorSummary(const CudaErrorsSnapshot& e, SiteResolver* sites) {
  std::string out;
  char line[1024];
  for (const StickyCudaError& s : e.sticky) {
    const CudaErrorEvent& error = s.error;
    std::snprintf(line, sizeof(line),
                  "gpuwatch: the run failed: CUDA error %s, surfaced in %s at %s, %.3f s after "
                  "attach (device %d; sticky: every later call on the context fails)\n",
                  CodeText(error.domain, error.code).c_str(), s.api.c_str(),
                  sites->LocationOf(error.stack_id).c_str(),
                  static_cast<double>(error.now_ns) / 1e9, error.device);
    out += line;
    if (s.kernels.empty()) {
      out +=
          "gpuwatch:   no kernel was launched on the context since its last successful "
          "synchronization\n";
      continue;
    }
    std::snprintf(line, sizeof(line),
                  "gpuwatch:   kernels launched since the last successful synchronization "
                  "(%s, oldest first%s):\n",
                  CountOf(s.kernels.size() + s.kernels_not_kept, "launch", "launches").c_str(),
                  s.kernels_not_kept != 0 ? "; the oldest are not kept" : "");
    out += line;
    for (const KernelBeforeError& k : s.kernels) {
      const uint64_t before = error.now_ns > k.launch_ns ? error.now_ns - k.launch_ns : 0;
      const std::string kernel = DemangleKernel(k.name);
      std::snprintf(line, sizeof(line),
                    "gpuwatch:     %s on stream 0x%" PRIx64 ", %.3f ms before; launched at %s\n",
                    kernel.c_str(), k.stream, static_cast<double>(before) / 1e6,
                    LaunchLocation(k.stack_id, kernel, sites).c_str());
      out += line;
    }
  }
  if (e.calls.empty()) return out;
  uint64_t failed = e.calls_not_kept;
  for (const CudaErrorCall& c : e.calls) failed += c.count;
  std::snprintf(line, sizeof(line), "gpuwatch: CUDA calls that failed: %s\n",
                CountOf(failed, "call", "calls").c_str());
  out += line;
  constexpr size_t kTopCalls = 5;
  for (size_t i = 0; i < e.calls.size() && i < kTopCalls; ++i) {
    const CudaErrorCall& c = e.calls[i];
    std::snprintf(line, sizeof(line), "gpuwatch:   %s x%" PRIu64 ": %s, first at %s\n",
                  c.api.c_str(), c.count, CodeText(c.first.domain, c.first.code).c_str(),
                  sites->LocationOf(c.first.stack_id).c_str());
    out += line;
  }
  return out;
}

}  // namespace gpuwatch
