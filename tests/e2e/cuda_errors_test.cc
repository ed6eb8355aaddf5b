// A run that ends on a CUDA error (tests/programs/kernel_fault: a kernel faults, the illegal
// address surfaces at the next copy, the program exits 1), run on the simulator with
// GWSIM_FAULT_KERNEL=Scatter: its report, stderr summary, text report, `gpuwatch check`,
// Perfetto trace and HTML page lead with the error, name the call where it surfaced and the
// kernels launched since the last successful synchronization with their launch lines.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

std::string At(const std::string& marker) { return ProgramLine("kernel_fault.cu", marker); }

// kernel_fault under gpuwatch (preloaded), its kernel Scatter faulting unless `fault` is false;
// the report's path in `dir`.
std::string FaultReport(const ScopedTempDir& dir, ProcessResult* r, bool fault = true) {
  const std::string out = dir.path() + "/report.json";
  std::map<std::string, std::string> extra;
  if (fault) extra["GWSIM_FAULT_KERNEL"] = "Scatter";
  *r = RunProcess({kPrograms + "/kernel_fault"}, PreloadEnv(out, extra), dir.path());
  return out;
}

// docs/report-format.md's example of the section (the JSON block under
// "## CUDA errors"), which is this program's report.
json DocExample() {
  const std::string doc = ReadFile(kSourceDir + "/docs/report-format.md");
  const size_t section = doc.find("\n## CUDA errors\n");
  const size_t start = doc.find("```json\n", section);
  const size_t end = doc.find("```\n", start + 8);
  if (section == std::string::npos || start == std::string::npos || end == std::string::npos) {
    return nullptr;
  }
  return json::parse("{" + doc.substr(start + 8, end - start - 8) + "}", nullptr, false);
}

// `e` without what differs from run to run or build to build: times,
// stream handles, context and site ids, frames (their paths) and mangled
// names (an anonymous namespace's hash).
json Stable(json e) {
  static const std::set<std::string> kVarying = {"first_ns",  "last_ns", "time_ns", "launch_ns",
                                                 "before_ns", "stream",  "site",    "stack",
                                                 "frames",    "context", "mangled"};
  if (e.is_array()) {
    for (json& item : e) item = Stable(item);
  } else if (e.is_object()) {
    for (const std::string& key : kVarying) e.erase(key);
    for (auto& item : e.items()) item.value() = Stable(item.value());
  }
  return e;
}

TEST(KernelFault, ReportNamesTheErrorWhereItSurfacedAndTheKernelsBeforeIt) {
  ScopedTempDir dir;
  ProcessResult r;
  const json report = ReadReport(FaultReport(dir, &r));
  ASSERT_FALSE(r.signaled);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("kernel_fault: cudaMemcpy: an illegal memory access was encountered\n"),
            std::string::npos)
      << r.err;
  ASSERT_TRUE(report.is_object());
  const json& errors = report["cuda_errors"];
  ASSERT_TRUE(errors.is_object()) << report.dump();
  EXPECT_EQ(errors["run_failed"], true);
  ASSERT_EQ(errors["sticky"].size(), 1u) << errors.dump();
  const json& sticky = errors["sticky"][0];
  EXPECT_EQ(sticky["name"], "cudaErrorIllegalAddress");
  EXPECT_EQ(sticky["code"], 700);
  EXPECT_EQ(sticky["domain"], "runtime");
  EXPECT_EQ(sticky["api"], "cudaMemcpy");
  EXPECT_EQ(sticky["location"], At("surfaces here"));
  EXPECT_EQ(sticky["device"], 0);
  EXPECT_EQ(sticky["omitted_kernels"], 0);
  // Fill ran before the last good synchronization: only Scale and Scatter are listed.
  ASSERT_EQ(sticky["kernels"].size(), 2u) << sticky.dump();
  const json& scale = sticky["kernels"][0];
  const json& scatter = sticky["kernels"][1];
  EXPECT_EQ(scale["kernel"], "(anonymous namespace)::Scale(float*, unsigned long, float)");
  EXPECT_EQ(scale["location"], At("launches Scale"));
  EXPECT_EQ(scatter["kernel"], "(anonymous namespace)::Scatter(float*, int const*, unsigned long)");
  // The documentation's example is this run's section, but for times, handles and ids.
  const json doc = DocExample();
  ASSERT_TRUE(doc.is_object() && doc.contains("cuda_errors")) << "docs/report-format.md";
  EXPECT_EQ(Stable(doc["cuda_errors"]), Stable(errors))
      << "docs/report-format.md's example:\n"
      << doc["cuda_errors"].dump(1) << "\nthis run's section:\n"
      << errors.dump(1);
  EXPECT_EQ(scatter["location"], At("launches Scatter"));
  EXPECT_NE(scatter["stream"], 0);
  EXPECT_EQ(scatter["stream"], scale["stream"]);
  EXPECT_LE(scale["launch_ns"].get<uint64_t>(), scatter["launch_ns"].get<uint64_t>());
  EXPECT_LE(scatter["launch_ns"].get<uint64_t>(), sticky["time_ns"].get<uint64_t>());
  EXPECT_EQ(scatter["before_ns"].get<uint64_t>(),
            sticky["time_ns"].get<uint64_t>() - scatter["launch_ns"].get<uint64_t>());
  // Every failed call: the copy where it surfaced and the free after it, each with its line.
  ASSERT_EQ(errors["calls"].size(), 2u) << errors.dump();
  EXPECT_EQ(errors["calls"][0]["api"], "cudaMemcpy");
  EXPECT_EQ(errors["calls"][0]["name"], "cudaErrorIllegalAddress");
  EXPECT_EQ(errors["calls"][0]["count"], 1);
  EXPECT_EQ(errors["calls"][0]["location"], At("surfaces here"));
  EXPECT_EQ(errors["calls"][1]["api"], "cudaFree");
  EXPECT_EQ(errors["calls"][1]["code"], 700);
  EXPECT_EQ(errors["calls"][1]["count"], 1);
  EXPECT_EQ(errors["calls"][1]["location"], At("fails as well"));
  // Both buffers were live when the run failed (the failed cudaFree freed nothing).
  EXPECT_EQ(report["leaks"]["live_when_failed"], true);
  EXPECT_EQ(report["leaks"]["device"]["bytes"], 512 * kKiB);

  // The stderr summary leads with the error, then the kernels with their lines.
  const std::vector<std::string> lines = LinesStartingWith(r.err, "gpuwatch:");
  ASSERT_GE(lines.size(), 4u) << r.err;
  EXPECT_EQ(lines[0].rfind("gpuwatch: the run failed: CUDA error cudaErrorIllegalAddress (700), "
                           "surfaced in cudaMemcpy at " +
                               At("surfaces here"),
                           0),
            0u)
      << lines[0];
  EXPECT_NE(LineWith(r.err, {"Scatter(float*, int const*, unsigned long)",
                             "launched at " + At("launches Scatter")}),
            "")
      << r.err;
  EXPECT_NE(LineWith(r.err, {"gpuwatch: live when the run failed: 512.0 KiB of device memory"}), "")
      << r.err;
  EXPECT_EQ(LineWith(r.err, {"still live"}), "") << r.err;
}

TEST(KernelFault, TextReportCheckPerfettoAndHtmlShowTheError) {
  ScopedTempDir dir;
  ProcessResult run;
  const std::string report = FaultReport(dir, &run);
  ASSERT_EQ(run.exit_code, 1) << run.err;

  // The text report: the error before the memory live when the run failed.
  const ProcessResult text = RunProcess({kCli, "report", report}, {}, dir.path());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const size_t error_at =
      text.out.find("The run failed: CUDA error cudaErrorIllegalAddress (700) in cudaMemcpy at " +
                    At("surfaces here"));
  const size_t live_at = text.out.find("Live when the run failed, device memory: 512.0 KiB");
  ASSERT_NE(error_at, std::string::npos) << text.out;
  ASSERT_NE(live_at, std::string::npos) << text.out;
  EXPECT_LT(error_at, live_at);
  EXPECT_NE(LineWith(text.out,
                     {"Scatter(float*, int const*, unsigned long) at " + At("launches Scatter")}),
            "")
      << text.out;
  EXPECT_EQ(text.out.find("Leaked device memory"), std::string::npos) << text.out;

  // gpuwatch check: the cuda error rule is broken, by the call and the kernel.
  const ProcessResult check = RunProcess({kCli, "check", report}, {}, dir.path());
  EXPECT_EQ(check.exit_code, 1) << check.out << check.err;
  EXPECT_NE(LineWith(check.out, {"cuda error",
                                 "the run failed: CUDA error cudaErrorIllegalAddress "
                                 "(700) surfaced in cudaMemcpy at " +
                                     At("surfaces here")}),
            "")
      << check.out;
  EXPECT_NE(LineWith(check.out, {"kernel (anonymous namespace)::Scatter", At("launches Scatter")}),
            "")
      << check.out;
  // What was live when the run failed is not judged as leaked.
  EXPECT_NE(LineWith(check.out, {"leak: not judged: 512.0 KiB of device memory live when the run "
                                 "failed"}),
            "")
      << check.out;
  EXPECT_NE(check.out.find("gpuwatch check: FAILED: 1 of 2 rules broken"), std::string::npos)
      << check.out;

  // Perfetto: one instant event at the error.
  const std::string trace = dir.path() + "/trace.json";
  const ProcessResult perfetto =
      RunProcess({kCli, "report", report, "--format", "perfetto", "-o", trace}, {}, dir.path());
  ASSERT_EQ(perfetto.exit_code, 0) << perfetto.err;
  const json events = ReadJson(trace)["traceEvents"];
  std::vector<json> instants;
  for (const json& e : events) {
    if (e["ph"] == "i" && e["cat"] == "cuda_error") instants.push_back(e);
  }
  ASSERT_EQ(instants.size(), 1u) << events.dump();
  EXPECT_EQ(instants[0]["name"],
            "CUDA error: cudaErrorIllegalAddress in cudaMemcpy at " + At("surfaces here"));
  EXPECT_EQ(instants[0]["args"]["kernels_since_sync"].size(), 2u);
  EXPECT_EQ(instants[0]["args"]["kernels_since_sync"][1]["launched_at"], At("launches Scatter"));

  // The HTML page carries the section and the banner that shows it.
  const std::string page = dir.path() + "/report.html";
  const ProcessResult html =
      RunProcess({kCli, "report", report, "--format", "html", "-o", page}, {}, dir.path());
  ASSERT_EQ(html.exit_code, 0) << html.err;
  const std::string content = ReadFile(page);
  EXPECT_NE(content.find("\"cuda_errors\":{"), std::string::npos);
  EXPECT_NE(content.find("gw-cuda-error-banner"), std::string::npos);
  EXPECT_NE(content.find("\"location\":\"" + At("launches Scatter") + "\""), std::string::npos);
}

// A job of two processes, one of which faulted: the merged report keeps the
// error, its site and the kernels before it, and fails check as that one did.
TEST(KernelFault, AMergedJobKeepsTheErrorOfTheProcessThatFailed) {
  ScopedTempDir dir;
  ScopedTempDir clean_dir;
  ProcessResult faulted;
  ProcessResult clean;
  const std::string failed_report = FaultReport(dir, &faulted);
  const std::string clean_report = FaultReport(clean_dir, &clean, /*fault=*/false);
  ASSERT_EQ(faulted.exit_code, 1) << faulted.err;
  ASSERT_EQ(clean.exit_code, 0) << clean.err;
  const std::string merged = dir.path() + "/job.json";
  const ProcessResult merge =
      RunProcess({kCli, "merge", clean_report, failed_report, "-o", merged}, {}, dir.path());
  ASSERT_EQ(merge.exit_code, 0) << merge.err;
  const json errors = ReadReport(merged)["cuda_errors"];
  ASSERT_TRUE(errors.is_object()) << ReadReport(merged).dump();
  ASSERT_EQ(errors["sticky"].size(), 1u) << errors.dump();
  EXPECT_EQ(errors["sticky"][0]["name"], "cudaErrorIllegalAddress");
  EXPECT_EQ(errors["sticky"][0]["location"], At("surfaces here"));
  ASSERT_EQ(errors["sticky"][0]["kernels"].size(), 2u);
  EXPECT_EQ(errors["sticky"][0]["kernels"][1]["location"], At("launches Scatter"));
  const ProcessResult check = RunProcess({kCli, "check", merged}, {}, dir.path());
  EXPECT_EQ(check.exit_code, 1) << check.out << check.err;
  EXPECT_NE(LineWith(check.out, {"cuda error", "cudaErrorIllegalAddress", At("surfaces here")}), "")
      << check.out;
}

// A job of two processes that both faulted: each (call, code) is one row,
// its counts summed and its site the earliest first failure's (here the
// second's, whose stack differs), and each sticky error is kept with the
// process it happened in.
TEST(KernelFault, AMergedJobOfTwoFaultedProcessesSumsTheCallsAndKeepsEachStickyError) {
  ScopedTempDir dir;
  ScopedTempDir other_dir;
  ProcessResult first;
  ProcessResult second;
  const std::string first_report = FaultReport(dir, &first);
  const std::string second_path = FaultReport(other_dir, &second);
  ASSERT_EQ(first.exit_code, 1) << first.err;
  ASSERT_EQ(second.exit_code, 1) << second.err;
  const json one = ReadReport(first_report);
  json two = ReadReport(second_path);
  ASSERT_EQ(one["cuda_errors"]["calls"].size(), 2u) << one["cuda_errors"].dump();
  ASSERT_EQ(two["cuda_errors"]["calls"].size(), 2u) << two["cuda_errors"].dump();
  // The second's failed copy: from another stack (its innermost frame
  // alone), earlier than the first's.
  json& copy = two["cuda_errors"]["calls"][0];
  ASSERT_EQ(copy["api"], "cudaMemcpy");
  ASSERT_GT(copy["frames"].size(), 1u);
  json frame = copy["frames"][0];
  frame["file"] = "elsewhere.cu";
  frame["line"] = 7;
  copy["frames"] = json::array({frame});
  copy["location"] = "elsewhere.cu:7";
  copy["first_ns"] = 1000;
  const std::string second_report = other_dir.path() + "/edited.json";
  {
    std::ofstream out(second_report);
    out << two.dump();
  }
  const std::string merged = dir.path() + "/job.json";
  const ProcessResult merge =
      RunProcess({kCli, "merge", first_report, second_report, "-o", merged}, {}, dir.path());
  ASSERT_EQ(merge.exit_code, 0) << merge.err;
  const json errors = ReadReport(merged)["cuda_errors"];
  ASSERT_EQ(errors["calls"].size(), 2u) << errors.dump();
  std::map<std::string, json> calls;
  for (const json& c : errors["calls"]) calls[c["api"].get<std::string>()] = c;
  ASSERT_EQ(calls.count("cudaMemcpy"), 1u) << errors.dump();
  ASSERT_EQ(calls.count("cudaFree"), 1u) << errors.dump();
  EXPECT_EQ(calls["cudaMemcpy"]["code"], 700);
  EXPECT_EQ(calls["cudaMemcpy"]["count"], 2);
  EXPECT_EQ(calls["cudaMemcpy"]["processes"], 2);
  EXPECT_EQ(calls["cudaMemcpy"]["first_ns"], 1000);
  EXPECT_EQ(calls["cudaMemcpy"]["location"], "elsewhere.cu:7");
  EXPECT_EQ(calls["cudaMemcpy"]["last_ns"],
            std::max(one["cuda_errors"]["calls"][0]["last_ns"].get<uint64_t>(),
                     two["cuda_errors"]["calls"][0]["last_ns"].get<uint64_t>()));
  EXPECT_EQ(calls["cudaFree"]["count"], 2);
  EXPECT_EQ(calls["cudaFree"]["location"], At("fails as well"));
  ASSERT_EQ(errors["sticky"].size(), 2u) << errors.dump();
  EXPECT_EQ(errors["sticky"][0]["pid"], one["process"]["pid"]);
  EXPECT_EQ(errors["sticky"][1]["pid"], two["process"]["pid"]);
  for (const json& sticky : errors["sticky"]) {
    EXPECT_EQ(sticky["name"], "cudaErrorIllegalAddress");
    EXPECT_EQ(sticky["location"], At("surfaces here"));
    ASSERT_EQ(sticky["kernels"].size(), 2u);
    EXPECT_EQ(sticky["kernels"][1]["location"], At("launches Scatter"));
  }
  // The text report says in which process each failed.
  const ProcessResult text = RunProcess({kCli, "report", merged}, {}, dir.path());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  for (const json& sticky : errors["sticky"]) {
    EXPECT_NE(LineWith(text.out,
                       {"The run failed: CUDA error cudaErrorIllegalAddress (700)",
                        "(pid " + std::to_string(sticky["pid"].get<uint64_t>()) + ", device 0;"}),
              "")
        << text.out;
  }
}

TEST(KernelFault, WithoutTheFaultTheRunHasNoErrorsAndPassesCheck) {
  ScopedTempDir dir;
  ProcessResult r;
  const std::string path = FaultReport(dir, &r, /*fault=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "kernel_fault: done\n");
  const json report = ReadReport(path);
  EXPECT_FALSE(report.contains("cuda_errors")) << report.dump();
  EXPECT_FALSE(report["leaks"].contains("live_when_failed"));
  EXPECT_EQ(LineWith(r.err, {"the run failed"}), "") << r.err;
  const ProcessResult check = RunProcess({kCli, "check", path}, {}, dir.path());
  EXPECT_EQ(check.exit_code, 0) << check.out;
  EXPECT_EQ(check.out.find("cuda error"), std::string::npos) << check.out;
}

// A call whose parameters say nothing gpuwatch records (cudaGraphAddNode without node
// parameters: its ENTER is not parsed) still counts when it fails, with its line.
TEST(KernelFault, AFailedCallWhoseParamsWereNotReadIsCounted) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const ProcessResult r =
      RunProcess({kPrograms + "/kernel_fault", "unparsed"}, PreloadEnv(out, {}), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "kernel_fault: unparsed call returned 1\n");
  const json report = ReadReport(out);
  const json& errors = report["cuda_errors"];
  ASSERT_TRUE(errors.is_object()) << report.dump();
  EXPECT_EQ(errors["run_failed"], false);
  EXPECT_EQ(errors["sticky"].size(), 0u) << errors.dump();
  ASSERT_EQ(errors["calls"].size(), 1u) << errors.dump();
  EXPECT_EQ(errors["calls"][0]["api"], "cudaGraphAddNode");
  EXPECT_EQ(errors["calls"][0]["name"], "cudaErrorInvalidValue");
  EXPECT_EQ(errors["calls"][0]["code"], 1);
  EXPECT_EQ(errors["calls"][0]["domain"], "runtime");
  EXPECT_EQ(errors["calls"][0]["count"], 1);
  EXPECT_EQ(errors["calls"][0]["location"], At("fails unread"));
}

}  // namespace
}  // namespace gpuwatch::testing
