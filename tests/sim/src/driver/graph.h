// CUDA graphs, stream capture and host functions (graph.cc, graph_exec.cc, capture.cc,
// host_fn.cc): what the rest of the driver calls.
#ifndef GWSIM_DRIVER_GRAPH_H_
#define GWSIM_DRIVER_GRAPH_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "driver/cuda_headers.h"
#include "driver/state.h"
#include "driver/work.h"

namespace gwsim::drv {

// The graph node whose work the calling thread is doing inside cuGraphLaunch (zeros outside
// one): what activity records carry in graphNodeId and graphId.
struct GraphNodeScope {
  uint64_t node_id = 0;
  uint32_t graph_id = 0;
};
GraphNodeScope CurrentGraphNode();

// Stream capture. Each operation that takes a stream calls its hook once the stream is
// resolved. A hook returns the operation's result when the operation became a node of the
// graph being captured, or was refused under the rules of stream capture (which may invalidate
// a capture); it returns nothing when the operation runs as usual. With no capture in the
// process the hooks cost one atomic load.
std::optional<CUresult> CaptureCopy(const CopyRequest& request, CUstream_st* stream);
std::optional<CUresult> CaptureMemset(uintptr_t dst, uint32_t value, unsigned element_size,
                                      size_t width, size_t height, size_t pitch,
                                      CUstream_st* stream);
std::optional<CUresult> CaptureLaunch(const LaunchRequest& request, CUstream_st* stream);
// Also forgets that the event was last recorded in a capture when it is recorded outside one.
std::optional<CUresult> CaptureEventRecord(CUevent_st* event, CUstream_st* stream);
std::optional<CUresult> CaptureWaitEvent(CUstream_st* stream, CUevent_st* event);
// cuEventQuery, cuEventSynchronize, cuEventElapsedTime on an event recorded in a capture.
std::optional<CUresult> CaptureEventUse(CUevent_st* event);
// cuStreamSynchronize and cuStreamQuery.
std::optional<CUresult> CaptureStreamSync(CUstream_st* stream);
std::optional<CUresult> CaptureContextSync(CUctx_st* ctx);
// A potentially unsafe call (cuMemAlloc, cuMemAllocHost, cuMemFreeHost, ...): refused while the
// thread's capture interaction mode prohibits it.
std::optional<CUresult> CaptureUnsafeCall();
// cuMemAllocAsync / cuMemAllocFromPoolAsync (pool null: the device's current pool).
std::optional<CUresult> CaptureAllocAsync(CUdeviceptr* dptr, size_t size, CUmemPoolHandle_st* pool,
                                          CUstream_st* stream);
// cuMemFree (stream null) and cuMemFreeAsync: a free node while capturing, the release of a
// graph allocation, or nothing for other memory.
std::optional<CUresult> GraphAwareFree(CUdeviceptr dptr, CUstream_st* stream);

}  // namespace gwsim::drv

#endif  // GWSIM_DRIVER_GRAPH_H_
