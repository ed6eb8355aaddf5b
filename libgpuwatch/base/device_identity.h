// Which physical GPU a CUDA device ordinal is, spelled as dcgm-exporter and
// nvidia-smi spell it, so that gpuwatch's series join theirs: the UUID
// ("GPU-" and 8-4-4-4-12 lowercase hex digits), the PCI bus id NVML's way
// ("00000000:3B:00.0": 8-digit domain, uppercase hex) and the node's index
// as NVML numbers the GPUs. The driver's answers in, the labels out (pure);
// interpose/agent/device_identity.cc asks the driver.
//
// Thread-safety: any thread.
#ifndef GPUWATCH_LIBGPUWATCH_BASE_DEVICE_IDENTITY_H_
#define GPUWATCH_LIBGPUWATCH_BASE_DEVICE_IDENTITY_H_

#include <string>

namespace gpuwatch {

struct DeviceIdentity {
  std::string uuid;        // "" when the driver did not say
  std::string pci_bus_id;  // "" when the driver did not say
  int gpu = -1;            // NVML's index; -1 when unknown (no NVML)
};

// cuDeviceGetUuid's 16 bytes as "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
std::string UuidText(const unsigned char (&bytes)[16]);

// cuDeviceGetPCIBusId's "domain:bus:device.function" (hex, any case, 4- or
// 8-digit domain) as NVML's busId: "%08X:%02X:%02X.%X". "" when it is not one.
std::string PciBusIdText(const char* cuda_bus_id);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_DEVICE_IDENTITY_H_
