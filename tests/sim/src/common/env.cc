#include "common/env.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gwsim_abi.h"

namespace gwsim {

bool ParseUnsigned(const char* text, uint64_t* out) {
  if (text == nullptr || *text < '0' || *text > '9') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') return false;
  *out = value;
  return true;
}

bool ParseByteSize(const char* text, uint64_t* out) {
  if (text == nullptr || *text < '0' || *text > '9') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text) return false;
  unsigned shift = 0;
  switch (*end) {
    case '\0':
      break;
    case 'k':
    case 'K':
      shift = 10;
      break;
    case 'm':
    case 'M':
      shift = 20;
      break;
    case 'g':
    case 'G':
      shift = 30;
      break;
    case 't':
    case 'T':
      shift = 40;
      break;
    default:
      return false;
  }
  if (shift != 0) {
    ++end;
    if (*end == 'i' || *end == 'I') ++end;  // KiB, MiB, ...
    if (*end == 'b' || *end == 'B') ++end;
    if (*end != '\0') return false;
    if (value > (~0ull >> shift)) return false;
  }
  *out = static_cast<uint64_t>(value) << shift;
  return true;
}

bool ParsePositiveDouble(const char* text, double* out) {
  if (text == nullptr || *text == '\0') return false;
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !std::isfinite(value) || value <= 0) {
    return false;
  }
  *out = value;
  return true;
}

namespace {

void Warn(const char* name, const char* value, const char* expected) {
  std::fprintf(stderr, "gwsim: ignoring %s='%s' (expected %s); using the default\n", name, value,
               expected);
}

// A 1-or-0 setting.
void ReadFlag(const char* name, bool* field) {
  if (const char* v = std::getenv(name)) {
    if (std::strcmp(v, "1") == 0 || std::strcmp(v, "0") == 0) {
      *field = v[0] == '1';
    } else {
      Warn(name, v, "1 or 0");
    }
  }
}

}  // namespace

std::vector<int> ParseVisibleDevices(const char* text, int node_count) {
  std::vector<int> visible;
  if (text == nullptr) {
    for (int i = 0; i < node_count; ++i) visible.push_back(i);
    return visible;
  }
  std::string rest = text;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string entry = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    uint64_t index = 0;
    if (!ParseUnsigned(entry.c_str(), &index) || index >= static_cast<uint64_t>(node_count)) break;
    if (std::find(visible.begin(), visible.end(), static_cast<int>(index)) != visible.end()) break;
    visible.push_back(static_cast<int>(index));
  }
  return visible;
}

SimConfig ReadSimConfig() {
  SimConfig config;
  if (const char* v = std::getenv("GWSIM_DEVICE_MEMORY")) {
    uint64_t bytes = 0;
    if (ParseByteSize(v, &bytes) && bytes > 0) {
      config.device_memory = bytes;
    } else {
      Warn("GWSIM_DEVICE_MEMORY", v, "a positive number of bytes");
    }
  }
  if (const char* v = std::getenv("GWSIM_DEVICE_COUNT")) {
    uint64_t count = 0;
    if (ParseUnsigned(v, &count) && count <= 16) {
      config.device_count = static_cast<int>(count);
    } else {
      Warn("GWSIM_DEVICE_COUNT", v, "an integer from 0 to 16");
    }
  }
  config.visible = ParseVisibleDevices(std::getenv("CUDA_VISIBLE_DEVICES"), config.device_count);
  struct {
    const char* name;
    double* field;
  } const bandwidths[] = {{"GWSIM_BW_PAGEABLE", &config.bw_pageable_gbps},
                          {"GWSIM_BW_PINNED", &config.bw_pinned_gbps},
                          {"GWSIM_BW_DEVICE", &config.bw_device_gbps}};
  for (const auto& bw : bandwidths) {
    if (const char* v = std::getenv(bw.name)) {
      if (!ParsePositiveDouble(v, bw.field)) Warn(bw.name, v, "a positive number of GB/s");
    }
  }
  if (const char* v = std::getenv("GWSIM_COPY_LATENCY_NS")) {
    if (!ParseUnsigned(v, &config.copy_latency_ns)) {
      Warn("GWSIM_COPY_LATENCY_NS", v, "a non-negative integer");
    }
  }
  if (const char* v = std::getenv("GWSIM_KERNEL_NS")) {
    if (!ParseUnsigned(v, &config.kernel_ns)) Warn("GWSIM_KERNEL_NS", v, "a non-negative integer");
  }
  if (const char* v = std::getenv("GWSIM_FAIL")) {
    if (std::strcmp(v, "no-driver") == 0) {
      config.fail_mode = GWSIM_FAIL_NO_DRIVER;
    } else if (std::strcmp(v, "other-subscriber") == 0) {
      config.fail_mode = GWSIM_FAIL_OTHER_SUBSCRIBER;
    } else if (*v != '\0' && std::strcmp(v, "none") != 0) {
      Warn("GWSIM_FAIL", v, "no-driver, other-subscriber or none");
    }
  }
  ReadFlag("GWSIM_NESTED_DRIVER_CALLBACKS", &config.nested_driver_callbacks);
  ReadFlag("GWSIM_EXIT_CONTEXT_DESTROY", &config.exit_context_destroy);
  ReadFlag("GWSIM_GRAPH_ADDRESS_REUSE", &config.graph_address_reuse);
  if (const char* v = std::getenv("GWSIM_GRAPH_CLONE_ORDER")) {
    if (std::strcmp(v, "reverse") == 0 || std::strcmp(v, "creation") == 0) {
      config.graph_clones_reversed = v[0] == 'r';
    } else {
      Warn("GWSIM_GRAPH_CLONE_ORDER", v, "creation or reverse");
    }
  }
  ReadFlag("GWSIM_IPC_MEMORY_RECORDS", &config.ipc_memory_records);
  if (const char* v = std::getenv("GWSIM_CORRELATION")) {
    if (std::strcmp(v, "shared") == 0) {
      config.correlation = kCorrelationShared;
    } else if (std::strcmp(v, "own") == 0) {
      config.correlation = kCorrelationOwn;
    } else if (std::strcmp(v, "unjoinable") == 0) {
      config.correlation = kCorrelationUnjoinable;
    } else {
      Warn("GWSIM_CORRELATION", v, "shared, own or unjoinable");
    }
  }
  if (const char* v = std::getenv("GWSIM_CUPTI_VERSION")) {
    uint64_t version = 0;
    if (ParseUnsigned(v, &version) && version > 0 && version <= UINT32_MAX) {
      config.cupti_version = version;
    } else {
      Warn("GWSIM_CUPTI_VERSION", v, "a positive integer");
    }
  }
  return config;
}

}  // namespace gwsim
