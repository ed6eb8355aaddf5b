#include "tools/run_command.h"

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
#include <string>
#include <vector>

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

// Prints where the reports listed in `log` went, then removes it. Reports of
// an out-of-memory failure were announced when they were written.
void AnnounceReports(const std::string& log, bool exited_normally) {
  std::ifstream in(log);
  std::string line;
  int reports = 0;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    const std::string trigger = line.substr(0, tab);
    const std::string path = line.substr(tab + 1);
    ++reports;
    if (trigger == "exit") {
      std::fprintf(stderr, "gpuwatch: report written to %s\n", path.c_str());
    } else if (trigger != "oom") {
      std::fprintf(stderr, "gpuwatch: %s report written to %s\n",
                   trigger == "context_destroy" ? "context" : trigger.c_str(), path.c_str());
    }
  }
  unlink(log.c_str());
  if (reports == 0 && exited_normally) {
    std::fprintf(stderr,
                 "gpuwatch: no report was written (the command did not use CUDA, or gpuwatch "
                 "could not attach)\n");
  }
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
    std::fprintf(stderr, "gpuwatch run: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
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
  const bool exec_failed =
      WIFEXITED(status) && (WEXITSTATUS(status) == 126 || WEXITSTATUS(status) == 127);
  if (!run_log.empty()) AnnounceReports(run_log, WIFEXITED(status) && !exec_failed);
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
