#include "libgpuwatch/session/events.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

namespace gpuwatch {

namespace {

std::atomic<int>& ContextsAlive(Lifecycle& lifecycle, int32_t device) {
  static_assert(Lifecycle::kDeviceSlots == kMaxTrackedDevices);
  return lifecycle.contexts_alive[std::clamp<int32_t>(device, 0, kMaxTrackedDevices - 1)];
}

}  // namespace

void Events::ContextCreated(int32_t device) {
  r_->lifecycle.ContextReady(r_->tracker.NowNs());
  r_->lifecycle.contexts_created.fetch_add(1, std::memory_order_relaxed);
  ContextsAlive(r_->lifecycle, device).fetch_add(1, std::memory_order_relaxed);
}

void Events::ContextDestroyed(int32_t device) {
  std::atomic<int>& alive = ContextsAlive(r_->lifecycle, device);
  const int before = alive.fetch_sub(1, std::memory_order_relaxed);
  if (before <= 0) alive.store(0, std::memory_order_relaxed);
  const bool others_on_device = before > 1;
  // What a context's destroy frees (cuda_runtime_api.h, cudaDeviceReset: the
  // allocations of cudaMalloc, cudaMallocPitch, cudaMallocHost,
  // cudaMallocManaged and CUDA arrays; not those of cudaMallocAsync or
  // cudaMallocFromPoolAsync).
  constexpr uint32_t kFreedWithContext =
      1u << static_cast<int>(MemKind::kDevice) | 1u << static_cast<int>(MemKind::kManaged) |
      1u << static_cast<int>(MemKind::kPinnedHost) | 1u << static_cast<int>(MemKind::kArray);
  Lifecycle& lifecycle = r_->lifecycle;
  lifecycle.contexts_destroyed.fetch_add(1, std::memory_order_relaxed);
  if (others_on_device) {
    lifecycle.context_destroys_kept.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const Tracker::Freed freed = r_->tracker.OnContextDestroyed(device, kFreedWithContext);
  lifecycle.context_freed_count.fetch_add(freed.count, std::memory_order_relaxed);
  lifecycle.context_freed_bytes.fetch_add(freed.bytes, std::memory_order_relaxed);
}

bool Events::CallFailed(const CudaErrorEvent& e) { return r_->errors.OnError(e); }

void Events::FirstCallUnobserved() {
  r_->lifecycle.first_call_observed = false;
  r_->lifecycle.FirstCall(r_->tracker.NowNs());
}

uint64_t Events::Marked(const char* label, std::vector<std::pair<uint32_t, uint64_t>>* scan) {
  const uint64_t now = r_->tracker.NowNs();
  r_->tracker.LiveDeviceBytesBySite(scan);
  const uint64_t ordinal = r_->timeline.AddMark(now, label != nullptr ? label : "",
                                                r_->tracker.DeviceCurrentBytes(), scan);
  if (r_->trace != nullptr) r_->trace->Mark(now, ordinal, label);
  return ordinal;
}

void Events::Sampled(std::vector<std::pair<uint32_t, uint64_t>>* scan) {
  r_->tracker.LiveDeviceBytesBySite(scan);
  r_->timeline.AddPeriodic(r_->tracker.NowNs(), r_->tracker.DeviceCurrentBytes(), scan);
}

void Events::OutOfMemory(int32_t device, uint64_t size, MemKind kind, uint32_t stack_id) {
  if (r_->trace == nullptr) return;
  r_->trace->Oom(r_->tracker.NowNs(), device, size, kind, stack_id);
}

uint32_t Events::NowMs() const {
  const uint64_t ms = r_->tracker.NowNs() / 1000000;
  return ms > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(ms);
}

}  // namespace gpuwatch
