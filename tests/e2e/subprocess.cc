#include "tests/e2e/subprocess.h"

#include "tests/e2e/common.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace gpuwatch::testing {

namespace {

bool Scrubbed(const std::string& name) {
  return name.rfind("GPUWATCH_", 0) == 0 || name.rfind("GWSIM_", 0) == 0 || name == "LD_PRELOAD" ||
         name == "CUDA_INJECTION64_PATH";
}

// GPUWATCH_TEST_SIM_ENV="NAME=VALUE,NAME=VALUE": the simulator's model of the
// driver, which ctest sets to run the whole e2e suite both ways
// (tests/CMakeLists.txt, gpuwatch_e2e_test). Every child gets it; a test may
// still set a variable itself.
void AddSimulatorModel(std::map<std::string, std::string>* env) {
  const char* model = std::getenv("GPUWATCH_TEST_SIM_ENV");  // NOLINT(concurrency-mt-unsafe)
  if (model == nullptr) return;
  std::stringstream in(model);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t eq = item.find('=');
    if (eq != std::string::npos) env->emplace(item.substr(0, eq), item.substr(eq + 1));
  }
}

}  // namespace

std::vector<std::string> ChildEnvironment(const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    std::string name(*e, eq - *e);
    if (!Scrubbed(name)) merged[name] = eq + 1;
  }
  AddSimulatorModel(&merged);
  for (const auto& [k, v] : env) {
    if (v.empty()) {
      merged.erase(k);
    } else {
      merged[k] = v;
    }
  }
#ifdef GPUWATCH_TEST_SANITIZER_RUNTIME
  // Sanitizer builds: the runtime must come first in the library list, ahead
  // of a preloaded (instrumented) libgpuwatch.so. Children such as `gpuwatch
  // run`'s own child cannot be arranged so; the order check is relaxed for them.
  if (auto it = merged.find("LD_PRELOAD"); it != merged.end()) {
    it->second = std::string(GPUWATCH_TEST_SANITIZER_RUNTIME) + ":" + it->second;
  }
  merged["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0";
  merged["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1";
  // die_after_fork=0: gpuwatch starts its thread again in a forked child
  // (Fork.* tests), which TSan otherwise refuses after a multi-threaded fork;
  // gpuwatch's atfork handlers are what make that safe. detect_deadlocks=0:
  // TSan's lock-order detector aborts (a CHECK) when a thread holds more than
  // 64 mutexes, and the prepare handler takes every lock of every table.
  merged["TSAN_OPTIONS"] =
      "halt_on_error=1:report_signal_unsafe=0:die_after_fork=0:detect_deadlocks=0";
#endif
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : merged) env_strings.push_back(k + "=" + v);
  return env_strings;
}

ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env, const std::string& cwd) {
  std::vector<std::string> env_strings = ChildEnvironment(env);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (auto& s : args) argp.push_back(s.data());
  argp.push_back(nullptr);

  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe failed");
  }
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(125);
    execvpe(argp[0], argp.data(), envp.data());
    const char msg[] = "exec failed\n";
    (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  ProcessResult result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[65536];
      const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    result.signaled = true;
    result.signal = WTERMSIG(status);
  }
  return result;
}

std::vector<std::string> LinesStartingWith(const std::string& text, const std::string& prefix) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) lines.push_back(line);
  }
  return lines;
}

ScopedTempDir::ScopedTempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/gpuwatch-test-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

ScopedTempDir::~ScopedTempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<std::string> ScopedTempDir::List() const {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(path_)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int LineOf(const std::string& source, const std::string& marker) {
  std::ifstream in(source);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find(marker) != std::string::npos) return n;
  }
  return 0;
}

}  // namespace gpuwatch::testing
