#include "libgpuwatch/base/config.h"

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string_view>

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX global

namespace gpuwatch {

namespace {

constexpr int kDefaultSignal = SIGUSR2;

// Every variable gpuwatch reads. Anything else starting with GPUWATCH_ draws a
// warning, because a misspelled variable silently ignored is worse.
constexpr std::string_view kKnownVariables[] = {
    "GPUWATCH_DISABLE",       "GPUWATCH_OUTPUT",       "GPUWATCH_DEPTH",
    "GPUWATCH_SIGNAL",        "GPUWATCH_SUMMARY",      "GPUWATCH_CUPTI_LIBRARY",
    "GPUWATCH_LIBRARY",  // set by `gpuwatch run` for the child's own use
    "GPUWATCH_KERNEL_TIMING", "GPUWATCH_SUPPRESSIONS", "GPUWATCH_EXITCODE",
    "GPUWATCH_SAMPLE_MS",
    "GPUWATCH_RUN_LOG",  // set by `gpuwatch run`
    "GPUWATCH_PYTHON",        "GPUWATCH_TRACE_EVENTS", "GPUWATCH_CHECKPOINT_SECONDS",
    "GPUWATCH_UNWIND",
};

bool ParseBool(std::string_view text, bool* out) {
  if (text == "1" || text == "true" || text == "yes" || text == "on") {
    *out = true;
    return true;
  }
  if (text == "0" || text == "false" || text == "no" || text == "off") {
    *out = false;
    return true;
  }
  return false;
}

bool ParseInt(std::string_view text, long min, long max, long* out) {
  if (text.empty() || text.size() > 18) return false;
  long value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  if (value < min || value > max) return false;
  *out = value;
  return true;
}

struct SignalName {
  const char* name;
  int number;
};

constexpr SignalName kSignals[] = {
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP},     {"QUIT", SIGQUIT},
    {"PROF", SIGPROF}, {"URG", SIGURG},   {"WINCH", SIGWINCH}, {"TRAP", SIGTRAP},
};

}  // namespace

int ParseSignal(const std::string& text) {
  if (text == "0" || text == "off" || text == "none") return 0;
  long number = 0;
  if (ParseInt(text, 1, SIGRTMAX, &number)) {
    // Signals whose default action must stay intact for the host's sake.
    if (number == SIGKILL || number == SIGSTOP || number == SIGSEGV || number == SIGBUS ||
        number == SIGFPE || number == SIGILL || number == SIGABRT) {
      return -1;
    }
    return static_cast<int>(number);
  }
  std::string_view name = text;
  if (name.substr(0, 3) == "SIG") name.remove_prefix(3);
  for (const auto& s : kSignals) {
    if (name == s.name) return s.number;
  }
  return -1;
}

std::string PytorchAllocatorMode(const EnvLookup& lookup) {
  const char* no_caching = lookup("PYTORCH_NO_CUDA_MEMORY_CACHING");
  if (no_caching != nullptr && std::strcmp(no_caching, "1") == 0) return "no_caching";
  const char* conf = lookup("PYTORCH_CUDA_ALLOC_CONF");
  if (conf == nullptr) return "";
  // "key:value,key:value", spaces allowed around both.
  std::string mode;
  std::string_view rest = conf;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    std::string text;
    for (const char c : item) {
      if (c != ' ' && c != '\t') text += c;
    }
    if (text == "backend:cudaMallocAsync") return "cudaMallocAsync";
    if (text == "expandable_segments:True" || text == "expandable_segments:true") {
      mode = "expandable_segments";
    }
  }
  return mode;
}

bool PytorchAllocatesPerTensor(const std::string& mode) {
  return mode == "no_caching" || mode == "cudaMallocAsync";
}

std::string RankFromEnvironment(const EnvLookup& lookup) {
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) {
    const char* value = lookup(name);
    if (value != nullptr && *value != '\0') return value;
  }
  return "";
}

std::string ExpandOutputPattern(const std::string& pattern, long pid, const std::string& host,
                                const std::string& rank) {
  std::string out;
  out.reserve(pattern.size() + 16);
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c != '%' || i + 1 == pattern.size()) {
      out += c;
      continue;
    }
    const char next = pattern[++i];
    switch (next) {
      case 'p':
        out += std::to_string(pid);
        break;
      case 'h':
        out += host;
        break;
      case 'r':
        out += rank.empty() ? "0" : rank;
        break;
      case '%':
        out += '%';
        break;
      default:
        out += '%';
        out += next;
        break;
    }
  }
  return out;
}

Config ParseConfig(const EnvLookup& lookup, const std::vector<std::string>& env_names,
                   std::vector<std::string>* warnings) {
  Config config;
  config.snapshot_signal = kDefaultSignal;
  auto warn = [&](const char* name, const char* value, const std::string& why,
                  const std::string& fallback) {
    warnings->push_back(std::string("ignoring ") + name + "=\"" + value + "\" (" + why +
                        "); using " + fallback);
  };

  if (const char* v = lookup("GPUWATCH_DISABLE")) {
    if (!ParseBool(v, &config.disabled)) {
      warn("GPUWATCH_DISABLE", v, "expected 0 or 1", "0");
    }
  }
  // In a job with ranks, the default name carries the rank, so that the
  // reports of one job sort together (and `gpuwatch merge` globs them).
  if (!RankFromEnvironment(lookup).empty()) config.output = "gpuwatch.rank%r.%p.json";
  if (const char* v = lookup("GPUWATCH_OUTPUT")) {
    if (*v == '\0') {
      warn("GPUWATCH_OUTPUT", v, "empty path", config.output);
    } else {
      config.output = v;
    }
  }
  if (const char* v = lookup("GPUWATCH_DEPTH")) {
    long depth = 0;
    if (ParseInt(v, 0, 128, &depth)) {
      config.depth = static_cast<int>(depth);
    } else {
      warn("GPUWATCH_DEPTH", v, "expected an integer from 0 to 128", "32");
    }
  }
  if (const char* v = lookup("GPUWATCH_UNWIND")) {
    const std::string_view unwind = v;
    if (unwind == "cfi" || unwind == "libunwind") {
      config.cfi_unwind = unwind == "cfi";
    } else {
      warn("GPUWATCH_UNWIND", v, "expected cfi or libunwind", "cfi");
    }
  }
  if (const char* v = lookup("GPUWATCH_PYTHON")) {
    if (!ParseBool(v, &config.python)) warn("GPUWATCH_PYTHON", v, "expected 0 or 1", "1");
  }
  if (const char* v = lookup("GPUWATCH_SIGNAL")) {
    const int sig = ParseSignal(v);
    if (sig >= 0) {
      config.snapshot_signal = sig;
    } else {
      warn("GPUWATCH_SIGNAL", v,
           "expected a signal name such as SIGUSR2, a number, or 0 to turn it off", "SIGUSR2");
    }
  }
  if (const char* v = lookup("GPUWATCH_SUMMARY")) {
    if (!ParseBool(v, &config.summary)) warn("GPUWATCH_SUMMARY", v, "expected 0 or 1", "1");
  }
  if (const char* v = lookup("GPUWATCH_KERNEL_TIMING")) {
    if (!ParseBool(v, &config.kernel_timing)) {
      warn("GPUWATCH_KERNEL_TIMING", v, "expected 0 or 1", "0");
    }
  }
  if (const char* v = lookup("GPUWATCH_CUPTI_LIBRARY")) config.cupti_library = v;
  if (const char* v = lookup("GPUWATCH_SUPPRESSIONS")) config.suppressions = v;
  if (const char* v = lookup("GPUWATCH_EXITCODE")) {
    long code = 0;
    if (ParseInt(v, 0, 255, &code)) {
      config.exitcode = static_cast<int>(code);
    } else {
      warn("GPUWATCH_EXITCODE", v, "expected an exit status from 1 to 255, or 0 for off", "0");
    }
  }
  if (const char* v = lookup("GPUWATCH_SAMPLE_MS")) {
    long ms = 0;
    if (ParseInt(v, 0, 3600000, &ms)) {
      config.sample_ms = static_cast<int>(ms);
    } else {
      warn("GPUWATCH_SAMPLE_MS", v, "expected milliseconds from 0 (off) to 3600000", "1000");
    }
  }
  if (const char* v = lookup("GPUWATCH_TRACE_EVENTS")) {
    long events = 0;
    // 1,048,576 is Trace::kMaxCapacity: 64 MiB of 64-byte slots.
    if (ParseInt(v, 0, 1048576, &events)) {
      config.trace_events = events;
    } else {
      warn("GPUWATCH_TRACE_EVENTS", v, "expected a number of events from 0 (off) to 1048576",
           "65536");
    }
  }
  if (const char* v = lookup("GPUWATCH_CHECKPOINT_SECONDS")) {
    long seconds = 0;
    if (ParseInt(v, 0, 86400, &seconds)) {
      config.checkpoint_seconds = static_cast<int>(seconds);
    } else {
      warn("GPUWATCH_CHECKPOINT_SECONDS", v, "expected seconds from 0 (off) to 86400", "5");
    }
  }
  if (const char* v = lookup("GPUWATCH_RUN_LOG")) config.run_log = v;

  for (const std::string& name : env_names) {
    if (name.rfind("GPUWATCH_", 0) != 0) continue;
    bool known = false;
    for (const auto k : kKnownVariables) known = known || (name == k);
    if (!known) warnings->push_back("unknown variable " + name + " ignored");
  }
  return config;
}

Config ConfigFromEnvironment(std::vector<std::string>* warnings) {
  std::vector<std::string> names;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "GPUWATCH_", 9) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    names.emplace_back(*e, eq != nullptr ? static_cast<size_t>(eq - *e) : std::strlen(*e));
  }
  return ParseConfig([](const char* name) { return std::getenv(name); }, names,  // NOLINT
                     warnings);
}

}  // namespace gpuwatch
