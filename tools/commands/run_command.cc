#include "tools/commands/run_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "libgpuwatch/base/config.h"
#include "libgpuwatch/report/format.h"
#include "tools/reading/report_reader.h"

namespace gpuwatch::tools {

namespace {

bool IsFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

void SetEnv(const char* name, const std::string& value) {
  setenv(name, value.c_str(), 1);  // NOLINT(concurrency-mt-unsafe): single-threaded tool
}

// A fresh empty file for the child's reports to be listed in; "" on failure
// (then the library announces its reports itself).
std::string MakeRunLog() {
  const char* tmp = std::getenv("TMPDIR");  // NOLINT(concurrency-mt-unsafe)
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/gpuwatch-run.XXXXXX";
  const int fd = mkostemp(pattern.data(), O_CLOEXEC);
  if (fd < 0) return "";
  close(fd);
  return pattern;
}

// What the library wrote to the run log: per process, its reports in order
// and whether it used CUDA.
struct ProcessLog {
  bool cuda = false;
  bool final_report = false;  // an exit or signal report
  // It used CUDA and then exec'd before writing its exit report; the last
  // checkpoint of that image, unless the new one wrote to the same path.
  bool replaced_by_exec = false;
  std::string checkpoint_before_exec;
  std::string last_checkpoint;
  std::string off;  // why gpuwatch did not record it, when it did not
};

// "<N> B of device memory live in <M> allocations, most at FILE:LINE (FN)",
// from a report, or "" when it cannot be read.
std::string WhatItHeld(const std::string& path) {
  Report r;
  std::string error;
  if (!ReadReport(path, &r, &error)) return "";
  const ReportTotals& totals = r.model.totals;
  const uint64_t count = totals.device_live_count;
  std::string text = FormatBytes(totals.device_current_bytes) + " of device memory live in " +
                     std::to_string(count) + (count == 1 ? " allocation" : " allocations");
  const LeakSplit split = SplitLeaks(r.model.leaks_device, nullptr, false);
  if (!split.leaked.empty()) text += ", most at " + Describe(*split.leaked.front());
  const uint64_t elapsed = r.model.process.elapsed_ns;
  char when[64];
  std::snprintf(when, sizeof(when), " (%.1f s after gpuwatch attached)",
                static_cast<double>(elapsed) / 1e9);
  return text + when;
}

// How the process ended, for a person: "exited with status 127", "was
// killed by signal 9 (Killed)".
std::string Ending(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = sigdescr_np(WTERMSIG(status));
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           (name != nullptr ? name : "?") + ")";
  }
  return "ended";
}

// A process that used CUDA ended without its exit report: says what
// happened and what is known of it (its last checkpoint).
void ExplainMissingReport(const std::string& command, long pid, long child, int status,
                          const ProcessLog& p) {
  const std::string who =
      pid == child ? command : command + " (process " + std::to_string(pid) + ")";
  if (p.replaced_by_exec) {
    std::fprintf(stderr,
                 "gpuwatch: %s used CUDA, then ran another program in its place (exec) before "
                 "gpuwatch could write its exit report (a report cannot outlive the program "
                 "image that records it)\n",
                 who.c_str());
    // The new image writes to the same path: its reports are not this one's.
    const bool overwritten = p.final_report || !p.last_checkpoint.empty();
    const std::string held =
        p.checkpoint_before_exec.empty() || overwritten ? "" : WhatItHeld(p.checkpoint_before_exec);
    if (!held.empty()) {
      std::fprintf(stderr, "gpuwatch: what is known is its last checkpoint, %s: %s\n",
                   p.checkpoint_before_exec.c_str(), held.c_str());
    }
    if (!p.cuda || p.final_report) return;  // the new image needs no word of its own
  }
  std::string why;
  if (pid == child && WIFEXITED(status) &&
      (WEXITSTATUS(status) == 127 || WEXITSTATUS(status) == 126)) {
    why =
        ": exit handlers did not run (the dynamic loader ends a program with status 127 when it "
        "cannot resolve a symbol it binds lazily, a shell with 126 or 127 when it cannot run a "
        "command)";
  } else if (pid == child && WIFEXITED(status)) {
    why =
        ": it ended without running exit handlers (_exit, os._exit, or a fatal error of the "
        "dynamic loader)";
  }
  std::fprintf(stderr,
               "gpuwatch: %s used CUDA and %s before gpuwatch could write its exit report%s\n",
               who.c_str(), pid == child ? Ending(status).c_str() : "ended", why.c_str());
  const std::string held = p.last_checkpoint.empty() ? "" : WhatItHeld(p.last_checkpoint);
  if (!held.empty()) {
    std::fprintf(stderr, "gpuwatch: what is known is its last checkpoint, %s: %s\n",
                 p.last_checkpoint.c_str(), held.c_str());
  } else {
    std::fprintf(
        stderr,
        "gpuwatch: no checkpoint of it had been written yet, so nothing of its memory is "
        "known (checkpoints come every GPUWATCH_CHECKPOINT_SECONDS, 5 s by default, and at "
        "new device peaks)\n");
  }
}

// Prints where the reports listed in `log` went, then removes it. Reports of
// an out-of-memory failure were announced when they were written. A process
// that used CUDA but left no exit or signal report is explained, and so is
// one gpuwatch did not record. Returns whether any process went unrecorded.
bool AnnounceReports(const std::string& log, const std::string& command, long child, int status,
                     bool exec_failed) {
  std::ifstream in(log);
  std::string line;
  int reports = 0;
  std::map<long, ProcessLog> processes;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    const std::string trigger = line.substr(0, tab);
    const size_t tab2 = line.find('\t', tab + 1);
    const std::string path =
        line.substr(tab + 1, tab2 == std::string::npos ? std::string::npos : tab2 - tab - 1);
    const long pid = tab2 == std::string::npos ? child : std::atol(line.c_str() + tab2 + 1);
    ProcessLog& p = processes[pid];
    if (trigger == "off") {
      p.off = path;  // the reason
      continue;
    }
    if (trigger == "cuda") {
      p.cuda = true;
      continue;
    }
    if (trigger == "start") {
      // A new image in this process: after an exec, the one before it is gone.
      if (p.cuda && !p.final_report) {
        p.replaced_by_exec = true;
        p.checkpoint_before_exec = p.last_checkpoint;
      }
      p.cuda = false;
      p.final_report = false;
      p.last_checkpoint.clear();
      continue;
    }
    if (trigger == "checkpoint") {
      p.last_checkpoint = path;
      continue;
    }
    ++reports;
    if (trigger == "exit" || trigger == "signal") p.final_report = true;
    if (trigger == "exit") {
      std::fprintf(stderr, "gpuwatch: report written to %s\n", path.c_str());
    } else if (trigger != "oom") {
      std::fprintf(stderr, "gpuwatch: %s report written to %s\n",
                   trigger == "context_destroy" ? "context" : trigger.c_str(), path.c_str());
    }
  }
  unlink(log.c_str());
  bool any_cuda = false;
  bool any_off = false;
  for (const auto& [pid, p] : processes) {
    any_cuda = any_cuda || p.cuda;
    if (!p.off.empty()) {
      any_off = true;
      const std::string who =
          pid == child ? command : command + " (process " + std::to_string(pid) + ")";
      std::fprintf(stderr, "gpuwatch: nothing was recorded in %s: %s\n", who.c_str(),
                   p.off.c_str());
      continue;
    }
    if (p.replaced_by_exec || (p.cuda && !p.final_report)) {
      ExplainMissingReport(command, pid, child, status, p);
    }
  }
  if (reports == 0 && !any_cuda && !any_off && !exec_failed && WIFEXITED(status)) {
    std::fprintf(stderr,
                 "gpuwatch: no report was written (the command did not use CUDA, or gpuwatch "
                 "could not attach)\n");
  }
  return any_off;
}

}  // namespace

std::string FindLibrary(const std::string& self_exe) {
  if (const char* env = std::getenv("GPUWATCH_LIBRARY");
      env != nullptr && *env != '\0') {  // NOLINT
    return IsFile(env) ? env : "";
  }
  const std::string dir = DirOf(self_exe);
  for (const std::string& candidate : {dir + "/../lib/libgpuwatch.so", dir + "/libgpuwatch.so"}) {
    if (IsFile(candidate)) {
      char resolved[PATH_MAX];
      return realpath(candidate.c_str(), resolved) != nullptr ? resolved : candidate;
    }
  }
  return "";
}

// The gpuwatch Python package's folder, <self>/../share/gpuwatch/python (in
// the build tree as in an installed prefix), or "" when it is not there.
std::string FindPythonPackage(const std::string& self_exe) {
  const std::string dir = DirOf(self_exe) + "/../share/gpuwatch/python";
  if (!IsFile(dir + "/gpuwatch/__init__.py")) return "";
  char resolved[PATH_MAX];
  return realpath(dir.c_str(), resolved) != nullptr ? resolved : dir;
}

// Adds `module` to PYTEST_PLUGINS (a comma-separated list) unless it is there.
void AddPytestPlugin(const std::string& module) {
  const char* old = std::getenv("PYTEST_PLUGINS");  // NOLINT(concurrency-mt-unsafe)
  const std::string list = old != nullptr ? old : "";
  std::istringstream in(list);
  for (std::string entry; std::getline(in, entry, ',');) {
    const size_t first = entry.find_first_not_of(' ');
    const size_t last = entry.find_last_not_of(' ');
    if (first != std::string::npos && entry.substr(first, last - first + 1) == module) return;
  }
  SetEnv("PYTEST_PLUGINS", list.empty() ? module : list + "," + module);
}

int RunCommand(const RunOptions& options, const std::string& self_exe) {
  if (options.command.empty()) {
    std::fprintf(
        stderr,
        "gpuwatch run: no command given (usage: gpuwatch run [options] -- COMMAND [ARGS...])\n");
    return 2;
  }
  const std::string library = options.library.empty() ? FindLibrary(self_exe) : options.library;
  if (library.empty() || !IsFile(library)) {
    std::fprintf(stderr,
                 "gpuwatch run: cannot find libgpuwatch.so (looked next to %s; set "
                 "GPUWATCH_LIBRARY or pass --library)\n",
                 self_exe.c_str());
    return 2;
  }

  // The child gets the library through both entry points: the preload
  // constructor attaches when CUDA is linked in, the driver's injection hook
  // when CUDA is loaded later or linked statically.
  const char* old_preload = std::getenv("LD_PRELOAD");  // NOLINT
  SetEnv("LD_PRELOAD",
         old_preload != nullptr && *old_preload != '\0' ? library + ":" + old_preload : library);
  if (std::getenv("CUDA_INJECTION64_PATH") == nullptr)
    SetEnv("CUDA_INJECTION64_PATH", library);  // NOLINT
  // NVTX ranges as phases: NVTX loads its tool from this variable only.
  // Another tool's (Nsight Systems sets it) is chained: gpuwatch calls it
  // (interpose/nvtx/nvtx.h); one that cannot be read is left as it is, and so is
  // the variable with GPUWATCH_NVTX=0.
  const char* nvtx = std::getenv("NVTX_INJECTION64_PATH");              // NOLINT
  const bool nvtx_on = !NvtxSwitchedOff(std::getenv("GPUWATCH_NVTX"));  // NOLINT
  if (nvtx_on && (nvtx == nullptr || *nvtx == '\0')) {
    SetEnv("NVTX_INJECTION64_PATH", library);
  } else if (nvtx_on && nvtx != library && access(nvtx, R_OK) == 0) {
    SetEnv("GPUWATCH_NVTX_CHAIN", nvtx);
    SetEnv("NVTX_INJECTION64_PATH", library);
  }
  // `import gpuwatch` works in a Python child with no install step.
  const std::string package = FindPythonPackage(self_exe);
  if (options.torch_blocks && package.empty()) {
    std::fprintf(stderr,
                 "gpuwatch run: --torch-blocks needs gpuwatch's Python package (looked in "
                 "../share/gpuwatch/python next to %s)\n",
                 self_exe.c_str());
    return 2;
  }
  if (!package.empty()) {
    const char* old_path = std::getenv("PYTHONPATH");  // NOLINT
    std::string path = package;
    // First, so that its sitecustomize runs (and chains to any other): it
    // hooks PyTorch (python/gpuwatch/torch_hooks.py), with its blocks under
    // --torch-blocks.
    path = package + "/gpuwatch/torch_shim:" + path;
    SetEnv("PYTHONPATH", old_path != nullptr && *old_path != '\0' ? path + ":" + old_path : path);
    if (options.torch_blocks) SetEnv("GPUWATCH_TORCH_BLOCKS", "1");
    // pytest finds the plugin (--gpuwatch, --gpuwatch-max-leak) with no -p.
    AddPytestPlugin("gpuwatch.pytest_plugin");
  }
  if (!options.output.empty()) SetEnv("GPUWATCH_OUTPUT", options.output);
  if (options.depth >= 0) SetEnv("GPUWATCH_DEPTH", std::to_string(options.depth));
  if (options.no_summary) SetEnv("GPUWATCH_SUMMARY", "0");
  if (!options.suppressions.empty()) {
    char resolved[PATH_MAX];
    if (!IsFile(options.suppressions) ||
        realpath(options.suppressions.c_str(), resolved) == nullptr) {
      std::fprintf(stderr, "gpuwatch run: cannot read suppressions file %s\n",
                   options.suppressions.c_str());
      return 2;
    }
    SetEnv("GPUWATCH_SUPPRESSIONS", resolved);
  }
  if (!options.alloc_fns.empty()) {
    const char* old_fns = std::getenv("GPUWATCH_ALLOC_FN");  // NOLINT
    std::string fns = old_fns != nullptr ? old_fns : "";
    for (const std::string& fn : options.alloc_fns) fns += (fns.empty() ? "" : ",") + fn;
    SetEnv("GPUWATCH_ALLOC_FN", fns);
  }
  if (options.exitcode >= 0) SetEnv("GPUWATCH_EXITCODE", std::to_string(options.exitcode));
  if (options.sample_ms >= 0) SetEnv("GPUWATCH_SAMPLE_MS", std::to_string(options.sample_ms));
  const std::string run_log = MakeRunLog();
  if (!run_log.empty()) SetEnv("GPUWATCH_RUN_LOG", run_log);

  std::vector<char*> argv;
  argv.reserve(options.command.size() + 1);
  for (const std::string& arg : options.command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);

  // Like system(): while the child runs, terminal signals go to it alone.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old_int {};
  struct sigaction old_quit {};
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);

  // Tells whether the command started: the child writes errno into it when
  // exec fails; a successful exec closes it (O_CLOEXEC) with nothing written.
  int exec_pipe[2] = {-1, -1};
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) exec_pipe[0] = exec_pipe[1] = -1;
  const pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "gpuwatch run: fork failed: %s\n", std::strerror(errno));
    if (!run_log.empty()) unlink(run_log.c_str());
    return 127;
  }
  if (pid == 0) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
    execvp(argv[0], argv.data());
    const int error = errno;
    std::fprintf(stderr, "gpuwatch run: cannot run %s: %s\n", argv[0], std::strerror(error));
    if (exec_pipe[1] >= 0) (void)!write(exec_pipe[1], &error, sizeof(error));
    _exit(error == ENOENT ? 127 : 126);
  }
  bool exec_failed = false;
  if (exec_pipe[1] >= 0) {
    close(exec_pipe[1]);
    int error = 0;
    ssize_t n = 0;
    while ((n = read(exec_pipe[0], &error, sizeof(error))) < 0 && errno == EINTR) {
    }
    exec_failed = n > 0;
    close(exec_pipe[0]);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      std::fprintf(stderr, "gpuwatch run: waitpid failed: %s\n", std::strerror(errno));
      if (!run_log.empty()) unlink(run_log.c_str());
      return 127;
    }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  const bool unrecorded =
      !run_log.empty() && AnnounceReports(run_log, argv[0], pid, status, exec_failed);
  // --exitcode is a gate: a run gpuwatch did not record passes none.
  if (unrecorded && options.exitcode > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    std::fprintf(stderr, "gpuwatch run: exit status 0 changed to %d: not recorded (--exitcode)\n",
                 options.exitcode);
    return options.exitcode;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigdescr_np(sig);
    std::fprintf(stderr, "gpuwatch run: %s terminated by signal %d (%s)%s\n", argv[0], sig,
                 name != nullptr ? name : "?", WCOREDUMP(status) ? " (core dumped)" : "");
    return 128 + sig;
  }
  return 127;
}

}  // namespace gpuwatch::tools
