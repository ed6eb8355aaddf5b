// Operations that take simulated time on a device: copies, kernels; plus memset and events.
//
// Everything runs at once on the calling thread (there is no GPU and no queue); the simulated
// clock advances by each operation's modelled duration, so timestamps are deterministic for a
// single-threaded program.
#ifndef GWSIM_DRIVER_WORK_H_
#define GWSIM_DRIVER_WORK_H_

#include <cstddef>
#include <cstdint>

#include "driver/cuda_headers.h"
#include "driver/state.h"

namespace gwsim::drv {

struct CopyShape {
  size_t width = 0;  // bytes per row
  size_t height = 1;
  size_t depth = 1;
  size_t src_pitch = 0;
  size_t dst_pitch = 0;
  size_t src_slice = 0;  // bytes between slices (3D)
  size_t dst_slice = 0;
};

// Which kind of memory an API requires on one side of a copy.
enum class Side { kAny, kDevice };

struct CopyRequest {
  uintptr_t dst = 0;
  uintptr_t src = 0;
  CopyShape shape;
  Side dst_side = Side::kAny;
  Side src_side = Side::kAny;
  CUstream stream = nullptr;
  bool per_thread = false;  // a _ptds/_ptsz entry point: NULL is the per-thread stream
  bool async = false;
};

inline CopyRequest Linear(uintptr_t dst, uintptr_t src, size_t bytes) {
  CopyRequest r;
  r.dst = dst;
  r.src = src;
  r.shape.width = bytes;
  return r;
}

// Moves the bytes and emits one MEMCPY (or MEMCPY2 for a peer copy) record.
CUresult Copy(const CopyRequest& request);

// The modelled duration of a copy of `bytes` between memory of the two CUPTI memory kinds:
// latency + bytes / bandwidth, the bandwidth chosen by the host side (pinned or pageable) or
// the device bandwidth when both sides are device memory.
uint64_t CopyDurationNs(uint8_t src_kind, uint8_t dst_kind, uint64_t bytes);

CUresult Memset(uintptr_t dst, uint32_t value, unsigned element_size, size_t width_elements,
                size_t height, size_t pitch, CUstream stream, bool per_thread);

CUresult CopyDescriptor2D(const CUDA_MEMCPY2D* copy, CUstream stream, bool per_thread, bool async);
CUresult CopyDescriptor3D(const CUDA_MEMCPY3D* copy, CUstream stream, bool per_thread, bool async);

struct LaunchRequest {
  CUfunc_st* function = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_mem = 0;
  CUstream stream = nullptr;
  bool per_thread = false;
};
// Records a KERNEL / CONCURRENT_KERNEL activity; the kernel itself does not run.
CUresult Launch(const LaunchRequest& request);

CUresult EventCreate(CUevent* event, unsigned flags);
CUresult EventRecord(CUevent event, CUstream stream, bool per_thread);
CUresult EventElapsed(float* ms, CUevent start, CUevent end);
CUresult EventDestroy(CUevent event);

}  // namespace gwsim::drv

#endif  // GWSIM_DRIVER_WORK_H_
