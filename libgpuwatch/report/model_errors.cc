// The cuda_errors section: its field tables, writer and reader.
#include <string>

#include "libgpuwatch/report/report_model.h"
#include "nlohmann/json.hpp"

namespace gpuwatch {

using nlohmann::json;
namespace key = report_key;

GPUWATCH_COUNTS_OF(ErrorCallSite, GPUWATCH_ERROR_CALL_COUNTS)
GPUWATCH_COUNTS_OF(KernelBeforeErrorSite, GPUWATCH_KERNEL_BEFORE_ERROR_COUNTS)
GPUWATCH_COUNTS_OF(StickyErrorSite, GPUWATCH_STICKY_ERROR_COUNTS)

namespace {

// What a failed call and a sticky error both say of their error.
template <typename Site>
json ErrorJson(const Site& s) {
  json out = SiteJson(s);
  PutCounts(s, Site::Counts(), &out);
  out["api"] = s.api;
  out["domain"] = s.domain;
  out["code"] = s.code;
  out["name"] = s.name;
  return out;
}

template <typename Site>
bool ReadError(ReportFieldReader* r, const json& e, const std::string& at, Site* out) {
  if (!r->Site(e, at, out)) return false;
  r->CountsAt(e, at, Site::Counts(), out);
  out->api = r->TextAt(e, at, "api");
  out->domain = r->TextAt(e, at, "domain");
  out->code = r->IntegerAt(e, at, "code");
  out->name = r->TextAt(e, at, "name");
  return true;
}

}  // namespace

void ReportCudaErrors::ForEachSite(const std::function<void(ReportSite&)>& fn) {
  for (ErrorCallSite& s : calls) fn(s);
  for (StickyErrorSite& s : sticky) {
    fn(s);
    for (KernelBeforeErrorSite& k : s.kernels) fn(k);
  }
}

json CudaErrorsJson(const ReportCudaErrors& e) {
  json calls = json::array();
  for (const ErrorCallSite& c : e.calls) calls.push_back(ErrorJson(c));
  json sticky = json::array();
  for (const StickyErrorSite& s : e.sticky) {
    json out = ErrorJson(s);
    out["device"] = s.device;
    if (s.pid.has_value()) out["pid"] = *s.pid;
    if (!s.rank.empty()) out["rank"] = s.rank;
    json kernels = json::array();
    for (const KernelBeforeErrorSite& k : s.kernels) {
      json kernel = SiteJson(k);
      PutCounts(k, KernelBeforeErrorSite::Counts(), &kernel);
      kernel["kernel"] = k.kernel;
      kernel["mangled"] = k.mangled;
      kernels.push_back(std::move(kernel));
    }
    out["kernels"] = std::move(kernels);
    sticky.push_back(std::move(out));
  }
  return {{"run_failed", e.run_failed()},
          {"calls", std::move(calls)},
          {"omitted_calls", e.omitted_calls},
          {"sticky", std::move(sticky)}};
}

ReportCudaErrors ReadCudaErrors(ReportFieldReader* r, const json& section) {
  ReportCudaErrors out;
  const std::string path = key::kCudaErrors;
  r->Objects(section, path, "calls", [r, &out](const json& e, const std::string& at) {
    ErrorCallSite c;
    if (ReadError(r, e, at, &c)) out.calls.push_back(std::move(c));
  });
  out.omitted_calls = r->CountAt(section, path, "omitted_calls");
  r->Objects(section, path, "sticky", [r, &out](const json& e, const std::string& at) {
    StickyErrorSite s;
    if (!ReadError(r, e, at, &s)) return;
    s.device = r->IntegerAt(e, at, "device");
    if (ReportFieldReader::Member(e, "pid") != nullptr) s.pid = r->CountAt(e, at, "pid");
    if (ReportFieldReader::Member(e, "rank") != nullptr) s.rank = r->TextAt(e, at, "rank");
    r->Objects(e, at, "kernels", [r, &s](const json& k, const std::string& k_at) {
      KernelBeforeErrorSite kernel;
      if (!r->Site(k, k_at, &kernel)) return;
      r->CountsAt(k, k_at, KernelBeforeErrorSite::Counts(), &kernel);
      kernel.kernel = r->TextAt(k, k_at, "kernel");
      kernel.mangled = r->TextAt(k, k_at, "mangled");
      s.kernels.push_back(std::move(kernel));
    });
    out.sticky.push_back(std::move(s));
  });
  return out;
}

}  // namespace gpuwatch
