#include "interpose/agent/device_identity.h"

#include <dlfcn.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace gpuwatch {
namespace {

struct Uuid {
  unsigned char bytes[16];
};
using GetUuidFn = int (*)(Uuid* uuid, int device);
using GetPciBusIdFn = int (*)(char* bus_id, int len, int device);

// NVML's, as nvml.h declares them (0 is NVML_SUCCESS).
struct NvmlDevice;
using NvmlInitFn = int (*)();
using NvmlHandleByPciFn = int (*)(const char* bus_id, NvmlDevice** device);
using NvmlIndexFn = int (*)(NvmlDevice* device, unsigned int* index);

struct Identities {
  DeviceIdentities known;
  std::array<bool, kMaxTrackedDevices> asked{};
  // Every copy published, kept: a report may still read an older one. At
  // most one per device, as each device is asked once.
  std::vector<std::unique_ptr<const DeviceIdentities>> published;
  bool unpublished = false;  // `known` has news (kept if publishing ran out of memory)
};

std::atomic<const DeviceIdentities*> g_published{nullptr};

Identities& State() {
  static Identities* identities = new Identities;  // never destroyed (exit handlers)
  return *identities;
}

template <typename Fn>
Fn Symbol(void* lib, const char* name) {
  return lib != nullptr ? reinterpret_cast<Fn>(dlsym(lib, name)) : nullptr;
}

// NVML's index of the device on `bus_id`, -1 when NVML is not there or
// does not know it. NVML is initialised for the question and shut down.
int NvmlIndex(const std::string& bus_id) {
  static void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  const auto init = Symbol<NvmlInitFn>(nvml, "nvmlInit_v2");
  const auto shutdown = Symbol<NvmlInitFn>(nvml, "nvmlShutdown");
  const auto by_pci = Symbol<NvmlHandleByPciFn>(nvml, "nvmlDeviceGetHandleByPciBusId_v2");
  const auto index_of = Symbol<NvmlIndexFn>(nvml, "nvmlDeviceGetIndex");
  if (init == nullptr || shutdown == nullptr || by_pci == nullptr || index_of == nullptr ||
      bus_id.empty() || init() != 0) {
    return -1;
  }
  NvmlDevice* handle = nullptr;
  unsigned int index = 0;
  const bool known =
      by_pci(bus_id.c_str(), &handle) == 0 && index_of(handle, &index) == 0 && index < 4096U;
  shutdown();
  return known ? static_cast<int>(index) : -1;
}

DeviceIdentity Ask(int device) {
  DeviceIdentity id;
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  auto get_uuid = Symbol<GetUuidFn>(driver, "cuDeviceGetUuid_v2");
  if (get_uuid == nullptr) get_uuid = Symbol<GetUuidFn>(driver, "cuDeviceGetUuid");
  const auto get_bus_id = Symbol<GetPciBusIdFn>(driver, "cuDeviceGetPCIBusId");
  Uuid uuid{};
  if (get_uuid != nullptr && get_uuid(&uuid, device) == 0) id.uuid = UuidText(uuid.bytes);
  char bus_id[32] = {};
  if (get_bus_id != nullptr && get_bus_id(bus_id, sizeof(bus_id), device) == 0) {
    id.pci_bus_id = PciBusIdText(bus_id);
  }
  // RTLD_NOLOAD took a reference (the program holds its own): given back
  // after the calls, so that a program that unloads the driver still can.
  if (driver != nullptr) dlclose(driver);
  id.gpu = NvmlIndex(id.pci_bus_id);
  return id;
}

}  // namespace

const DeviceIdentities& DeviceIdentitiesFor(const std::array<uint64_t, kMaxTrackedDevices>& held) {
  Identities& s = State();
  for (int d = 0; d < kMaxTrackedDevices; ++d) {
    if (held[d] == 0 || s.asked[d]) continue;
    s.asked[d] = true;
    s.known[d] = Ask(d);
    s.unpublished = true;
  }
  if (s.unpublished) {
    s.published.push_back(std::make_unique<const DeviceIdentities>(s.known));
    g_published.store(s.published.back().get(), std::memory_order_release);
    s.unpublished = false;
  }
  return s.known;
}

const DeviceIdentities* PublishedDeviceIdentities() {
  return g_published.load(std::memory_order_acquire);
}

}  // namespace gpuwatch
