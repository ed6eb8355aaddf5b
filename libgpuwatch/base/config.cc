#include "libgpuwatch/base/config.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <string_view>
#include <type_traits>

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX global

namespace gpuwatch {

namespace {

constexpr int kDefaultSignal = SIGUSR2;

// Every variable gpuwatch reads. Anything else starting with GPUWATCH_ draws a
// warning, because a misspelled variable silently ignored is worse.
constexpr std::string_view kKnownVariables[] = {
    "GPUWATCH_DISABLE",
    "GPUWATCH_OUTPUT",
    "GPUWATCH_DEPTH",
    "GPUWATCH_SIGNAL",
    "GPUWATCH_SUMMARY",
    "GPUWATCH_CUPTI_LIBRARY",
    "GPUWATCH_LIBRARY",  // set by `gpuwatch run` for the child's own use
    "GPUWATCH_KERNEL_TIMING",
    "GPUWATCH_SUPPRESSIONS",
    "GPUWATCH_EXITCODE",
    "GPUWATCH_SAMPLE_MS",
    "GPUWATCH_ALLOC_FN",
    "GPUWATCH_RUN_LOG",       // set by `gpuwatch run`
    "GPUWATCH_TORCH_BLOCKS",  // read by the Python side (python/gpuwatch/torch_hooks.py)
    "GPUWATCH_PYTHON",
    "GPUWATCH_TRACE_EVENTS",
    "GPUWATCH_CHECKPOINT_SECONDS",
    "GPUWATCH_UNWIND",
    "GPUWATCH_LIVE",
    "GPUWATCH_LIVE_DIR",
    "GPUWATCH_NODE_DIR",  // the node's live directory root (libgpuwatch/base/live_dir.h)
    "GPUWATCH_NVTX",
    "GPUWATCH_SHARE_CUPTI",
    "GPUWATCH_IDLE_SECONDS",      // read by gpuwatch top and gpuwatch exporter
    "GPUWATCH_REPORT_MAX_BYTES",  // read by the gpuwatch command's report readers
    "GPUWATCH_NVTX_CHAIN",  // set for the NVTX tool gpuwatch chains to (interpose/nvtx/nvtx.h)
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

// "a, b,,c" -> {"a", "b", "c"}: the items of a comma-separated list, spaces
// around each left out, empty ones dropped.
std::vector<std::string> SplitNames(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text.remove_prefix(comma == std::string_view::npos ? text.size() : comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
  }
  return out;
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

bool NvtxSwitchedOff(const char* value) {
  bool on = true;
  return value != nullptr && ParseBool(value, &on) && !on;
}

bool SharedCuptiOff(const char* share_cupti, const char* disable) {
  bool on = true;
  bool disabled = false;
  return (share_cupti != nullptr && ParseBool(share_cupti, &on) && !on) ||
         (disable != nullptr && ParseBool(disable, &disabled) && disabled);
}

int ParseSignal(const std::string& text) {
  if (text == "0" || text == "off" || text == "none") return 0;
  long number = 0;
  if (ParseInt(text, 1, SIGRTMAX, &number)) {
    // The signals a name may give, and the real-time ones: never one whose
    // action the host relies on (SIGTERM, SIGINT, SIGKILL, SIGSEGV, ...).
    const bool named = std::any_of(std::begin(kSignals), std::end(kSignals),
                                   [number](const SignalName& s) { return s.number == number; });
    return named || (number >= SIGRTMIN && number <= SIGRTMAX) ? static_cast<int>(number) : -1;
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
  // A 0/1 variable; a bad value keeps the default.
  auto read_bool = [&](const char* name, bool* out) {
    const char* v = lookup(name);
    if (v != nullptr && !ParseBool(v, out)) warn(name, v, "expected 0 or 1", *out ? "1" : "0");
  };
  // An integer variable in [min, max]; a bad value keeps the default.
  auto read_int = [&](const char* name, long min, long max, const char* expected, auto* out) {
    const char* v = lookup(name);
    long value = 0;
    if (v == nullptr) return;
    if (ParseInt(v, min, max, &value)) {
      *out = static_cast<std::remove_pointer_t<decltype(out)>>(value);
    } else {
      warn(name, v, expected, std::to_string(*out));
    }
  };

  read_bool("GPUWATCH_DISABLE", &config.disabled);
  read_bool("GPUWATCH_SHARE_CUPTI", &config.share_cupti);
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
  read_int("GPUWATCH_DEPTH", 0, 128, "expected an integer from 0 to 128", &config.depth);
  if (const char* v = lookup("GPUWATCH_UNWIND")) {
    const std::string_view unwind = v;
    if (unwind == "cfi" || unwind == "libunwind") {
      config.cfi_unwind = unwind == "cfi";
    } else {
      warn("GPUWATCH_UNWIND", v, "expected cfi or libunwind", "cfi");
    }
  }
  read_bool("GPUWATCH_PYTHON", &config.python);
  if (const char* v = lookup("GPUWATCH_SIGNAL")) {
    const int sig = ParseSignal(v);
    if (sig >= 0) {
      config.snapshot_signal = sig;
    } else {
      warn("GPUWATCH_SIGNAL", v,
           "expected a signal name such as SIGUSR2, a number, or 0 to turn it off", "SIGUSR2");
    }
  }
  read_bool("GPUWATCH_SUMMARY", &config.summary);
  read_bool("GPUWATCH_KERNEL_TIMING", &config.kernel_timing);
  if (const char* v = lookup("GPUWATCH_CUPTI_LIBRARY")) config.cupti_library = v;
  if (const char* v = lookup("GPUWATCH_SUPPRESSIONS")) config.suppressions = v;
  if (const char* v = lookup("GPUWATCH_ALLOC_FN")) config.alloc_fns = SplitNames(v);
  read_int("GPUWATCH_EXITCODE", 0, 255, "expected an exit status from 1 to 255, or 0 for off",
           &config.exitcode);
  read_int("GPUWATCH_SAMPLE_MS", 0, 3600000, "expected milliseconds from 0 (off) to 3600000",
           &config.sample_ms);
  // 1,048,576 is Trace::kMaxCapacity: 64 MiB of 64-byte slots.
  read_int("GPUWATCH_TRACE_EVENTS", 0, 1048576,
           "expected a number of events from 0 (off) to 1048576", &config.trace_events);
  read_int("GPUWATCH_CHECKPOINT_SECONDS", 0, 86400, "expected seconds from 0 (off) to 86400",
           &config.checkpoint_seconds);
  read_bool("GPUWATCH_LIVE", &config.live);
  read_bool("GPUWATCH_NVTX", &config.nvtx);
  if (const char* v = lookup("GPUWATCH_LIVE_DIR")) {
    if (*v == '\0') {
      warn("GPUWATCH_LIVE_DIR", v, "empty path", "the per-user default");
    } else {
      config.live_dir = v;
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
