// Runs a program with a given environment and collects its output: the
// harness for end-to-end tests that run programs under gpuwatch.
#ifndef GPUWATCH_TESTS_E2E_SUBPROCESS_H_
#define GPUWATCH_TESTS_E2E_SUBPROCESS_H_

#include <map>
#include <string>
#include <vector>

namespace gpuwatch::testing {

struct ProcessResult {
  int exit_code = -1;  // valid when !signaled
  bool signaled = false;
  int signal = 0;
  std::string out;
  std::string err;
};

// Runs argv[0] (searched in PATH) in `cwd` with the current environment,
// minus every GPUWATCH_*, GWSIM_*, LD_PRELOAD and CUDA_INJECTION64_PATH
// variable, plus the simulator's model that ctest gives in
// GPUWATCH_TEST_SIM_ENV, plus `env` (an empty value unsets). Blocks until it
// exits.
// The environment RunProcess gives a child, as NAME=VALUE strings.
std::vector<std::string> ChildEnvironment(const std::map<std::string, std::string>& env);

ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env, const std::string& cwd);

// Lines of `text` that start with `prefix`.
std::vector<std::string> LinesStartingWith(const std::string& text, const std::string& prefix);

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

std::string ReadFile(const std::string& path);

}  // namespace gpuwatch::testing

#endif  // GPUWATCH_TESTS_E2E_SUBPROCESS_H_
