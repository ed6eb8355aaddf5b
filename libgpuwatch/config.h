// gpuwatch's configuration, read once from GPUWATCH_* environment variables.
//
// Every value is validated. A bad value costs one warning line that names the
// variable, the value and the default used instead; it never stops the host.
// docs/configuration.md documents each variable; keep the two in step.
#ifndef GPUWATCH_LIBGPUWATCH_CONFIG_H_
#define GPUWATCH_LIBGPUWATCH_CONFIG_H_

#include <functional>
#include <string>
#include <vector>

namespace gpuwatch {

struct Config {
  // GPUWATCH_DISABLE: when true gpuwatch stays dormant.
  bool disabled = false;
  // GPUWATCH_OUTPUT: report path pattern; %p pid, %h host, %r rank, %% a '%'.
  std::string output = "gpuwatch.%p.json";
  // GPUWATCH_DEPTH: native frames captured per event (0 = no stacks).
  int depth = 32;
  // GPUWATCH_SIGNAL: signal that writes a snapshot; 0 = none.
  int snapshot_signal = 0;  // set to SIGUSR2 by the parser's default
  // GPUWATCH_SUMMARY: print the short summary on stderr at exit.
  bool summary = true;
  // GPUWATCH_CUPTI_LIBRARY: explicit path of libcupti.so to load first.
  std::string cupti_library;
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

// Parses a signal given as a number ("12") or a name ("SIGUSR2", "USR2").
// Returns -1 when it is neither. "0", "off" and "none" give 0.
int ParseSignal(const std::string& text);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_CONFIG_H_
