// libFuzzer target for the report reader and the subcommands that consume a
// parsed report: the input is written to a file (the commands take paths)
// and read by ReadReport, then rendered by `report` (every --format),
// gated by `check` (with itself as baseline), compared by `diff` and merged
// by `merge`, whose output must read back as a valid report. Output goes to
// /dev/null. Built by -DGPUWATCH_BUILD_FUZZERS=ON with clang; run by
// scripts/fuzz.sh.
//
// An exception escaping a command is a finding too: `gpuwatch` would turn it
// into exit 2 with a bare json message instead of one naming the file and
// the problem, so it is left to reach libFuzzer (which reports it as a crash).
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tools/commands.h"
#include "tools/reading/report_reader.h"

namespace {

struct Files {
  std::string dir;
  std::string input;
  std::string merged;
  FILE* null = nullptr;
};

const Files& GetFiles() {
  static const Files* files = [] {
    auto* f = new Files();
    const char* tmp = std::getenv("TMPDIR");  // NOLINT(concurrency-mt-unsafe): one thread
    std::string pattern = std::string(tmp != nullptr ? tmp : "/tmp") + "/gw-fuzz-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    f->dir = pattern;
    f->input = f->dir + "/input.json";
    f->merged = f->dir + "/merged.json";
    f->null = std::fopen("/dev/null", "w");
    if (f->null == nullptr) std::abort();
    return f;
  }();
  return *files;
}

void WriteInput(const std::string& path, const uint8_t* data, size_t size) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) std::abort();
  for (size_t done = 0; done < size;) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuwatch::tools;  // NOLINT(google-build-using-namespace)
  const Files& files = GetFiles();
  WriteInput(files.input, data, size);

  Report report;
  std::string error;
  const bool ok = ReadReport(files.input, &report, &error);
  if (!ok && (error.empty() || error.find('\n') != std::string::npos)) {
    std::abort();  // the message must be one line
  }
  // Everything below reads the file again itself, like the command does; a
  // bad input must give 2 (and `check` 0 or 1 otherwise).
  for (const char* format : {"text", "json", "collapsed", "html", "pprof", "perfetto"}) {
    for (const char* what : {"leaks", "peak", "allocated"}) {
      ReportOptions options;
      options.file = files.input;
      options.format = format;
      options.what = what;
      options.top = 3;
      if (ReportCommand(options, files.null) != (ok ? 0 : 2)) std::abort();
      if (std::string(format) != "collapsed") break;
    }
  }
  if (!ok) return 0;  // the commands all share ReadReport's verdict

  CheckOptions check;
  check.file = files.input;
  check.max_growth = "10%";
  check.max_peak = "1GiB";
  if (CheckCommand(check, files.null) == 2) std::abort();
  check.baseline = files.input;
  check.include_categories = true;
  if (CheckCommand(check, files.null) == 2) std::abort();

  DiffOptions diff;
  diff.base = files.input;
  diff.now = files.input;
  if (DiffCommand(diff, files.null) != 0) std::abort();

  MergeOptions merge;
  merge.files = {files.input};
  merge.output = files.merged;
  const int merged = MergeCommand(merge, files.null);
  // merge refuses a merged report as input; anything else must merge, and
  // the result must be a report every command reads.
  if (merged == 0) {
    Report again;
    // Sums of many counts near the reader's 2^53 limit may pass it: absurd
    // input, refused by name on reading back, which is all that is asked.
    if (!ReadReport(files.merged, &again, &error)) {
      if (error.find("expected a count of at most 2^53") != std::string::npos) return 0;
      std::fprintf(stderr, "merged report does not read back: %s\n", error.c_str());
      std::abort();
    }
    diff.now = files.merged;
    if (DiffCommand(diff, files.null) != 0) std::abort();
    ReportOptions options;
    options.file = files.merged;
    if (ReportCommand(options, files.null) != 0) std::abort();
  } else if (report.model.trigger != "merge") {
    std::abort();
  }
  return 0;
}
