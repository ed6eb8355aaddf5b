// gpuwatch's configuration, read once from GPUWATCH_* environment variables.
//
// Every value is validated. A bad value costs one warning line that names the
// variable, the value and the default used instead; it never stops the host.
// docs/configuration.md documents each variable; keep the two in step.
#ifndef GPUWATCH_LIBGPUWATCH_BASE_CONFIG_H_
#define GPUWATCH_LIBGPUWATCH_BASE_CONFIG_H_

#include <functional>
#include <string>
#include <vector>

namespace gpuwatch {

struct Config {
  // GPUWATCH_DISABLE: when true gpuwatch stays dormant.
  bool disabled = false;
  // GPUWATCH_OUTPUT: report path pattern; %p pid, %h host, %r rank, %% a '%'.
  // ParseConfig's default is "gpuwatch.rank%r.%p.json" when a rank is set.
  std::string output = "gpuwatch.%p.json";
  // GPUWATCH_DEPTH: native frames captured per event (0 = no stacks).
  int depth = 32;
  // GPUWATCH_UNWIND: "cfi" (gpuwatch's own unwinder, cfi_unwind.h) or
  // "libunwind" (libunwind's unw_backtrace for every stack). False = libunwind.
  bool cfi_unwind = true;
  // GPUWATCH_PYTHON: in a CPython process, also record the Python frames of
  // each stack (as many as `depth`); false = native frames only.
  bool python = true;
  // GPUWATCH_SIGNAL: signal that writes a snapshot; 0 = none.
  int snapshot_signal = 0;  // set to SIGUSR2 by the parser's default
  // GPUWATCH_SUMMARY: print the short summary on stderr at exit.
  bool summary = true;
  // GPUWATCH_KERNEL_TIMING: GPU time per kernel from activity records.
  bool kernel_timing = false;
  // GPUWATCH_CUPTI_LIBRARY: explicit path of libcupti.so to load first.
  std::string cupti_library;
  // GPUWATCH_SUPPRESSIONS: path of a suppressions file (leak:PATTERN lines).
  std::string suppressions;
  // GPUWATCH_ALLOC_FN: the program's own allocation helpers, comma-separated
  // function names or globs (analysis/alloc_functions.h): a site is named by
  // the first frame outside them.
  std::vector<std::string> alloc_fns;
  // GPUWATCH_EXITCODE: exit status that replaces 0 when device memory leaked
  // outside suppressions and categories; 0 = never change the status.
  int exitcode = 0;
  // GPUWATCH_SAMPLE_MS: periodic timeline sampling interval; 0 = off.
  int sample_ms = 1000;
  // GPUWATCH_TRACE_EVENTS: events kept in the event trace (the newest); 0 = no trace.
  long trace_events = 65536;
  // GPUWATCH_CHECKPOINT_SECONDS: the main report is refreshed this often
  // (and at a new device peak) while the process runs; 0 = never.
  int checkpoint_seconds = 5;
  // GPUWATCH_LIVE: serve the live state (live_dir.h) to `gpuwatch top` and
  // `gpuwatch exporter` on a Unix socket while the process runs.
  bool live = true;
  // GPUWATCH_LIVE_DIR: where the socket goes; "" = DefaultLiveDir().
  std::string live_dir;
  // GPUWATCH_NVTX: take NVTX ranges and the memory extension (phases, pool
  // regions). Read where NVTX_INJECTION64_PATH is set and where NVTX calls
  // in (NvtxSwitchedOff), before the configuration; here its value is checked.
  bool nvtx = true;
  // GPUWATCH_SHARE_CUPTI: give other CUPTI clients of the process (PyTorch's
  // profiler, XLA's tracer) a CUPTI of their own beside gpuwatch's. Read
  // where they call CUPTI (SharedCuptiOff), before the configuration; here
  // its value is checked.
  bool share_cupti = true;
  // GPUWATCH_RUN_LOG: set by `gpuwatch run`; each report written is appended
  // there as "TRIGGER<TAB>PATH" and not announced on stderr.
  std::string run_log;
};

// Looks up an environment variable; returns nullptr when unset.
using EnvLookup = std::function<const char*(const char* name)>;

// Parses the configuration. Each problem is appended to `warnings` as one
// human-readable line (without the "gpuwatch: " prefix). `env_names` lists the
// names of all variables set in the environment, used to flag misspelled
// GPUWATCH_* names; pass an empty vector to skip that check.
Config ParseConfig(const EnvLookup& lookup, const std::vector<std::string>& env_names,
                   std::vector<std::string>* warnings);

// Reads the process environment (getenv/environ). Not thread-safe against a
// concurrent setenv; call during initialisation.
Config ConfigFromEnvironment(std::vector<std::string>* warnings);

// Expands %p, %h, %r and %% in an output pattern. Unknown %x sequences are
// kept as they are. `rank` may be empty, in which case %r expands to "0".
std::string ExpandOutputPattern(const std::string& pattern, long pid, const std::string& host,
                                const std::string& rank);

// The rank of this process from RANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID
// (first set wins), or "" when none is set.
std::string RankFromEnvironment(const EnvLookup& lookup);

// How PyTorch's CUDA allocator is set up in this process, from the variables
// PyTorch reads: "no_caching" (PYTORCH_NO_CUDA_MEMORY_CACHING=1),
// "cudaMallocAsync" (PYTORCH_CUDA_ALLOC_CONF backend:cudaMallocAsync),
// "expandable_segments", or "" for the default caching allocator (or no
// PyTorch). In the first two every tensor is an allocation of its own.
std::string PytorchAllocatorMode(const EnvLookup& lookup);
bool PytorchAllocatesPerTensor(const std::string& mode);

// Whether GPUWATCH_NVTX turns NVTX off: "0", "false", "no" or "off" (any
// other value leaves it on; ParseConfig says which are not booleans).
bool NvtxSwitchedOff(const char* value);
// Whether the other CUPTI clients get CUPTI as it is, not a view of their
// own: GPUWATCH_SHARE_CUPTI=0, or gpuwatch disabled (GPUWATCH_DISABLE=1).
bool SharedCuptiOff(const char* share_cupti, const char* disable);

// Parses a signal given as a number ("12") or a name ("SIGUSR2", "USR2").
// Returns -1 when it is neither. "0", "off" and "none" give 0.
int ParseSignal(const std::string& text);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_CONFIG_H_
