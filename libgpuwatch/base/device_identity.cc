#include "libgpuwatch/base/device_identity.h"

#include <cstdio>

namespace gpuwatch {

std::string UuidText(const unsigned char (&b)[16]) {
  char text[48];
  std::snprintf(text, sizeof(text),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return text;
}

std::string PciBusIdText(const char* cuda_bus_id) {
  if (cuda_bus_id == nullptr) return {};
  unsigned domain = 0;
  unsigned bus = 0;
  unsigned device = 0;
  unsigned function = 0;
  char extra = 0;
  // NOLINTNEXTLINE(cert-err34-c): each field is checked below
  if (std::sscanf(cuda_bus_id, "%x:%x:%x.%x%c", &domain, &bus, &device, &function, &extra) != 4 ||
      bus > 0xff || device > 0x1f || function > 0x7) {
    return {};
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%08X:%02X:%02X.%X", domain, bus, device, function);
  return text;
}

}  // namespace gpuwatch
