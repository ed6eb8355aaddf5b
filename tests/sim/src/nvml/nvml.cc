// libnvidia-ml.so.1: the part of NVML that PyTorch calls, for the simulator's devices.
//
// NVIDIA's driver ships NVML beside libcuda.so.1, and PyTorch counts on it: under
// expandable_segments:True, ExpandableSegment::map asks whether the device has fabric access
// (c10::cuda::get_fabric_access), which calls NVML's nvmlInit_v2 through a pointer it looked up
// with dlopen("libnvidia-ml.so.1"), unchecked: without the library that is a call through a
// null pointer (README, PyTorch). The devices are the fake driver's (its gwsim_get_config):
// PCI bus id "0000:<device + 1>:00.0" and the UUID of cuDeviceGetUuid, no NVLink, no GPU
// fabric, no processes, peer access between any two devices.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "gwsim_abi.h"

extern "C" {

// NVML's types, as nvml.h declares them (the header is not part of the CUDA toolkit).
using nvmlReturn_t = int;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlProcessInfo_t;
struct nvmlPciInfo_t;
using nvmlGpuP2PCapsIndex_t = int;
using nvmlGpuP2PStatus_t = int;
using nvmlIntNvLinkDeviceType_t = int;
// nvmlGpuFabricInfoV_t, version 2 (PyTorch passes version 0x2000024).
struct nvmlGpuFabricInfoV_t {
  unsigned int version;
  unsigned char clusterUuid[16];
  nvmlReturn_t status;
  unsigned int cliqueId;
  unsigned char state;
  unsigned int healthMask;
};

}  // extern "C"

namespace {

// nvmlReturn_t values (nvml.h).
enum : nvmlReturn_t { kSuccess, kUninitialized, kInvalidArgument, kNotSupported };
enum : nvmlReturn_t { kNotFound = 6, kInsufficientSize = 7, kDriverNotLoaded = 9 };
constexpr unsigned char kFabricStateNotSupported = 0;  // NVML_GPU_FABRIC_STATE_NOT_SUPPORTED
constexpr int kP2PStatusOk = 0;                        // NVML_P2P_STATUS_OK
constexpr int kDriverVersion = 13000;                  // the fake driver's cuDriverGetVersion
constexpr int kMaxDevices = 16;                        // GWSIM_DEVICE_COUNT's limit

struct State {
  std::mutex mu;
  int inits = 0;                            // nvmlInit calls not yet shut down
  int device_count = -1;                    // -1: no simulator driver
  unsigned char devices[kMaxDevices] = {};  // their addresses are the handles
};

State& S() {
  static State* const state = new State();  // leaked: NVML may be called during exit
  return *state;
}

int Ordinal(nvmlDevice_t device) {
  const auto* p = reinterpret_cast<const unsigned char*>(device);
  const unsigned char* first = S().devices;
  if (p < first || p >= first + S().device_count) return -1;
  return static_cast<int>(p - first);
}

nvmlDevice_t Handle(int ordinal) { return reinterpret_cast<nvmlDevice_t>(&S().devices[ordinal]); }

// The device count once initialised, or -1.
int Count() {
  std::lock_guard lock(S().mu);
  return S().inits > 0 ? S().device_count : -1;
}

// "GPU-" and the 16 bytes of cuDeviceGetUuid ("gwsim-device-NN") as NVML prints a UUID.
void Uuid(int ordinal, char* out, size_t size) {
  char raw[17];
  std::snprintf(raw, sizeof(raw), "gwsim-device-%02d", ordinal);
  const auto* b = reinterpret_cast<const unsigned char*>(raw);
  std::snprintf(out, size,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
}

}  // namespace

extern "C" {

#define GWSIM_NVML_EXPORT __attribute__((visibility("default")))

GWSIM_NVML_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int /*flags*/) {
  std::lock_guard lock(S().mu);
  if (S().inits == 0) {
    void* driver = dlopen("libcuda.so.1", RTLD_NOW);
    auto get_config =
        driver != nullptr
            ? reinterpret_cast<void (*)(gwsim_config_info*)>(dlsym(driver, "gwsim_get_config"))
            : nullptr;
    if (get_config == nullptr) return kDriverNotLoaded;
    gwsim_config_info info{};
    get_config(&info);
    if (info.fail_mode == GWSIM_FAIL_NO_DRIVER) return kDriverNotLoaded;
    // NVML lists the node's devices whatever CUDA_VISIBLE_DEVICES says.
    S().device_count = info.node_device_count < kMaxDevices ? info.node_device_count : kMaxDevices;
  }
  ++S().inits;
  return kSuccess;
}

GWSIM_NVML_EXPORT nvmlReturn_t nvmlInit_v2() { return nvmlInitWithFlags(0); }
GWSIM_NVML_EXPORT nvmlReturn_t nvmlInit() { return nvmlInitWithFlags(0); }

GWSIM_NVML_EXPORT nvmlReturn_t nvmlShutdown() {
  std::lock_guard lock(S().mu);
  if (S().inits == 0) return kUninitialized;
  --S().inits;
  return kSuccess;
}

GWSIM_NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case kSuccess:
      return "Success";
    case kUninitialized:
      return "Uninitialized";
    case kInvalidArgument:
      return "Invalid Argument";
    case kNotSupported:
      return "Not Supported";
    case kNotFound:
      return "Not Found";
    case kInsufficientSize:
      return "Insufficient Size";
    case kDriverNotLoaded:
      return "Driver Not Loaded";
    default:
      return "Unknown Error";
  }
}

GWSIM_NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  if (version == nullptr) return kInvalidArgument;
  *version = kDriverVersion;
  return kSuccess;
}
GWSIM_NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) {
  return nvmlSystemGetCudaDriverVersion_v2(version);
}

GWSIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  const int n = Count();
  if (n < 0) return kUninitialized;
  if (count == nullptr) return kInvalidArgument;
  *count = static_cast<unsigned int>(n);
  return kSuccess;
}
GWSIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  return nvmlDeviceGetCount_v2(count);
}

GWSIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                             nvmlDevice_t* device) {
  const int n = Count();
  if (n < 0) return kUninitialized;
  if (device == nullptr || index >= static_cast<unsigned int>(n)) return kInvalidArgument;
  *device = Handle(static_cast<int>(index));
  return kSuccess;
}
GWSIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index,
                                                          nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

// "domain:bus:device.function" in hex, as cuDeviceGetPCIBusId writes it (or NVML's 8-digit
// domain): the device on bus device + 1.
GWSIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id,
                                                                nvmlDevice_t* device) {
  const int n = Count();
  if (n < 0) return kUninitialized;
  if (bus_id == nullptr || device == nullptr) return kInvalidArgument;
  unsigned domain = 0;
  unsigned bus = 0;
  unsigned slot = 0;
  unsigned function = 0;
  if (std::sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &slot, &function) != 4) {
    return kInvalidArgument;
  }
  if (domain != 0 || slot != 0 || function != 0 || bus == 0 || bus > static_cast<unsigned>(n)) {
    return kNotFound;
  }
  *device = Handle(static_cast<int>(bus) - 1);
  return kSuccess;
}

// The node's index of the device (NVML numbers devices by PCI bus id, as the simulator's are).
GWSIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  if (Count() < 0) return kUninitialized;
  const int ordinal = Ordinal(device);
  if (ordinal < 0 || index == nullptr) return kInvalidArgument;
  *index = static_cast<unsigned int>(ordinal);
  return kSuccess;
}

GWSIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid,
                                                 unsigned int length) {
  if (Count() < 0) return kUninitialized;
  const int ordinal = Ordinal(device);
  if (ordinal < 0 || uuid == nullptr) return kInvalidArgument;
  char text[48];
  Uuid(ordinal, text, sizeof(text));
  if (length < std::strlen(text) + 1) return kInsufficientSize;
  std::memcpy(uuid, text, std::strlen(text) + 1);
  return kSuccess;
}

GWSIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  const int n = Count();
  if (n < 0) return kUninitialized;
  if (uuid == nullptr || device == nullptr) return kInvalidArgument;
  for (int i = 0; i < n; ++i) {
    char text[48];
    Uuid(i, text, sizeof(text));
    if (std::strcmp(text, uuid) == 0) {
      *device = Handle(i);
      return kSuccess;
    }
  }
  return kNotFound;
}

// Any two devices can reach each other (as cuDeviceCanAccessPeer says).
GWSIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                                      nvmlGpuP2PCapsIndex_t /*index*/,
                                                      nvmlGpuP2PStatus_t* status) {
  if (Count() < 0) return kUninitialized;
  if (Ordinal(device1) < 0 || Ordinal(device2) < 0 || status == nullptr) return kInvalidArgument;
  *status = kP2PStatusOk;
  return kSuccess;
}

// No process is listed (the simulator's memory is the calling process's own).
GWSIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                                    unsigned int* count,
                                                                    nvmlProcessInfo_t* /*infos*/) {
  if (Count() < 0) return kUninitialized;
  if (Ordinal(device) < 0 || count == nullptr) return kInvalidArgument;
  *count = 0;
  return kSuccess;
}
GWSIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                       unsigned int* count,
                                                                       nvmlProcessInfo_t* infos) {
  return nvmlDeviceGetComputeRunningProcesses(device, count, infos);
}

// No NVLink.
GWSIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(
    nvmlDevice_t device, unsigned int /*link*/, nvmlIntNvLinkDeviceType_t* /*type*/) {
  if (Count() < 0) return kUninitialized;
  return Ordinal(device) < 0 ? kInvalidArgument : kNotSupported;
}
GWSIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device,
                                                                   unsigned int /*link*/,
                                                                   nvmlPciInfo_t* /*pci*/) {
  if (Count() < 0) return kUninitialized;
  return Ordinal(device) < 0 ? kInvalidArgument : kNotSupported;
}

// No GPU fabric: success, with the state NVML_GPU_FABRIC_STATE_NOT_SUPPORTED (what a GPU
// outside an NVLink fabric reports).
GWSIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device,
                                                           nvmlGpuFabricInfoV_t* info) {
  if (Count() < 0) return kUninitialized;
  if (Ordinal(device) < 0 || info == nullptr) return kInvalidArgument;
  const unsigned int version = info->version;
  if (version >> 24 < 1 || (version & 0xffffff) < offsetof(nvmlGpuFabricInfoV_t, healthMask)) {
    return kInvalidArgument;
  }
  const size_t size = (version & 0xffffff) < sizeof(nvmlGpuFabricInfoV_t)
                          ? (version & 0xffffff)
                          : sizeof(nvmlGpuFabricInfoV_t);
  std::memset(reinterpret_cast<unsigned char*>(info) + sizeof(info->version), 0,
              size - sizeof(info->version));
  info->status = kNotSupported;
  info->state = kFabricStateNotSupported;
  return kSuccess;
}

}  // extern "C"
