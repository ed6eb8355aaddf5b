// pytest in e2e tests (gates_test.cc, torch_pytest_test.cc): the environment it runs in, and
// reading its terminal output (its failure sections, its summaries and its last line).
#ifndef GPUWATCH_TESTS_E2E_PYTEST_OUTPUT_H_
#define GPUWATCH_TESTS_E2E_PYTEST_OUTPUT_H_

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tests/e2e/common.h"

namespace gpuwatch::testing {

// The environment pytest runs in: the simulator, a wide terminal and CI's
// untruncated summary lines, no bytecode files, nothing of the caller's
// PYTHONPATH, PYTEST_PLUGINS or PYTEST_ADDOPTS.
inline std::map<std::string, std::string> PytestEnv() {
  std::map<std::string, std::string> env = SimEnv();
  env["COLUMNS"] = "200";
  env["CI"] = "1";
  env["PYTHONDONTWRITEBYTECODE"] = "1";
  env["PYTHONPATH"] = "";
  env["PYTEST_PLUGINS"] = "";
  env["PYTEST_ADDOPTS"] = "";
  return env;
}

// The lines of `text` after the first line that contains `from`, up to the
// first line after it that starts with `to`; "" when `from` is missing.
inline std::string Between(const std::string& text, const std::string& from,
                           const std::string& to) {
  const size_t at = text.find(from);
  if (at == std::string::npos) return "";
  const size_t start = text.find('\n', at);
  if (start == std::string::npos) return "";
  const size_t end = text.find("\n" + to, start);
  return text.substr(start + 1, end == std::string::npos ? std::string::npos : end - start);
}

// The text of pytest's failure section `title` (after its "___ title ___"
// line, up to the next section or summary).
inline std::string Section(const std::string& text, const std::string& title) {
  const size_t at = text.find("_ " + title + " _");
  if (at == std::string::npos) return "";
  const size_t start = text.find('\n', at) + 1;
  size_t end = start;
  while (end < text.size() && text[end] != '_' && text[end] != '=') end = text.find('\n', end) + 1;
  return text.substr(start, end - start);
}

// Whether `text` contains `part`; when not, says so with the whole text.
inline ::testing::AssertionResult Has(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "no\n  " << part << "\nin\n" << text;
}

// pytest's last line without its rule and time: "5 failed, 9 passed".
inline std::string Outcome(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '=' || t.back() == ' ')) t.pop_back();
  t = t.substr(t.rfind('\n') + 1);
  t = t.substr(t.find_first_not_of("= "));
  return t.substr(0, t.rfind(" in "));
}

}  // namespace gpuwatch::testing

#endif  // GPUWATCH_TESTS_E2E_PYTEST_OUTPUT_H_
