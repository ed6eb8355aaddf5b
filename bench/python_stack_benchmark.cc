// Cost of Python frames per captured stack (libgpuwatch/stacks/python_stack.h).
//
// The benchmark embeds a CPython found at run time (nothing is linked against
// Python), runs Python code that recurses N frames deep and then calls back
// into this program through ctypes, and times the capture there, as a CUDA
// callback would see it:
//
//   BM_PythonFrames/N/gil       CapturePythonFrames alone
//   BM_CaptureSite/N/gil        what CaptureSite does: the native stack
//                               (GPUWATCH_DEPTH 32 + 12 tool frames), the
//                               Python frames, and interning the whole stack
//   BM_CaptureSiteNative/N/gil  the same without Python frames (baseline)
//   BM_MergeAtReport/N          report time: symbolizing and merging one new
//                               stack (SymbolizeMixedStack)
//
// gil = 0: called through ctypes.CFUNCTYPE, which releases the GIL (as ctypes
// and PyTorch do around foreign calls); gil = 1: through ctypes.PYFUNCTYPE,
// which keeps it.
//
//   GPUWATCH_BENCH_LIBPYTHON=/path/to/libpython3.11.so.1.0 python_stack_benchmark
//
// Without the variable the newest libpython3.N.so.1.0 under ~/.pyenv/versions
// (or $PYENV_ROOT/versions) is used, else the system's; with none found every
// benchmark is skipped.
#include <dirent.h>
#include <dlfcn.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "libgpuwatch/stacks/python_stack.h"
#include "libgpuwatch/stacks/stack_table.h"
#include "libgpuwatch/stacks/unwind.h"
#include "libgpuwatch/symbolize/mixed_stack.h"

namespace gpuwatch {
namespace {

constexpr int kNativeDepth = 32 + 12;  // GPUWATCH_DEPTH default + tool frames
constexpr int kPythonDepth = 32;

std::string g_python_version;
bool g_python_ready = false;

// The newest libpython3.N.so.1.0 under `root`/versions/*/lib.
std::string FindPyenvLibpython(const std::string& root) {
  std::vector<std::string> found;
  if (DIR* d = opendir((root + "/versions").c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string version = e->d_name;
      if (version.rfind("3.", 0) != 0) continue;
      const std::string lib = root + "/versions/" + version + "/lib";
      if (DIR* l = opendir(lib.c_str())) {
        while (dirent* f = readdir(l)) {
          const std::string name = f->d_name;
          if (name.rfind("libpython3.", 0) == 0 && name.ends_with(".so.1.0")) {
            found.push_back(lib + "/" + name);
          }
        }
        closedir(l);
      }
    }
    closedir(d);
  }
  // Newest minor version last (3.9 < 3.10 < 3.13).
  std::sort(found.begin(), found.end(), [](const std::string& a, const std::string& b) {
    auto minor = [](const std::string& s) {
      const size_t at = s.rfind("libpython3.");
      return std::atoi(s.c_str() + at + 11);
    };
    return minor(a) < minor(b);
  });
  return found.empty() ? "" : found.back();
}

std::string FindLibpython() {
  if (const char* env = std::getenv("GPUWATCH_BENCH_LIBPYTHON")) return env;  // NOLINT
  for (const char* var : {"PYENV_ROOT", "HOME"}) {
    const char* root = std::getenv(var);  // NOLINT(concurrency-mt-unsafe): set-up
    if (root == nullptr) continue;
    std::string lib =
        FindPyenvLibpython(std::string(root) + (std::string(var) == "HOME" ? "/.pyenv" : ""));
    if (!lib.empty()) return lib;
  }
  for (int minor = 13; minor >= 8; --minor) {
    std::string lib = "/usr/lib/x86_64-linux-gnu/libpython3." + std::to_string(minor) + ".so.1.0";
    if (FILE* f = std::fopen(lib.c_str(), "r")) {
      std::fclose(f);
      return lib;
    }
  }
  return "";
}

template <typename Fn>
Fn PySym(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

// Loads libpython globally (so that gpuwatch finds it with dlsym, as in a
// python process), initializes it and prepares Python frame capture.
void StartPython() {
  const std::string lib = FindLibpython();
  if (lib.empty()) return;
  if (dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    std::fprintf(stderr, "cannot load %s: %s\n", lib.c_str(), dlerror());
    return;
  }
  // A pyenv layout (PREFIX/lib/libpython...): the standard library is under
  // PREFIX, not where this program is.
  const size_t slash = lib.rfind("/lib/");
  if (slash != std::string::npos && lib.find("/usr/lib/") != 0) {
    setenv("PYTHONHOME", lib.substr(0, slash).c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  }
  PySym<void (*)(int)>("Py_InitializeEx")(0);
  g_python_version = PySym<const char* (*)()>("Py_GetVersion")();
  g_python_version = g_python_version.substr(0, g_python_version.find(' '));
  g_python_ready = InitPythonStacks();
  // From here on the main thread has no GIL unless the Python code below
  // holds it: released, as a training loop calling into C++ would be.
  PySym<void* (*)()>("PyEval_SaveThread")();
}

enum class What { kPythonFrames, kCaptureSite, kCaptureSiteNative };

benchmark::State* g_state = nullptr;
What g_what = What::kPythonFrames;
// The stack table and its Python frame table, as the Session keeps them.
StackTable& Stacks() {
  static StackTable* const stacks = [] {
    auto* made = new StackTable(1u << 16, size_t{64} << 20);
    made->EnablePythonFrames();
    return made;
  }();
  return *stacks;
}

// Called from Python, N frames deep; the timed loop runs here.
void GwBenchInsidePython() {
  benchmark::State& state = *g_state;
  uintptr_t pcs[kMaxCaptureDepth];
  if (CapturePythonFrames(Stacks().python_frames(), pcs, kPythonDepth) == 0) {
    state.SkipWithError("no Python frames captured");
    return;
  }
  int frames = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    int n = 0;
    switch (g_what) {
      case What::kPythonFrames:
        n = CapturePythonFrames(Stacks().python_frames(), pcs, kPythonDepth);
        break;
      case What::kCaptureSite:
        n = CaptureStack(pcs, kNativeDepth, 0);
        n += CapturePythonFrames(Stacks().python_frames(), pcs + n, kPythonDepth);
        benchmark::DoNotOptimize(Stacks().Intern(pcs, n));
        break;
      case What::kCaptureSiteNative:
        n = CaptureStack(pcs, kNativeDepth, 0);
        benchmark::DoNotOptimize(Stacks().Intern(pcs, n));
        break;
    }
    benchmark::DoNotOptimize(n);
    frames = n;
  }
  state.counters["frames"] = frames;
}

// Runs GwBenchInsidePython `depth` Python frames deep, with or without the GIL.
void RunInsidePython(benchmark::State& state, What what) {
  if (!g_python_ready) {
    state.SkipWithError("no CPython 3.8-3.13 found (set GPUWATCH_BENCH_LIBPYTHON)");
    return;
  }
  g_state = &state;
  g_what = what;
  const int depth = static_cast<int>(state.range(0));
  const bool gil = state.range(1) != 0;
  char code[1024];
  std::snprintf(code, sizeof(code),
                "import ctypes\n"
                "def nest(n, fn):\n"
                "    if n <= 1:\n"
                "        fn()\n"
                "    else:\n"
                "        nest(n - 1, fn)\n"
                "nest(%d, ctypes.%s(None)(%llu))\n",
                depth - 1,  // the module frame is one more
                gil ? "PYFUNCTYPE" : "CFUNCTYPE",
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(&GwBenchInsidePython)));
  const auto ensure = PySym<int (*)()>("PyGILState_Ensure");
  const auto release = PySym<void (*)(int)>("PyGILState_Release");
  const auto run = PySym<int (*)(const char*)>("PyRun_SimpleString");
  const int gstate = ensure();
  if (run(code) != 0) state.SkipWithError("the Python code failed");
  release(gstate);
  state.SetLabel("Python " + g_python_version);
}

void BM_PythonFrames(benchmark::State& state) { RunInsidePython(state, What::kPythonFrames); }
void BM_CaptureSite(benchmark::State& state) { RunInsidePython(state, What::kCaptureSite); }
void BM_CaptureSiteNative(benchmark::State& state) {
  RunInsidePython(state, What::kCaptureSiteNative);
}

BENCHMARK(BM_PythonFrames)->ArgNames({"depth", "gil"})->ArgsProduct({{10, 30}, {0, 1}});
BENCHMARK(BM_CaptureSite)->ArgNames({"depth", "gil"})->ArgsProduct({{10, 30}, {0, 1}});
BENCHMARK(BM_CaptureSiteNative)->ArgNames({"depth", "gil"})->ArgsProduct({{10, 30}, {0}});

// Report time: one distinct stack symbolized and merged, the per-pc caches of
// the Symbolizer warm (they are shared by a report's stacks).
std::vector<uintptr_t> g_report_stack;

void GwBenchCaptureForReport() {
  uintptr_t pcs[kMaxCaptureDepth];
  int n = CaptureStack(pcs, kNativeDepth, 0);
  n += CapturePythonFrames(Stacks().python_frames(), pcs + n, kPythonDepth);
  g_report_stack.assign(pcs, pcs + n);
}

void BM_MergeAtReport(benchmark::State& state) {
  if (!g_python_ready) {
    state.SkipWithError("no CPython 3.8-3.13 found (set GPUWATCH_BENCH_LIBPYTHON)");
    return;
  }
  char code[512];
  std::snprintf(
      code, sizeof(code),
      "import ctypes\n"
      "def nest(n, fn):\n"
      "    fn() if n <= 1 else nest(n - 1, fn)\n"
      "nest(%d, ctypes.CFUNCTYPE(None)(%llu))\n",
      static_cast<int>(state.range(0)) - 1,
      static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(&GwBenchCaptureForReport)));
  const int gstate = PySym<int (*)()>("PyGILState_Ensure")();
  PySym<int (*)(const char*)>("PyRun_SimpleString")(code);
  PySym<void (*)(int)>("PyGILState_Release")(gstate);
  Symbolizer symbolizer;
  std::vector<Frame> frames;
  SymbolizeMixedStack(&symbolizer, Stacks().python_frames(), g_report_stack,
                      &frames);  // warms the caches
  for (auto _ : state) {         // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
    frames.clear();
    SymbolizeMixedStack(&symbolizer, Stacks().python_frames(), g_report_stack, &frames);
    benchmark::DoNotOptimize(frames.data());
  }
  state.counters["frames"] = static_cast<double>(frames.size());
  state.SetLabel("Python " + g_python_version);
}
BENCHMARK(BM_MergeAtReport)->ArgName("depth")->Arg(30);

}  // namespace
}  // namespace gpuwatch

int main(int argc, char** argv) {
  gpuwatch::StartPython();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
