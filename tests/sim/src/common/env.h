// Reading the simulator's GWSIM_* environment variables.
#ifndef GWSIM_COMMON_ENV_H_
#define GWSIM_COMMON_ENV_H_

#include <cstdint>
#include <string>
#include <vector>

namespace gwsim {

// The simulator's settings, read once from the environment (see tests/sim/README.md).
struct SimConfig {
  uint64_t device_memory = 16ull << 30;  // GWSIM_DEVICE_MEMORY, bytes per device
  int device_count = 1;                  // GWSIM_DEVICE_COUNT: the node's devices (NVML's)
  // CUDA_VISIBLE_DEVICES: the node's device behind each CUDA ordinal, as the real driver maps
  // them; unset: every device, in order.
  std::vector<int> visible;
  double bw_pageable_gbps = 12;         // GWSIM_BW_PAGEABLE
  double bw_pinned_gbps = 25;           // GWSIM_BW_PINNED
  double bw_device_gbps = 2000;         // GWSIM_BW_DEVICE
  uint64_t copy_latency_ns = 2000;      // GWSIM_COPY_LATENCY_NS
  uint64_t kernel_ns = 5000;            // GWSIM_KERNEL_NS
  uint32_t fail_mode = 0;               // GWSIM_FAIL, a gwsim_fail_mode
  bool nested_driver_callbacks = true;  // GWSIM_NESTED_DRIVER_CALLBACKS
  uint32_t correlation = 0;             // GWSIM_CORRELATION, a Correlation
  uint64_t cupti_version = 0;           // GWSIM_CUPTI_VERSION; 0: the headers' CUPTI_API_VERSION
  bool exit_context_destroy = false;    // GWSIM_EXIT_CONTEXT_DESTROY
  bool graph_address_reuse = true;      // GWSIM_GRAPH_ADDRESS_REUSE
  bool graph_clones_reversed = false;   // GWSIM_GRAPH_CLONE_ORDER=reverse
  bool ipc_memory_records = false;      // GWSIM_IPC_MEMORY_RECORDS
};

// GWSIM_CORRELATION: how correlation ids tie API calls and activity records together.
enum Correlation : uint32_t {
  kCorrelationShared = 0,      // `shared`: a driver call made by a runtime call shares its id
  kCorrelationOwn = 1,         // `own`: it has an id of its own, as driver API records do
  kCorrelationUnjoinable = 2,  // `unjoinable`: records carry ids no API call has
};

// Parses the environment. A malformed value prints one line naming the variable to stderr and
// leaves the default in place.
SimConfig ReadSimConfig();

// Parsers used by ReadSimConfig, exposed for the simulator's own tests. Each returns false on
// a malformed value and leaves *out untouched.
bool ParseUnsigned(const char* text, uint64_t* out);
bool ParseByteSize(const char* text, uint64_t* out);  // integer, optional K/M/G/T binary suffix
bool ParsePositiveDouble(const char* text, double* out);
// CUDA_VISIBLE_DEVICES as the driver reads it: comma-separated node indices, taken up to the
// first that is not a device of the `node_count` or repeats one (the rest are ignored); null:
// all of them.
std::vector<int> ParseVisibleDevices(const char* text, int node_count);

}  // namespace gwsim

#endif  // GWSIM_COMMON_ENV_H_
