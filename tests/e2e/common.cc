#include "tests/e2e/common.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "tools/reading/report_reader.h"

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

RunningProcess StartProcess(const std::vector<std::string>& argv,
                            const std::map<std::string, std::string>& env, const std::string& cwd,
                            const StartOptions& options) {
  std::vector<std::string> env_strings = ChildEnvironment(env);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (auto& s : args) argp.push_back(s.data());
  argp.push_back(nullptr);

  int in_pipe[2] = {-1, -1};
  int out_pipe[2];
  int err_pipe[2];
  if ((options.stdin_pipe && pipe2(in_pipe, O_CLOEXEC) != 0) || pipe2(out_pipe, O_CLOEXEC) != 0 ||
      pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
  }
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    if (options.stdin_pipe) {
      dup2(in_pipe[0], STDIN_FILENO);
    } else if (const int devnull = open("/dev/null", O_RDONLY); devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
    }
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    if (options.no_core_dumps) {
      const rlimit no_core{0, 0};
      setrlimit(RLIMIT_CORE, &no_core);
    }
    if (options.ignore_sigterm) signal(SIGTERM, SIG_IGN);  // inherited through exec
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(125);
    execvpe(argp[0], argp.data(), envp.data());
    const char msg[] = "exec failed\n";
    (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
    _exit(127);
  }
  if (options.stdin_pipe) close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  RunningProcess child;
  child.pid = pid;
  child.in = in_pipe[1];
  child.out = out_pipe[0];
  child.err = err_pipe[0];
  return child;
}

bool WaitForOutput(RunningProcess& child, const std::string& text, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (child.out_text.find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() >= deadline || !ReadAvailable(child, 100)) return false;
  }
  return true;
}

bool ReadAvailable(RunningProcess& child, int timeout_ms) {
  if (child.out < 0 && child.err < 0) return false;
  pollfd fds[2] = {{child.out, POLLIN, 0}, {child.err, POLLIN, 0}};
  const int ready = poll(fds, 2, timeout_ms);
  if (ready < 0 && errno != EINTR) return false;
  if (ready <= 0) return true;  // nothing yet
  int* ends[2] = {&child.out, &child.err};
  std::string* sinks[2] = {&child.out_text, &child.err_text};
  for (int i = 0; i < 2; ++i) {
    if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    char buf[65536];
    const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
    if (n > 0) {
      sinks[i]->append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      close(*ends[i]);
      *ends[i] = -1;
    }
  }
  return child.out >= 0 || child.err >= 0;
}

bool StopProcess(pid_t pid) {
  if (kill(pid, SIGSTOP) != 0) return false;
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path);
    const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t paren = stat.rfind(')');  // the command may hold spaces and parentheses
    if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
    if (stat[paren + 2] == 'T') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

ProcessResult FinishProcess(RunningProcess& child, int timeout_ms, bool* timed_out) {
  if (child.in >= 0) close(child.in);
  child.in = -1;
  if (timed_out != nullptr) *timed_out = false;
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  const auto elapsed_ms = [&start] {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
  };
  while (ReadAvailable(child, timeout_ms < 0 ? -1 : 100)) {
    if (timeout_ms >= 0 && elapsed_ms() >= timeout_ms) {
      if (timed_out != nullptr) *timed_out = true;
      kill(child.pid, SIGKILL);
      break;
    }
  }
  for (int* end : {&child.out, &child.err}) {
    if (*end >= 0) close(*end);
    *end = -1;
  }
  ProcessResult result;
  int status = 0;
  while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    result.signaled = true;
    result.signal = WTERMSIG(status);
  }
  result.out = child.out_text;
  result.err = child.err_text;
  return result;
}

ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env, const std::string& cwd) {
  RunningProcess child = StartProcess(argv, env, cwd);
  return FinishProcess(child);
}

bool IsTorchExitRace(const ProcessResult& r) {
  const bool aborted = (r.signaled && r.signal == SIGABRT) || r.exit_code == 128 + SIGABRT;
  return aborted && r.err.find("terminate called without an active exception") != std::string::npos;
}

ProcessResult RunTorchProcess(const std::vector<std::string>& argv,
                              const std::map<std::string, std::string>& env,
                              const std::string& cwd) {
  ProcessResult r = RunProcess(argv, env, cwd);
  if (!IsTorchExitRace(r)) return r;
  std::fprintf(stderr,
               "PyTorch's exit race aborted the run (tests/e2e/common.h, IsTorchExitRace); "
               "running it once more\n");
  return RunProcess(argv, env, cwd);
}

std::map<std::string, std::string> SimEnv() { return {{"LD_LIBRARY_PATH", kSimDir}}; }

std::map<std::string, std::string> PreloadEnv(const std::string& output,
                                              const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env = SimEnv();
  env["LD_PRELOAD"] = kLib;
  env["GPUWATCH_OUTPUT"] = output;
  for (const auto& [k, v] : extra) env[k] = v;
  return env;
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

std::string LineWith(const std::string& text, const std::vector<std::string>& parts) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    bool all = true;
    for (const std::string& p : parts) all = all && line.find(p) != std::string::npos;
    if (all) return line;
    start = end + 1;
  }
  return "";
}

namespace {

nlohmann::json ParseReport(const std::string& text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  InlineFrameTable(&doc);
  return doc;
}

}  // namespace

nlohmann::json ReadJson(const std::string& path) { return ParseReport(ReadFile(path)); }

nlohmann::json ReadReport(const std::string& path) {
  const std::string text = ReadFile(path);
  EXPECT_FALSE(text.empty()) << "no report at " << path;
  return ParseReport(text);
}

void RunPreloaded(const ScopedTempDir& dir, const std::vector<std::string>& argv,
                  nlohmann::json* report, ProcessResult* result,
                  const std::map<std::string, std::string>& extra) {
  const std::string out = dir.path() + "/report.json";
  const ProcessResult r = RunProcess(argv, PreloadEnv(out, extra), dir.path());
  if (result != nullptr) *result = r;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  *report = ReadReport(out);
  ASSERT_TRUE(report->is_object()) << r.err;
}

nlohmann::json RunProgramReport(const std::string& program, const std::vector<std::string>& prefix,
                                std::map<std::string, std::string> env, ProcessResult* process) {
  ScopedTempDir dir;
  const std::string out = dir.path() + "/report.json";
  std::vector<std::string> argv = prefix;
  if (!prefix.empty()) argv.insert(argv.end(), {"-o", out, "--"});
  argv.push_back(kPrograms + "/" + program);
  if (prefix.empty()) env["GPUWATCH_OUTPUT"] = out;
  *process = RunProcess(argv, env, dir.path());
  EXPECT_EQ(process->exit_code, 0) << process->err;
  EXPECT_EQ(process->out, program + ": done\n");
  return ReadReport(out);
}

const char* AttachName(Attach how) {
  constexpr const char* kNames[] = {"GpuwatchRun", "Preload", "Injection"};
  return kNames[static_cast<int>(how)];
}

void AttachTo(Attach how, const std::string& report, std::vector<std::string>* argv,
              std::map<std::string, std::string>* env) {
  switch (how) {
    case Attach::kRun: {
      std::vector<std::string> run = {kCli, "run"};
      if (!report.empty()) run.insert(run.end(), {"-o", report, "--"});
      argv->insert(argv->begin(), run.begin(), run.end());
      return;
    }
    case Attach::kPreload:
      (*env)["LD_PRELOAD"] = kLib;
      break;
    case Attach::kInjection:
      (*env)["CUDA_INJECTION64_PATH"] = kLib;
      (*env)["NVTX_INJECTION64_PATH"] = kLib;
      break;
  }
  if (!report.empty()) (*env)["GPUWATCH_OUTPUT"] = report;
}

nlohmann::json RunAttached(const std::string& program, Attach how,
                           const std::map<std::string, std::string>& extra,
                           ProcessResult* process) {
  std::map<std::string, std::string> env = SimEnv();
  std::vector<std::string> prefix;
  AttachTo(how, "", &prefix, &env);
  for (const auto& [k, v] : extra) env[k] = v;
  return RunProgramReport(program, prefix, std::move(env), process);
}

std::map<std::string, std::string> OtherNvtxToolEnv(const ScopedTempDir& dir) {
  return {{"NVTX_INJECTION64_PATH", kPrograms + "/nvtx_other_tool.so"},
          {"NVTX_OTHER_TOOL_OUT", dir.path() + "/other.txt"}};
}

std::string RunReportIn(const ScopedTempDir& dir, const std::string& program, ProcessResult* result,
                        const std::string& name, const std::map<std::string, std::string>& extra) {
  std::string out = dir.path() + "/" + name;
  std::map<std::string, std::string> env = SimEnv();
  for (const auto& [k, v] : extra) env[k] = v;
  *result = RunProcess({kCli, "run", "-o", out, "--", kPrograms + "/" + program}, env, dir.path());
  return out;
}

std::string WriteReport(const ScopedTempDir& dir, const std::string& name,
                        const nlohmann::json& report) {
  std::string path = dir.path() + "/" + name;
  std::ofstream(path) << report.dump();
  return path;
}

void ExpectMalformed(const ScopedTempDir& dir, const nlohmann::json& report,
                     const std::string& problem) {
  const std::string bad = WriteReport(dir, "bad.json", report);
  const ProcessResult text = RunProcess({kCli, "report", bad}, {}, dir.path());
  EXPECT_EQ(text.exit_code, 2);
  EXPECT_EQ(text.err, "gpuwatch report: " + bad + ": malformed gpuwatch report: " + problem + "\n");
}

std::string ChainedToolAloneCounts(const std::string& program) {
  ScopedTempDir dir;
  std::map<std::string, std::string> env = SimEnv();
  env["NVTX_INJECTION64_PATH"] = kLib;
  env["GPUWATCH_NVTX_CHAIN"] = kPrograms + "/nvtx_other_tool.so";
  env["GPUWATCH_DISABLE"] = "1";
  env["NVTX_OTHER_TOOL_OUT"] = dir.path() + "/other.txt";
  const ProcessResult r = RunProcess({kPrograms + "/" + program}, env, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return ReadFile(dir.path() + "/other.txt");
}

nlohmann::json SiteAt(const nlohmann::json& section, const std::string& location) {
  for (const nlohmann::json& site : section["sites"]) {
    if (site["location"] == location) return site;
  }
  return nullptr;
}

int LineOf(const std::string& source, const std::string& marker) {
  std::ifstream in(source);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find(marker) != std::string::npos) return n;
  }
  return 0;
}

std::string ProgramLine(const std::string& file, const std::string& marker) {
  const int line = LineOf(kSourceDir + "/tests/e2e/programs/" + file, marker);
  EXPECT_GT(line, 0) << marker << " not found in " << file;
  return file + ":" + std::to_string(line);
}

LiveSteps::LiveSteps(const ScopedTempDir& dir, const std::string& live_dir, const std::string& name,
                     const std::map<std::string, std::string>& extra,
                     const std::vector<std::string>& args,
                     const std::vector<std::string>& launcher) {
  std::map<std::string, std::string> env =
      PreloadEnv(dir.path() + "/" + name + ".json", {{"GPUWATCH_LIVE_DIR", live_dir}});
  for (const auto& [k, v] : extra) env[k] = v;
  std::vector<std::string> argv = launcher;
  argv.push_back(kPrograms + "/live_steps");
  argv.insert(argv.end(), args.begin(), args.end());
  child_ = StartProcess(argv, env, dir.path(), {.stdin_pipe = true, .no_core_dumps = true});
  ready_ = WaitForOutput(child_, "live_steps: ready\n");
}

LiveSteps::~LiveSteps() {
  if (child_.pid > 0) FinishProcess(child_, 60000);
}

bool LiveSteps::Step(int n) {
  steps_ += n;
  return Send("step " + std::to_string(n), "live_steps: steps " + std::to_string(steps_) + "\n");
}

::testing::AssertionResult ReadyAndStepped(LiveSteps& steps, int n) {
  if (!steps.ready()) return ::testing::AssertionFailure() << "not ready: " << steps.err();
  if (!steps.Step(n)) {
    return ::testing::AssertionFailure() << "did not make " << n << " steps: " << steps.err();
  }
  return ::testing::AssertionSuccess();
}

bool LiveSteps::Send(const std::string& command, const std::string& answer) {
  const std::string line = command + "\n";
  if (write(child_.in, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return false;
  return WaitForOutput(child_, answer);
}

ProcessResult LiveSteps::Finish() {
  ProcessResult r = FinishProcess(child_, 60000);
  child_.pid = -1;
  return r;
}

void LiveSteps::Kill() {
  kill(child_.pid, SIGKILL);
  FinishProcess(child_, 60000);
  child_.pid = -1;
}

}  // namespace gpuwatch::testing
