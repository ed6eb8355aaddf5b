// The end-to-end tests' harness, one header for every test in tests/e2e:
// where the build put the library, the command, the simulator and the test
// programs (tests/CMakeLists.txt passes them in); running a program with a
// given environment, to its end (RunProcess) or while the test talks to it
// (StartProcess); the environments the tests run programs in; and reading
// reports and sources.
#ifndef GPUWATCH_TESTS_E2E_COMMON_H_
#define GPUWATCH_TESTS_E2E_COMMON_H_

#include <sys/types.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace gpuwatch::testing {

inline const std::string kLib = GPUWATCH_TEST_LIB;         // libgpuwatch.so
inline const std::string kCli = GPUWATCH_TEST_CLI;         // the gpuwatch command
inline const std::string kSimDir = GPUWATCH_TEST_SIM_DIR;  // the simulator's libraries
inline const std::string kPrograms = GPUWATCH_TEST_PROGRAMS_DIR;
inline const std::string kExamples = GPUWATCH_TEST_EXAMPLES_DIR;
inline const std::string kSourceDir = GPUWATCH_TEST_SOURCE_DIR;

// In a test that runs python under `gpuwatch run`: a skip in ThreadSanitizer
// builds, where `gpuwatch run` preloads the instrumented library into an
// uninstrumented python without the TSan runtime ahead of it (TSan cannot
// start that late).
#if defined(__SANITIZE_THREAD__)
#define GPUWATCH_SKIP_PYTHON_UNDER_RUN_IN_TSAN() \
  GTEST_SKIP() << "an uninstrumented python cannot load a ThreadSanitizer-built libgpuwatch.so"
#else
#define GPUWATCH_SKIP_PYTHON_UNDER_RUN_IN_TSAN() static_cast<void>(0)
#endif

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * kKiB;

// --- Processes ----------------------------------------------------------------

struct ProcessResult {
  int exit_code = -1;  // valid when !signaled
  bool signaled = false;
  int signal = 0;
  std::string out;
  std::string err;
};

// The environment a child gets, as NAME=VALUE strings: the current
// environment minus every GPUWATCH_*, GWSIM_*, LD_PRELOAD and
// CUDA_INJECTION64_PATH variable, plus the simulator's model that ctest gives
// in GPUWATCH_TEST_SIM_ENV, plus `env` (an empty value unsets).
std::vector<std::string> ChildEnvironment(const std::map<std::string, std::string>& env);

// Runs argv[0] (searched in PATH) in `cwd` (unless empty) with
// ChildEnvironment(env) and stdin on /dev/null. Blocks until it exits.
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env, const std::string& cwd);

// RunProcess for a process that runs PyTorch, run once more when it hit PyTorch's exit race
// (IsTorchExitRace), with one line on stderr saying so.
ProcessResult RunTorchProcess(const std::vector<std::string>& argv,
                              const std::map<std::string, std::string>& env,
                              const std::string& cwd);

// Whether `r` ended in PyTorch's exit race, an upstream bug of PyTorch 2.15 that no code of
// gpuwatch takes part in (3 aborts in about 145 runs of examples/torch_leak.py on a loaded
// 2-core machine, one of them in 24 runs without gpuwatch): every backward stashes a Python
// context in its thread-local state (torch.autograd.graph._engine_run_backward), the autograd
// engine's device thread drops the last backward's task after Py_FinalizeEx has begun, takes the
// GIL to drop that context, and is exited by Python inside a noexcept destructor: std::terminate
// aborts the process after the script's work is done. Its sign: SIGABRT (or 134 from a parent that
// reports it) and "terminate called without an active exception" on stderr.
bool IsTorchExitRace(const ProcessResult& r);

// A child that runs while the test talks to it: pipes on its stdin (when
// asked for), stdout and stderr, and what it has written so far.
struct RunningProcess {
  pid_t pid = -1;
  int in = -1;
  int out = -1;
  int err = -1;
  std::string out_text;
  std::string err_text;
};

struct StartOptions {
  bool stdin_pipe = false;      // RunningProcess::in; otherwise stdin is /dev/null
  bool no_core_dumps = false;   // RLIMIT_CORE 0, for children that are meant to crash
  bool ignore_sigterm = false;  // SIGTERM ignored across exec, as under nohup
};

// Starts argv as RunProcess does, without waiting for it.
RunningProcess StartProcess(const std::vector<std::string>& argv,
                            const std::map<std::string, std::string>& env, const std::string& cwd,
                            const StartOptions& options = {});

// Reads what the child has written, waiting at most `timeout_ms` (-1: until
// something comes). False once both its stdout and stderr are closed.
bool ReadAvailable(RunningProcess& child, int timeout_ms);

// Reads until the child has printed `text` on stdout; false when it has not
// within `timeout_ms` (or closed its output first).
bool WaitForOutput(RunningProcess& child, const std::string& text, int timeout_ms = 120000);

// Closes the child's stdin, reads everything it writes and reaps it. With
// `timeout_ms` >= 0 the child is killed (SIGKILL) when it has not closed its
// output by then, and `*timed_out` says so.
ProcessResult FinishProcess(RunningProcess& child, int timeout_ms = -1, bool* timed_out = nullptr);

// Sends SIGSTOP to `pid` and waits until the kernel has stopped it (state T
// in /proc/PID/stat: the signal takes effect asynchronously, and a process
// scanned meanwhile may still answer), for 60 s at most. False on failure.
bool StopProcess(pid_t pid);

class ScopedTempDir;

// tests/programs/live_steps (a training loop that steps when told) under
// gpuwatch, preloaded, serving its live state in `live_dir`, driven through
// its stdin; its report is DIR/NAME.json.
class LiveSteps {
 public:
  // `launcher`: a command line that starts live_steps (given as its next
  // argument); pid() is then the launcher's.
  LiveSteps(const ScopedTempDir& dir, const std::string& live_dir,
            const std::string& name = "steps", const std::map<std::string, std::string>& extra = {},
            const std::vector<std::string>& args = {},
            const std::vector<std::string>& launcher = {});
  ~LiveSteps();
  LiveSteps(const LiveSteps&) = delete;
  LiveSteps& operator=(const LiveSteps&) = delete;

  bool ready() const { return ready_; }  // it said "live_steps: ready"
  pid_t pid() const { return child_.pid; }
  const std::string& out() const { return child_.out_text; }
  const std::string& err() const { return child_.err_text; }
  int steps() const { return steps_; }
  // `n` more steps; true once the program says it made them.
  bool Step(int n);
  // A command; true once the program printed `answer`.
  bool Send(const std::string& command, const std::string& answer);
  // Closes its stdin and reaps it.
  ProcessResult Finish();
  // SIGKILL, and reaps it.
  void Kill();

 private:
  RunningProcess child_;
  bool ready_ = false;
  int steps_ = 0;
};

// Whether `steps` said it was ready and then made `n` more steps; what it
// printed on stderr when not.
::testing::AssertionResult ReadyAndStepped(LiveSteps& steps, int n);

// --- Environments -------------------------------------------------------------

// The simulator's libraries in place of CUDA's, nothing of gpuwatch.
std::map<std::string, std::string> SimEnv();

// SimEnv() with libgpuwatch.so preloaded, its report written to `output`,
// and `extra` on top.
std::map<std::string, std::string> PreloadEnv(const std::string& output,
                                              const std::map<std::string, std::string>& extra = {});

// --- Files, reports and sources -----------------------------------------------

std::string ReadFile(const std::string& path);

// Lines of `text` that start with `prefix`.
std::vector<std::string> LinesStartingWith(const std::string& text, const std::string& prefix);

// The first line of `text` that contains every one of `parts`, or "".
std::string LineWith(const std::string& text, const std::vector<std::string>& parts);

// The JSON document at `path`; a discarded value when it is missing or does
// not parse (tests then fail on the fields they expect). A report's sites get
// their frames from its frame table (InlineFrameTable), as the tools read it.
nlohmann::json ReadJson(const std::string& path);

// ReadJson(path) of a report that must exist: a failure when there is none.
nlohmann::json ReadReport(const std::string& path);

// Runs tests/programs/PROGRAM, which prints "PROGRAM: done", with `prefix`
// before it (`gpuwatch run`, whose `-o` this adds; none: `env` attaches
// gpuwatch, and GPUWATCH_OUTPUT is set), in a directory of its own; its
// report, and how it ran in `process`.
nlohmann::json RunProgramReport(const std::string& program, const std::vector<std::string>& prefix,
                                std::map<std::string, std::string> env, ProcessResult* process);

// How gpuwatch attaches to a program: `gpuwatch run`, LD_PRELOAD alone, or
// the driver's injection alone (CUDA_INJECTION64_PATH, and NVTX's
// NVTX_INJECTION64_PATH, both naming libgpuwatch.so).
enum class Attach { kRun, kPreload, kInjection };
// Its name in the tests' names: GpuwatchRun, Preload, Injection.
const char* AttachName(Attach how);
// gtest's name for a test of each mode (INSTANTIATE_TEST_SUITE_P's last argument).
inline std::string AttachTestName(const ::testing::TestParamInfo<Attach>& info) {
  return AttachName(info.param);
}

// Attaches gpuwatch to the command `argv` as `how` says, its report going to
// `report` ("": `gpuwatch run`'s default, or GPUWATCH_OUTPUT left unset).
void AttachTo(Attach how, const std::string& report, std::vector<std::string>* argv,
              std::map<std::string, std::string>* env);

// RunProgramReport of PROGRAM with gpuwatch attached by `how`, in SimEnv()
// with `extra` on top.
nlohmann::json RunAttached(const std::string& program, Attach how,
                           const std::map<std::string, std::string>& extra, ProcessResult* process);

// NVTX_INJECTION64_PATH naming tests/programs/nvtx_other_tool.so (another
// NVTX tool), which writes what it counted to DIR/other.txt.
std::map<std::string, std::string> OtherNvtxToolEnv(const ScopedTempDir& dir);

// Runs tests/programs/PROGRAM under `gpuwatch run -o DIR/NAME` in `dir`,
// in SimEnv() with `extra` on top: the report's path, and how it ran in
// *result.
std::string RunReportIn(const ScopedTempDir& dir, const std::string& program, ProcessResult* result,
                        const std::string& name = "report.json",
                        const std::map<std::string, std::string>& extra = {});

// `report` written as `name` in `dir`: its path.
std::string WriteReport(const ScopedTempDir& dir, const std::string& name,
                        const nlohmann::json& report);

// `gpuwatch report` of `report` written as DIR/bad.json: a failure unless it
// exits 2 saying exactly "gpuwatch report: DIR/bad.json: malformed gpuwatch
// report: " + `problem`.
void ExpectMalformed(const ScopedTempDir& dir, const nlohmann::json& report,
                     const std::string& problem);

// Runs tests/programs/PROGRAM with gpuwatch disabled (GPUWATCH_DISABLE=1)
// but named by NVTX_INJECTION64_PATH, chained to tests/programs/
// nvtx_other_tool.so: what that tool counted (its NVTX_OTHER_TOOL_OUT file).
// A failure when the program fails or gpuwatch says anything.
std::string ChainedToolAloneCounts(const std::string& program);

// The site of `section` (an object with "sites") whose location is
// `location`, or null.
nlohmann::json SiteAt(const nlohmann::json& section, const std::string& location);

// The 1-based number of the first line of the file `source` that contains
// `marker`; 0 when none does.
int LineOf(const std::string& source, const std::string& marker);

// "FILE:LINE" for the first line of tests/e2e/programs/FILE that contains
// `marker` (the location a report gives it); a failure when none does.
std::string ProgramLine(const std::string& file, const std::string& marker);

// A fresh empty directory under $TMPDIR; removed with its contents by
// ~ScopedTempDir.
class ScopedTempDir {
 public:
  ScopedTempDir();
  ~ScopedTempDir();
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  const std::string& path() const { return path_; }
  // Names of the entries in the directory, sorted.
  std::vector<std::string> List() const;

 private:
  std::string path_;
};

// Runs `argv` to its end in `dir` under PreloadEnv(dir/report.json, `extra`).
// It must exit 0 and leave a report, read (ReadReport) into *report; *result,
// when given, gets the run. Call it under ASSERT_NO_FATAL_FAILURE.
void RunPreloaded(const ScopedTempDir& dir, const std::vector<std::string>& argv,
                  nlohmann::json* report, ProcessResult* result = nullptr,
                  const std::map<std::string, std::string>& extra = {});

}  // namespace gpuwatch::testing

#endif  // GPUWATCH_TESTS_E2E_COMMON_H_
