// CUPTI activity records: copy timing and host memory kinds, and kernel GPU
// time when asked for.
//
// Records arrive in buffers that CUPTI fills and hands back, on a thread of
// its choosing (the flushing thread, or its own). The buffer callbacks take no
// gpuwatch lock other than the sinks' own, and gpuwatch never flushes while
// holding a lock those take (the deadlock Kineto documents).
#ifndef GPUWATCH_INTERPOSE_CALLBACKS_ACTIVITY_H_
#define GPUWATCH_INTERPOSE_CALLBACKS_ACTIVITY_H_

#include <cstdint>
#include <string>

#include "interpose/cupti/cupti_loader.h"

namespace gpuwatch {

class Session;

// The CUPTI API versions (cuptiGetVersion) whose activity record layouts
// gpuwatch reads: CUpti_ActivityMemcpy6, CUpti_ActivityMemcpyPtoP4 and
// CUpti_ActivityKernel10, as in CUDA 13.0's CUPTI.
inline constexpr uint32_t kFirstKnownCuptiVersion = 130000;
inline constexpr uint32_t kLastKnownCuptiVersion = 130099;
bool KnownActivityLayout(uint32_t cupti_version);

// Registers the buffer callbacks and enables MEMCPY and MEMCPY2 records, and
// CONCURRENT_KERNEL records when `kernel_timing`. Returns false with a reason
// when the activity API is missing or refuses, or when this CUPTI's record
// layouts are not known (an unknown version); copies are then counted from
// the API calls alone, untimed.
// Records go through the published Session's (current_session.h) event API
// to its recording of the moment (a fork child's to its own), and to its
// trace once CUPTI's clock offset is known (Recording::trace_gpu).
bool EnableActivity(const CuptiApi& api, bool kernel_timing, std::string* error);

// Delivers every buffered record now (cuptiActivityFlushAll with
// CUPTI_ACTIVITY_FLAG_FLUSH_FORCED). Call with no gpuwatch lock held.
void FlushActivity(const CuptiApi& api);

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_CALLBACKS_ACTIVITY_H_
