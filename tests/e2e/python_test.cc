// End-to-end tests of Python frames: tests/e2e/programs/python_leaks.py runs
// under libgpuwatch.so on the CUDA simulator and allocates through
// ctypes.CDLL("libcudart.so.13") from nested functions, a threading.Thread, a
// native thread (py_native_helper.c) with and without a call back into
// Python, sitecustomize while the interpreter starts, an atexit handler, a
// __del__ run by finalization and daemon threads still allocating while the
// interpreter exits; and GPUWATCH_PYTHON=0, suppressions (in the library and
// in `gpuwatch check`) and `gpuwatch run` / `gpuwatch report` on Python frames.
//
// Each test runs with the machine's python3, the system interpreter
// (/usr/bin/python3: stripped, LTO) and every CPython 3.8 to 3.13 found
// (python3.N under $PYENV_ROOT/versions, ~/.pyenv/versions, /usr/bin,
// /usr/local/bin, then on PATH); an interpreter that is missing is skipped
// with a message.
#include <dirent.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;

const std::string kScript = kSourceDir + "/tests/e2e/programs/python_leaks.py";
const std::string kHelperSource = kSourceDir + "/tests/e2e/programs/py_native_helper.c";
const std::string kHelper = kPrograms + "/libpy_native_helper.so";

// "python_leaks.py:N" for the line marked `# LEAK:name`.
std::string ScriptSite(const std::string& name) {
  const int line = LineOf(kScript, "# LEAK:" + name);
  EXPECT_GT(line, 0) << name;
  return "python_leaks.py:" + std::to_string(line);
}

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// Entries of `dir` that start with `prefix`, sorted, newest version last.
std::vector<std::string> EntriesWithPrefix(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind(prefix, 0) == 0) out.push_back(name);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string OnPath(const std::string& name) {
  const char* path = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe): test set-up
  std::string rest = path != nullptr ? path : "";
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    const std::string dir = rest.substr(0, colon);
    rest = colon == std::string::npos ? "" : rest.substr(colon + 1);
    // A pyenv shim runs only the version pyenv has selected.
    if (dir.empty() || dir.find("pyenv/shims") != std::string::npos) continue;
    if (IsExecutable(dir + "/" + name)) return dir + "/" + name;
  }
  return "";
}

// The interpreter `python3` on PATH runs (through a pyenv shim, say), asked
// once: sys.executable.
std::string MachinePython() {
  static const std::string* const python = [] {
    auto* out = new std::string();
    const ProcessResult r =
        RunProcess({"python3", "-c", "import sys; print(sys.executable)"}, {}, "/");
    if (r.exit_code == 0 && r.out.size() > 1) *out = r.out.substr(0, r.out.size() - 1);
    return out;
  }();
  return *python;
}

// The interpreter for a test parameter: "python3" (the machine's),
// "system" (/usr/bin/python3) or "3.N".
std::string FindPython(const std::string& which) {
  if (which == "python3") return MachinePython();
  if (which == "system") return IsExecutable("/usr/bin/python3") ? "/usr/bin/python3" : "";
  const std::string exe = "python" + which;
  std::vector<std::string> roots;
  const char* pyenv = std::getenv("PYENV_ROOT");  // NOLINT(concurrency-mt-unsafe)
  if (pyenv != nullptr) roots.push_back(std::string(pyenv) + "/versions");
  const char* home = std::getenv("HOME");  // NOLINT(concurrency-mt-unsafe)
  if (home != nullptr) roots.push_back(std::string(home) + "/.pyenv/versions");
  roots.push_back("/root/.pyenv/versions");
  for (const std::string& root : roots) {
    auto versions = EntriesWithPrefix(root, which + ".");
    for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
      std::string candidate = root + "/" + *it + "/bin/" + exe;
      if (IsExecutable(candidate)) return candidate;
    }
  }
  for (const char* dir : {"/usr/bin/", "/usr/local/bin/"}) {
    if (IsExecutable(dir + exe)) return dir + exe;
  }
  return OnPath(exe);
}

json SiteWithBytes(const json& section, uint64_t bytes) {
  for (const json& site : section["sites"]) {
    if (site["bytes"] == bytes) return site;
  }
  return nullptr;
}

bool IsPython(const json& frame) { return frame["module"] == "python"; }

// The functions of the Python frames of a site, innermost first. From 3.11
// they are qualified names (Trainer.step); the test compares the last part.
std::vector<std::string> PythonFunctions(const json& site) {
  std::vector<std::string> out;
  for (const json& f : site["frames"]) {
    if (!IsPython(f)) continue;
    std::string name = f["function"].get<std::string>();
    const size_t dot = name.rfind('.');
    out.push_back(dot == std::string::npos ? name : name.substr(dot + 1));
  }
  return out;
}

std::string Describe(const json& site) {
  std::string out;
  for (const json& f : site["frames"]) {
    out += "  " + f["function"].get<std::string>() + " " + f["file"].get<std::string>() + ":" +
           std::to_string(f["line"].get<int>()) + " [" + f["module"].get<std::string>() + "]\n";
  }
  return out;
}

// Checks that the site names the script's marked line through its first
// frame, a Python frame, and that the Python frames run as `expected`
// (innermost first) before anything else of the script.
void ExpectPythonSite(const json& device, const std::string& name,
                      const std::vector<std::string>& expected) {
  const std::string location = ScriptSite(name);
  const json site = SiteAt(device, location);
  ASSERT_FALSE(site.is_null()) << "no site at " << location << "\n" << device.dump(1);
  const json& top = site["frames"][0];
  EXPECT_TRUE(IsPython(top)) << Describe(site);
  EXPECT_EQ(top["line"], LineOf(kScript, "# LEAK:" + name));
  EXPECT_TRUE(top["file"].get<std::string>().ends_with("python_leaks.py")) << Describe(site);
  const std::vector<std::string> functions = PythonFunctions(site);
  ASSERT_GE(functions.size(), expected.size()) << Describe(site);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), functions.begin())) << Describe(site);
  // The interpreter's own frames were replaced or dropped.
  for (const json& f : site["frames"]) {
    EXPECT_FALSE(f["function"].get<std::string>().starts_with("_PyEval_EvalFrame"))
        << Describe(site);
  }
}

class PythonTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    python_ = FindPython(GetParam());
    if (python_.empty()) GTEST_SKIP() << "no python" << GetParam() << " on this machine";
  }

  // Runs the script in `mode` under LD_PRELOAD; the report goes to `out`.
  ProcessResult Run(const ScopedTempDir& dir, const std::string& mode, const std::string& out,
                    const std::map<std::string, std::string>& extra = {}) const {
    return RunProcess({python_, kScript, mode, kHelper}, PreloadEnv(out, extra), dir.path());
  }

  // Run with the report at dir/report.json, as RunPreloaded: it must exit 0
  // and leave a report, read into *report.
  void RunToReport(const ScopedTempDir& dir, const std::string& mode, json* report,
                   ProcessResult* result = nullptr) const {
    RunPreloaded(dir, {python_, kScript, mode, kHelper}, report, result);
  }

  std::string python_;
};

TEST_P(PythonTest, NestedFunctionsNameTheScriptLine) {
  ScopedTempDir dir;
  json report;
  ProcessResult r;
  ASSERT_NO_FATAL_FAILURE(RunToReport(dir, "nested", &report, &r));
  EXPECT_EQ(r.out, "python_leaks: nested done\n");
  const json& device = report["leaks"]["device"];
  // ctypes.CDLL releases the GIL around the call; ctypes.PyDLL keeps it.
  ExpectPythonSite(device, "nested", {"inner", "middle", "step", "outer", "main", "<module>"});
  ExpectPythonSite(device, "nested_gil", {"inner_gil", "outer_gil", "main", "<module>"});
  EXPECT_EQ(SiteAt(device, ScriptSite("nested"))["bytes"], 3 * kMiB);
  EXPECT_EQ(SiteAt(device, ScriptSite("nested_gil"))["bytes"], 5 * kMiB);
  EXPECT_EQ(device["bytes"], 8 * kMiB);
  // The summary names the line and the function.
  EXPECT_NE(r.err.find("at " + ScriptSite("nested") + " (inner)"), std::string::npos) << r.err;
}

TEST_P(PythonTest, ThreadingThreadNamesTheScriptLine) {
  ScopedTempDir dir;
  json report;
  ASSERT_NO_FATAL_FAILURE(RunToReport(dir, "thread", &report));
  ExpectPythonSite(report["leaks"]["device"], "thread", {"thread_alloc", "thread_main", "run"});
}

TEST_P(PythonTest, NativeThreadHasNativeFramesOnly) {
  ScopedTempDir dir;
  json report;
  ASSERT_NO_FATAL_FAILURE(RunToReport(dir, "native", &report));
  const std::string location =
      "py_native_helper.c:" + std::to_string(LineOf(kHelperSource, "/* LEAK:native */"));
  const json site = SiteAt(report["leaks"]["device"], location);
  ASSERT_FALSE(site.is_null()) << report["leaks"]["device"].dump(1);
  EXPECT_EQ(site["bytes"], 11 * kMiB);
  EXPECT_EQ(site["frames"][0]["function"], "alloc_thread_main");
  for (const json& f : site["frames"]) EXPECT_FALSE(IsPython(f)) << Describe(site);
}

TEST_P(PythonTest, NativeThreadCallingIntoPythonShowsBoth) {
  ScopedTempDir dir;
  json report;
  ASSERT_NO_FATAL_FAILURE(RunToReport(dir, "callback", &report));
  const json& device = report["leaks"]["device"];
  ExpectPythonSite(device, "callback", {"callback_alloc"});
  // Below the Python frame: the native thread that called it.
  const json site = SiteAt(device, ScriptSite("callback"));
  ASSERT_FALSE(site.is_null());
  bool native_caller = false;
  for (const json& f : site["frames"]) {
    if (f["function"] == "call_thread_main") {
      native_caller = true;
      EXPECT_EQ(f["line"], LineOf(kHelperSource, "/* CALLBACK:native */"));
    }
  }
  EXPECT_TRUE(native_caller) << Describe(site);
}

TEST_P(PythonTest, AllocationsDuringStartUpDoNotCrash) {
  // sitecustomize runs while the interpreter initialises (whether
  // Py_IsInitialized() already says so depends on the version): the stack is
  // Python and native, or native only, and nothing breaks.
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  std::ofstream(dir.path() + "/sitecustomize.py")
      << "import ctypes\n"
         "p = ctypes.c_void_p()\n"
         "ctypes.CDLL('libcudart.so.13').cudaMalloc(ctypes.byref(p), ctypes.c_size_t(23 << 20))\n";
  const ProcessResult r = Run(dir, "nested", out, {{"PYTHONPATH", dir.path()}});
  ASSERT_FALSE(r.signaled) << "signal " << r.signal << "\n" << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "python_leaks: nested done\n");
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object()) << r.err;
  const json& device = report["leaks"]["device"];
  EXPECT_FALSE(SiteWithBytes(device, 23 * kMiB).is_null()) << device.dump(1);
  ExpectPythonSite(device, "nested", {"inner", "middle", "step", "outer", "main", "<module>"});
}

TEST_P(PythonTest, AllocationsDuringShutdownDoNotCrash) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const ProcessResult r = Run(dir, "shutdown", out);
  ASSERT_FALSE(r.signaled) << "signal " << r.signal << "\n" << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "python_leaks: shutdown done\n");
  EXPECT_EQ(r.err.find("Exception"), std::string::npos) << r.err;
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object()) << r.err;
  const json& device = report["leaks"]["device"];
  // atexit handlers run with the interpreter intact: Python frames.
  ExpectPythonSite(device, "atexit", {"at_exit"});
  // __del__ runs while the interpreter finalizes: counted, native frames.
  const json del = SiteWithBytes(device, 19 * kMiB);
  ASSERT_FALSE(del.is_null()) << device.dump(1);
  EXPECT_EQ(device["bytes"], (17 + 19) * kMiB);
}

TEST_P(PythonTest, DaemonThreadsAllocatingAtExitDoNotCrash) {
  // Four daemon threads stay inside CUDA without the GIL, allocating and
  // freeing as fast as they can, while the main thread exits: the interpreter
  // frees their thread states and frames under them (python_stack.h). A few
  // runs, to give a race a chance.
  const std::string churn =
      "py_native_helper.c:" + std::to_string(LineOf(kHelperSource, "/* CHURN */"));
  for (int run = 0; run < 4; ++run) {
    ScopedTempDir dir;
    const std::string out = dir.path() + "/report.json";
    const ProcessResult r = Run(dir, "daemons", out);
    ASSERT_FALSE(r.signaled) << "run " << run << ": signal " << r.signal << "\n" << r.err;
    ASSERT_EQ(r.exit_code, 0) << "run " << run << "\n" << r.err;
    const json report = ReadJson(out);
    ASSERT_TRUE(report.is_object()) << r.err;
    ExpectPythonSite(report["leaks"]["device"], "atexit", {"at_exit"});
    // The loop's allocations had the daemon threads' Python frames while the
    // interpreter ran.
    bool python_frames = false;
    for (const json& site : report["sites"]) {
      if (site["location"] != churn) continue;
      for (const json& f : site["frames"]) {
        python_frames = python_frames || (IsPython(f) && f["function"] == "churn");
      }
    }
    EXPECT_TRUE(python_frames) << "run " << run << ": no site at " << churn
                               << " with the Python frame churn\n"
                               << report["sites"].dump(1);
  }
}

std::string ParamName(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '.', '_');
  return name[0] >= '0' && name[0] <= '9' ? "python" + name : name;
}

INSTANTIATE_TEST_SUITE_P(Interpreters, PythonTest,
                         ::testing::Values("python3", "system", "3.8", "3.9", "3.10", "3.11",
                                           "3.12", "3.13"),
                         ParamName);

// --- With the machine's python3 only ---------------------------------------

class PythonOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    python_ = FindPython("python3");
    if (python_.empty()) GTEST_SKIP() << "no python3 on this machine";
  }
  std::string python_;
};

TEST_F(PythonOptionsTest, PythonOffGivesNativeFramesOnly) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const ProcessResult r = RunProcess({python_, kScript, "nested"},
                                     PreloadEnv(out, {{"GPUWATCH_PYTHON", "0"}}), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object()) << r.err;
  const json& device = report["leaks"]["device"];
  EXPECT_EQ(device["bytes"], 8 * kMiB);
  for (const json& site : device["sites"]) {
    EXPECT_EQ(site["location"].get<std::string>().find("python_leaks.py"), std::string::npos);
    for (const json& f : site["frames"]) EXPECT_FALSE(IsPython(f)) << Describe(site);
  }
}

TEST_F(PythonOptionsTest, SuppressionsMatchPythonFramesInProcessAndInCheck) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const std::string supp = dir.path() + "/python.supp";
  // A Python function of the 3 MiB site's stack, not its innermost frame.
  std::ofstream(supp) << "leak:^middle$\n";
  const ProcessResult r = RunProcess(
      {python_, kScript, "nested"}, PreloadEnv(out, {{"GPUWATCH_SUPPRESSIONS", supp}}), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = ReadJson(out);
  ASSERT_TRUE(report.is_object()) << r.err;
  const json& device = report["leaks"]["device"];
  EXPECT_EQ(SiteAt(device, ScriptSite("nested"))["suppressed"], "leak:^middle$");
  EXPECT_FALSE(SiteAt(device, ScriptSite("nested_gil")).contains("suppressed"));
  EXPECT_EQ(device["leaked_bytes"], 5 * kMiB);

  auto check = [&](const std::string& rules) {
    std::ofstream(supp) << rules;
    return RunProcess({kCli, "check", out, "--suppressions", supp}, {}, dir.path());
  };
  // By function, by file of a Python frame, and not by a name on no frame.
  const ProcessResult by_function = check("leak:^middle$\nleak:^inner_gil$\n");
  EXPECT_EQ(by_function.exit_code, 0) << by_function.out << by_function.err;
  EXPECT_EQ(check("leak:python_leaks.py\n").exit_code, 0);
  const ProcessResult partial = check("leak:^middle$\n");
  EXPECT_EQ(partial.exit_code, 1) << partial.out;
  EXPECT_NE(partial.out.find(ScriptSite("nested_gil")), std::string::npos) << partial.out;
  EXPECT_EQ(check("leak:no_such_function\n").exit_code, 1);
}

TEST_F(PythonOptionsTest, GpuwatchRunAndReportShowTheScriptLine) {
  GPUWATCH_SKIP_PYTHON_UNDER_RUN_IN_TSAN();
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const ProcessResult r =
      RunProcess({kCli, "run", "-o", out, "--", python_, kScript, "nested"}, SimEnv(), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ProcessResult text = RunProcess({kCli, "report", out}, {}, dir.path());
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find(ScriptSite("nested")), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(ScriptSite("nested_gil")), std::string::npos) << text.out;
}

// --- The gpuwatch Python package (python/gpuwatch) ---------------------------

const std::string kModuleScript = kSourceDir + "/tests/e2e/programs/python_module.py";

std::string ModuleSite(const std::string& marker) {
  return "python_module.py:" + std::to_string(LineOf(kModuleScript, "# MODULE:" + marker));
}

// `gpuwatch run` puts the package on PYTHONPATH: `import gpuwatch` needs no
// install, and its calls reach the library: marks, a labelled snapshot, and
// a paused block left out of the record (resumed after, even when it raises),
// phases.
TEST_F(PythonOptionsTest, TheModuleUnderGpuwatchRunMarksSnapshotsAndPauses) {
  GPUWATCH_SKIP_PYTHON_UNDER_RUN_IN_TSAN();
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  std::map<std::string, std::string> env = SimEnv();
  env["PYTHONPATH"] = "";  // nothing but what gpuwatch run adds
  env["GWSIM_DEVICE_COUNT"] = "2";
  const ProcessResult r = RunProcess(
      {kCli, "run", "--no-summary", "-o", out, "--", python_, kModuleScript}, env, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // What was allocated after each point and is still live: from the start
  // (taken before the first CUDA call), and from after the first leak.
  const std::string since_start = "since start device 7340032 in 3 at " + ModuleSite("device1") +
                                  "=4194304 " + ModuleSite("after_paused") + "=2097152 " +
                                  ModuleSite("first") + "=1048576 host 5242880 peak 7340032\n";
  const std::string since_mid = "since mid device 6291456 in 2 at " + ModuleSite("device1") +
                                "=4194304 " + ModuleSite("after_paused") +
                                "=2097152 host 5242880 peak 7340032\n";
  EXPECT_EQ(r.out, "attached True version " + std::string(GPUWATCH_TEST_VERSION) +
                       " mark True snapshot True module " + GPUWATCH_TEST_VERSION +
                       "\nstart point 1\n" + since_start + since_mid +
                       "live Live(bytes=7340032, count=3)"  // 1 + 2 + 4 MiB, not the paused
                       " device Live(bytes=7340032, count=3)"
                       " device0 Live(bytes=3145728, count=2)"
                       " device1 Live(bytes=4194304, count=1)"
                       " host Live(bytes=5242880, count=1)"
                       " pinned Live(bytes=5242880, count=1) unknown refused\n")
      << r.err;
  const json report = ReadReport(out);
  const json& leaks = report["leaks"]["device"];
  EXPECT_EQ(leaks["bytes"], 7 * kMiB) << leaks.dump(1);  // not the paused 3 MiB
  ASSERT_EQ(leaks["sites"].size(), 3u) << leaks.dump(1);
  EXPECT_EQ(leaks["sites"][0]["location"], ModuleSite("device1"));
  EXPECT_EQ(leaks["sites"][0]["kinds"]["device"], 4 * kMiB);
  EXPECT_EQ(leaks["sites"][1]["location"], ModuleSite("after_paused"));
  EXPECT_EQ(leaks["sites"][1]["bytes"], 2 * kMiB);
  EXPECT_EQ(leaks["sites"][1]["phase"], "step/forward");
  EXPECT_FALSE(leaks["sites"][0].contains("phase"));
  // gpuwatch.phase: as a decorator and a block, closed when the block raises.
  const json& phases = report["phases"];
  ASSERT_EQ(phases["paths"].size(), 3u) << phases.dump(1);
  EXPECT_EQ(phases["paths"][0]["path"], "failing");
  EXPECT_EQ(phases["paths"][0]["opens"], 1);
  EXPECT_EQ(phases["paths"][1]["path"], "step");
  EXPECT_EQ(phases["paths"][2]["path"], "step/forward");
  EXPECT_EQ(phases["paths"][2]["live_bytes"], 2 * kMiB);
  EXPECT_EQ(phases["paths"][2]["peak_bytes"], 3 * kMiB);  // with the first 1 MiB
  EXPECT_EQ(phases["unbalanced_pops"], 0);
  EXPECT_EQ(leaks["sites"][2]["location"], ModuleSite("first"));
  EXPECT_EQ(leaks["sites"][2]["bytes"], 1 * kMiB);
  EXPECT_EQ(report["growth"]["basis"], "mark");
  EXPECT_EQ(report["growth"]["samples"], 2);
  const json snapshot = ReadReport(out + ".snapshot-1");
  EXPECT_EQ(snapshot["trigger"], "snapshot");
  EXPECT_EQ(snapshot["label"], "from python");
  EXPECT_EQ(snapshot["leaks"]["device"]["bytes"], 1 * kMiB);
}

// A pause before the first CUDA call (gpuwatch attaches at that call under
// Python) holds once gpuwatch attaches: the paused warm-up's 3 MiB are not
// recorded, the 1 MiB after the resume is.
TEST_F(PythonOptionsTest, APauseBeforeTheFirstCudaCallHoldsFromTheAttachOn) {
  GPUWATCH_SKIP_PYTHON_UNDER_RUN_IN_TSAN();
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  const std::string script = kSourceDir + "/tests/e2e/programs/python_pause_first.py";
  std::map<std::string, std::string> env = SimEnv();
  env["PYTHONPATH"] = "";
  const ProcessResult r =
      RunProcess({kCli, "run", "--no-summary", "-o", out, "--", python_, script}, env, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "attached before False pause True resume True attached after True\n") << r.err;
  const json report = ReadReport(out);
  const json& leaks = report["leaks"]["device"];
  EXPECT_EQ(leaks["bytes"], 1 * kMiB) << leaks.dump(1);
  ASSERT_EQ(leaks["sites"].size(), 1u) << leaks.dump(1);
  EXPECT_EQ(leaks["sites"][0]["location"],
            "python_pause_first.py:" + std::to_string(LineOf(script, "# PAUSE:kept")));
}

// Without gpuwatch every call is a no-op that says so, and the script runs.
TEST_F(PythonOptionsTest, TheModuleWithoutGpuwatchDoesNothing) {
  ScopedTempDir dir;
  std::map<std::string, std::string> env = SimEnv();
  env["PYTHONPATH"] = kSourceDir + "/python";
  const ProcessResult r = RunProcess({python_, kModuleScript}, env, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "attached False version None mark False snapshot False module " +
                       std::string(GPUWATCH_TEST_VERSION) +
                       "\nstart point None\nsince start None\nsince mid None"
                       "\nlive None device None device0 None device1 None host None pinned None"
                       " unknown accepted\n");
  EXPECT_EQ(r.err, "");
}

}  // namespace
}  // namespace gpuwatch::testing
