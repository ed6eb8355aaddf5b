// Which physical GPU each CUDA device ordinal of this process is
// (libgpuwatch/base/device_identity.h): the UUID and PCI bus id from the
// driver (cuDeviceGetUuid_v2, cuDeviceGetPCIBusId), the node's index from
// NVML when libnvidia-ml.so.1 can be loaded (dlopen, never linked; without
// it the index is unknown, -1, and the UUID and bus id are still there).
// Asked once per device, the first time a live reader asks about a device
// that held memory or the live view's next one-second tick, whichever comes
// first: on gpuwatch's background thread, never in a callback. A call that
// fails leaves that field unknown; nothing here fails the process.
//
// Reports are written on any thread (exit, a signal, an out-of-memory
// failure in a callback, a checkpoint) and must not call the driver: they
// read PublishedDeviceIdentities, an immutable copy published (release)
// each time a device's identity becomes known.
//
// Thread-safety: DeviceIdentitiesFor is the background thread's alone;
// PublishedDeviceIdentities, any thread (one atomic load).
#ifndef GPUWATCH_INTERPOSE_AGENT_DEVICE_IDENTITY_H_
#define GPUWATCH_INTERPOSE_AGENT_DEVICE_IDENTITY_H_

#include <array>
#include <cstdint>

#include "libgpuwatch/base/device_identity.h"
#include "libgpuwatch/record/tracker.h"

namespace gpuwatch {

using DeviceIdentities = std::array<DeviceIdentity, kMaxTrackedDevices>;

// The identity of every device whose `held[device]` is not 0, asked of the
// driver for those not asked before; the others as they are (unknown until
// asked).
const DeviceIdentities& DeviceIdentitiesFor(const std::array<uint64_t, kMaxTrackedDevices>& held);

// What DeviceIdentitiesFor has learnt so far, as last published: a record
// that never changes and is never freed; null before any device's identity
// was asked.
const DeviceIdentities* PublishedDeviceIdentities();

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_AGENT_DEVICE_IDENTITY_H_
