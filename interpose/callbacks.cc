#include "interpose/callbacks.h"

#include <algorithm>
#include <cstdint>

#include "libgpuwatch/kernels.h"
#include "libgpuwatch/lifecycle.h"
#include "libgpuwatch/python_stack.h"
#include "libgpuwatch/stack_table.h"
#include "libgpuwatch/tracker.h"
#include "libgpuwatch/transfers.h"
#include "libgpuwatch/unwind.h"

namespace gpuwatch {

namespace {

CallbackHooks g_hooks;

// Depth of enabled runtime API calls on this thread. A runtime call that nests
// a driver call (cudaMalloc -> cuMemAlloc_v2) is counted at the runtime level
// only. initial-exec TLS: reading it never allocates, even when the driver
// dlopen'ed us through CUDA_INJECTION64_PATH.
thread_local int t_runtime_depth __attribute__((tls_model("initial-exec"))) = 0;

// X-macro lists of every callback id handled. Each API appears once here and
// once in a switch below.
// clang-format off
#define GPUWATCH_RUNTIME_CBIDS(X) \
  X(cudaMalloc_v3020) \
  X(cudaMallocPitch_v3020) \
  X(cudaMalloc3D_v3020) \
  X(cudaMallocManaged_v6000) \
  X(cudaMallocAsync_v11020) \
  X(cudaMallocFromPoolAsync_v11020) \
  X(cudaMallocFromPoolAsync_ptsz_v11020) \
  X(cudaMallocHost_v3020) \
  X(cudaHostAlloc_v3020) \
  X(cudaFree_v3020) \
  X(cudaFreeAsync_v11020) \
  X(cudaFreeAsync_ptsz_v11020) \
  X(cudaFreeHost_v3020) \
  X(cudaHostUnregister_v4000) \
  X(cudaMemcpy_ptds_v7000) \
  X(cudaMemcpyAsync_v3020) \
  X(cudaMemcpyAsync_ptsz_v7000) \
  X(cudaMemcpy2D_v3020) \
  X(cudaMemcpy2D_ptds_v7000) \
  X(cudaMemcpy2DAsync_ptsz_v7000) \
  X(cudaMemcpy3D_v3020) \
  X(cudaMemcpy3D_ptds_v7000) \
  X(cudaMemcpy3DAsync_v3020) \
  X(cudaMemcpyPeer_v4000) \
  X(cudaMemcpyPeerAsync_v4000) \
  X(cudaMemcpyToSymbol_v3020) \
  X(cudaMemcpyFromSymbol_v3020) \
  X(cudaMemcpyFromSymbol_ptds_v7000) \
  X(cudaMemcpyToSymbolAsync_v3020) \
  X(cudaMemcpyFromSymbolAsync_v3020) \
  X(cudaMemcpyBatchAsync_v13000) \
  X(cudaLaunchKernel_v7000) \
  X(cudaLaunchKernel_ptsz_v7000) \
  X(cudaLaunchKernelExC_v11060) \
  X(cudaLaunchKernelExC_ptsz_v11060) \
  X(__cudaLaunchKernel_v13000) \
  X(__cudaLaunchKernel_ptsz_v13000) \
  X(cudaLaunchCooperativeKernel_v9000) \
  X(cudaGraphLaunch_v10000) \
  X(cudaGraphLaunch_ptsz_v10000) \
  X(cudaDeviceSynchronize_v3020) \
  X(cudaStreamSynchronize_v3020) \
  X(cudaStreamSynchronize_ptsz_v7000) \
  X(cudaEventSynchronize_v3020)

#define GPUWATCH_DRIVER_CBIDS(X) \
  X(cuMemAlloc_v2) \
  X(cuMemAllocPitch_v2) \
  X(cuMemAllocManaged) \
  X(cuMemAllocAsync) \
  X(cuMemAllocAsync_ptsz) \
  X(cuMemAllocFromPoolAsync) \
  X(cuMemAllocFromPoolAsync_ptsz) \
  X(cuMemAllocHost_v2) \
  X(cuMemHostAlloc) \
  X(cuMemHostRegister_v2) \
  X(cuMemFree_v2) \
  X(cuMemFreeAsync) \
  X(cuMemFreeAsync_ptsz) \
  X(cuMemFreeHost) \
  X(cuMemHostUnregister) \
  X(cuMemCreate) \
  X(cuMemRelease) \
  X(cuMemMap) \
  X(cuMemUnmap) \
  X(cuMemcpyHtoD_v2) \
  X(cuMemcpyHtoD_v2_ptds) \
  X(cuMemcpyHtoDAsync_v2) \
  X(cuMemcpyHtoDAsync_v2_ptsz) \
  X(cuMemcpyDtoH_v2) \
  X(cuMemcpyDtoH_v2_ptds) \
  X(cuMemcpyDtoHAsync_v2) \
  X(cuMemcpyDtoHAsync_v2_ptsz) \
  X(cuMemcpyDtoD_v2) \
  X(cuMemcpyDtoD_v2_ptds) \
  X(cuMemcpyDtoDAsync_v2) \
  X(cuMemcpyDtoDAsync_v2_ptsz) \
  X(cuMemcpy) \
  X(cuMemcpy_ptds) \
  X(cuMemcpyAsync) \
  X(cuMemcpyAsync_ptsz) \
  X(cuMemcpyPeer) \
  X(cuMemcpyPeer_ptds) \
  X(cuMemcpyPeerAsync) \
  X(cuMemcpyPeerAsync_ptsz) \
  X(cuMemcpyBatchAsync_v2) \
  X(cuMemcpyBatchAsync_v2_ptsz) \
  X(cuLaunchKernel) \
  X(cuLaunchKernel_ptsz) \
  X(cuLaunchKernelEx) \
  X(cuLaunchKernelEx_ptsz) \
  X(cuLaunchCooperativeKernel) \
  X(cuGraphLaunch) \
  X(cuGraphLaunch_ptsz) \
  X(cuCtxSynchronize) \
  X(cuCtxSynchronize_v2) \
  X(cuStreamSynchronize) \
  X(cuStreamSynchronize_ptsz) \
  X(cuEventSynchronize)

// clang-format on

template <typename P>
const P& Params(const CUpti_CallbackData* d) {
  return *static_cast<const P*>(d->functionParams);
}

uint64_t Addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

CopyKind FromRuntimeKind(cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToDevice:
      return CopyKind::kHostToDevice;
    case cudaMemcpyDeviceToHost:
      return CopyKind::kDeviceToHost;
    case cudaMemcpyDeviceToDevice:
      return CopyKind::kDeviceToDevice;
    case cudaMemcpyHostToHost:
      return CopyKind::kHostToHost;
    default:
      return CopyKind::kUnknown;  // cudaMemcpyDefault: resolved from activity records
  }
}

// Captures and interns the calling thread's stack: before any lock. The
// frames of gpuwatch, CUPTI, the driver and the runtime above the user's call
// are left out (CaptureUserStack). In a Python process the Python frames
// follow the native pcs (python_stack.h).
uint32_t CaptureSite() {
  if (g_hooks.stacks == nullptr || g_hooks.depth <= 0) return 0;
  uintptr_t pcs[kMaxCaptureDepth];
  int n = CaptureUserStack(pcs, std::min(g_hooks.depth, kMaxCaptureDepth));
  n += CapturePythonFrames(pcs + n, std::min(g_hooks.depth, kMaxCaptureDepth - n));
  return g_hooks.stacks->Intern(pcs, n);
}

// An allocation call's request, read from its params struct.
struct AllocCall {
  uint64_t address = 0;  // valid only when the call succeeded
  uint64_t size = 0;
  MemKind kind = MemKind::kDevice;
  const void* stream = nullptr;
};

// The device ordinal of the call's context, cached per thread by context
// uid (a program rarely switches devices between calls); 0 when unknown.
int32_t DeviceOf(const CUpti_CallbackData* d) {
  static thread_local uint32_t t_context_uid __attribute__((tls_model("initial-exec"))) = 0;
  static thread_local int32_t t_device __attribute__((tls_model("initial-exec"))) = 0;
  if (g_hooks.get_device_id == nullptr || d->context == nullptr) return 0;
  if (d->contextUid != 0 && d->contextUid == t_context_uid) return t_device;
  uint32_t device = 0;
  if (g_hooks.get_device_id(d->context, &device) != CUPTI_SUCCESS) return 0;
  t_context_uid = d->contextUid;
  t_device = static_cast<int32_t>(device);
  return t_device;
}

void Alloc(const AllocCall& call, const CUpti_CallbackData* d) {
  if (call.address == 0 || g_hooks.tracker->paused()) return;  // paused: no stack either
  AllocEvent e;
  e.address = call.address;
  e.size = call.size;
  e.kind = call.kind;
  e.device = DeviceOf(d);
  e.stream = Addr(call.stream);
  e.stack_id = CaptureSite();
  g_hooks.tracker->OnAlloc(e);
}

void OutOfMemory(const AllocCall& call, const CUpti_CallbackData* d, int error) {
  if (g_hooks.on_oom == nullptr) return;
  OomEvent e;
  e.size = call.size;
  e.kind = call.kind;
  e.api = d->functionName != nullptr ? d->functionName : "";
  e.error = error;
  e.stack_id = CaptureSite();
  e.device = DeviceOf(d);
  g_hooks.on_oom(e);
}

// Reads the request of a runtime allocation call. Output pointers are read
// only when `succeeded`: after a failure they hold garbage.
bool ParseRuntimeAlloc(CUpti_CallbackId cbid, const CUpti_CallbackData* d, bool succeeded,
                       AllocCall* call) {
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020: {
      const auto& p = Params<cudaMalloc_v3020_params>(d);
      *call = {succeeded ? Addr(*p.devPtr) : 0, p.size, MemKind::kDevice, nullptr};
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020: {
      const auto& p = Params<cudaMallocPitch_v3020_params>(d);
      *call = {succeeded ? Addr(*p.devPtr) : 0, (succeeded ? *p.pitch : p.width) * p.height,
               MemKind::kDevice, nullptr};
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3D_v3020: {
      const auto& p = Params<cudaMalloc3D_v3020_params>(d);
      const uint64_t row = succeeded ? p.pitchedDevPtr->pitch : p.extent.width;
      *call = {succeeded ? Addr(p.pitchedDevPtr->ptr) : 0, row * p.extent.height * p.extent.depth,
               MemKind::kDevice, nullptr};
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000: {
      const auto& p = Params<cudaMallocManaged_v6000_params>(d);
      *call = {succeeded ? Addr(*p.devPtr) : 0, p.size, MemKind::kManaged, nullptr};
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020: {
      const auto& p = Params<cudaMallocAsync_v11020_params>(d);
      *call = {succeeded ? Addr(*p.devPtr) : 0, p.size, MemKind::kPool, p.hStream};
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020: {
      const auto& p = Params<cudaMallocFromPoolAsync_v11020_params>(d);
      *call = {succeeded ? Addr(*p.ptr) : 0, p.size, MemKind::kPool, p.stream};
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020: {
      const auto& p = Params<cudaMallocHost_v3020_params>(d);
      *call = {succeeded ? Addr(*p.ptr) : 0, p.size, MemKind::kPinnedHost, nullptr};
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020: {
      const auto& p = Params<cudaHostAlloc_v3020_params>(d);
      *call = {succeeded ? Addr(*p.pHost) : 0, p.size, MemKind::kPinnedHost, nullptr};
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaHostRegister_v4000: {
      const auto& p = Params<cudaHostRegister_v4000_params>(d);
      *call = {succeeded ? Addr(p.ptr) : 0, p.size, MemKind::kRegisteredHost, nullptr};
      return true;
    }
    default:
      return false;
  }
}

// Same for driver allocation calls (VMM mappings included).
bool ParseDriverAlloc(CUpti_CallbackId cbid, const CUpti_CallbackData* d, bool succeeded,
                      AllocCall* call) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
      const auto& p = Params<cuMemAlloc_v2_params>(d);
      *call = {succeeded ? *p.dptr : 0, p.bytesize, MemKind::kDevice, nullptr};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
      const auto& p = Params<cuMemAllocPitch_v2_params>(d);
      *call = {succeeded ? *p.dptr : 0, (succeeded ? *p.pPitch : p.WidthInBytes) * p.Height,
               MemKind::kDevice, nullptr};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
      const auto& p = Params<cuMemAllocManaged_params>(d);
      *call = {succeeded ? *p.dptr : 0, p.bytesize, MemKind::kManaged, nullptr};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
      const auto& p = Params<cuMemAllocAsync_params>(d);
      *call = {succeeded ? *p.dptr : 0, p.bytesize, MemKind::kPool, p.hStream};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
      const auto& p = Params<cuMemAllocFromPoolAsync_params>(d);
      *call = {succeeded ? *p.dptr : 0, p.bytesize, MemKind::kPool, p.hStream};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
      const auto& p = Params<cuMemAllocHost_v2_params>(d);
      *call = {succeeded ? Addr(*p.pp) : 0, p.bytesize, MemKind::kPinnedHost, nullptr};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
      const auto& p = Params<cuMemHostAlloc_params>(d);
      *call = {succeeded ? Addr(*p.pp) : 0, p.bytesize, MemKind::kPinnedHost, nullptr};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2: {
      const auto& p = Params<cuMemHostRegister_v2_params>(d);
      *call = {succeeded ? Addr(p.p) : 0, p.bytesize, MemKind::kRegisteredHost, nullptr};
      return true;
    }
    // VMM: a physical handle (cuMemCreate) is not memory the program can reach
    // until it is mapped; the mapping is what counts as device memory.
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      const auto& p = Params<cuMemMap_params>(d);
      *call = {succeeded ? p.ptr : 0, p.size, MemKind::kVmm, nullptr};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      // Physical memory is what runs out: a failed cuMemCreate is the VMM OOM.
      const auto& p = Params<cuMemCreate_params>(d);
      *call = {0, p.size, MemKind::kVmm, nullptr};
      return true;
    }
    default:
      return false;
  }
}

void Free(uint64_t address) {
  if (address != 0) g_hooks.tracker->OnFree(address);  // cudaFree(0) is a no-op idiom
}

CopyCall MakeCopy(uint64_t bytes, CopyKind kind, bool async) {
  CopyCall call;
  call.bytes = bytes;
  call.kind = kind;
  call.async = async;
  return call;
}

CopyKind OrDefault(cudaMemcpyKind kind, CopyKind fallback) {
  return kind == cudaMemcpyDefault ? fallback : FromRuntimeKind(kind);
}

// Reads the request of a runtime copy call (valid at ENTER and EXIT).
bool ParseRuntimeCopy(CUpti_CallbackId cbid, const CUpti_CallbackData* d, CopyCall* call) {
  // NOLINTBEGIN(bugprone-branch-clone): one case per API keeps the table readable
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000: {
      const auto& p = Params<cudaMemcpy_v3020_params>(d);
      *call = MakeCopy(p.count, FromRuntimeKind(p.kind), false);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000: {
      const auto& p = Params<cudaMemcpyAsync_v3020_params>(d);
      *call = MakeCopy(p.count, FromRuntimeKind(p.kind), true);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_ptds_v7000: {
      const auto& p = Params<cudaMemcpy2D_v3020_params>(d);
      *call = MakeCopy(p.width * p.height, FromRuntimeKind(p.kind), false);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000: {
      const auto& p = Params<cudaMemcpy2DAsync_v3020_params>(d);
      *call = MakeCopy(p.width * p.height, FromRuntimeKind(p.kind), true);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_ptds_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_ptsz_v7000: {
      // The 3D and 3DAsync params structs have the same leading member.
      const cudaMemcpy3DParms* p = Params<cudaMemcpy3D_v3020_params>(d).p;
      if (p == nullptr) return false;
      const bool async = cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_v3020 ||
                         cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_ptsz_v7000;
      *call = MakeCopy(p->extent.width * p->extent.height * p->extent.depth,
                       FromRuntimeKind(p->kind), async);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000:
      *call = MakeCopy(Params<cudaMemcpyPeer_v4000_params>(d).count, CopyKind::kPeer, false);
      return true;
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000:
      *call = MakeCopy(Params<cudaMemcpyPeerAsync_v4000_params>(d).count, CopyKind::kPeer, true);
      return true;
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_ptds_v7000: {
      const auto& p = Params<cudaMemcpyToSymbol_v3020_params>(d);
      *call = MakeCopy(p.count, OrDefault(p.kind, CopyKind::kHostToDevice), false);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_ptds_v7000: {
      const auto& p = Params<cudaMemcpyFromSymbol_v3020_params>(d);
      *call = MakeCopy(p.count, OrDefault(p.kind, CopyKind::kDeviceToHost), false);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_ptsz_v7000: {
      const auto& p = Params<cudaMemcpyToSymbolAsync_v3020_params>(d);
      *call = MakeCopy(p.count, OrDefault(p.kind, CopyKind::kHostToDevice), true);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_ptsz_v7000: {
      const auto& p = Params<cudaMemcpyFromSymbolAsync_v3020_params>(d);
      *call = MakeCopy(p.count, OrDefault(p.kind, CopyKind::kDeviceToHost), true);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v13000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v13000: {
      const auto& p = Params<cudaMemcpyBatchAsync_v13000_params>(d);
      uint64_t bytes = 0;
      for (size_t i = 0; p.sizes != nullptr && i < p.count; ++i) bytes += p.sizes[i];
      *call = MakeCopy(bytes, CopyKind::kUnknown, true);
      call->records = static_cast<uint32_t>(p.count);
      return p.count > 0;
    }
    default:
      return false;
  }
  // NOLINTEND(bugprone-branch-clone)
}

// Same for driver copy calls.
bool ParseDriverCopy(CUpti_CallbackId cbid, const CUpti_CallbackData* d, CopyCall* call) {
  // NOLINTBEGIN(bugprone-branch-clone)
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds:
      *call = MakeCopy(Params<cuMemcpyHtoD_v2_params>(d).ByteCount, CopyKind::kHostToDevice, false);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz:
      *call =
          MakeCopy(Params<cuMemcpyHtoDAsync_v2_params>(d).ByteCount, CopyKind::kHostToDevice, true);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds:
      *call = MakeCopy(Params<cuMemcpyDtoH_v2_params>(d).ByteCount, CopyKind::kDeviceToHost, false);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz:
      *call =
          MakeCopy(Params<cuMemcpyDtoHAsync_v2_params>(d).ByteCount, CopyKind::kDeviceToHost, true);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2_ptds:
      *call =
          MakeCopy(Params<cuMemcpyDtoD_v2_params>(d).ByteCount, CopyKind::kDeviceToDevice, false);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz:
      *call = MakeCopy(Params<cuMemcpyDtoDAsync_v2_params>(d).ByteCount, CopyKind::kDeviceToDevice,
                       true);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds:
      *call = MakeCopy(Params<cuMemcpy_params>(d).ByteCount, CopyKind::kUnknown, false);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz:
      *call = MakeCopy(Params<cuMemcpyAsync_params>(d).ByteCount, CopyKind::kUnknown, true);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds:
      *call = MakeCopy(Params<cuMemcpyPeer_params>(d).ByteCount, CopyKind::kPeer, false);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz:
      *call = MakeCopy(Params<cuMemcpyPeerAsync_params>(d).ByteCount, CopyKind::kPeer, true);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2_ptsz: {
      const auto& p = Params<cuMemcpyBatchAsync_v2_params>(d);
      uint64_t bytes = 0;
      for (size_t i = 0; p.sizes != nullptr && i < p.count; ++i) bytes += p.sizes[i];
      *call = MakeCopy(bytes, CopyKind::kUnknown, true);
      call->records = static_cast<uint32_t>(p.count);
      return p.count > 0;
    }
    default:
      return false;
  }
  // NOLINTEND(bugprone-branch-clone)
}

// A copy call is registered at ENTER, before the copy can complete, so that
// its activity record always finds it; its stack is captured then too.
void CopyEnter(CopyCall call, const CUpti_CallbackData* d) {
  if (g_hooks.transfers == nullptr || g_hooks.tracker->paused()) return;
  call.correlation = d->correlationId;
  call.stack_id = CaptureSite();
  g_hooks.transfers->OnCopyCall(call, g_hooks.copy_activity);
}

void CopyExit(const CopyCall& call, const CUpti_CallbackData* d, bool succeeded) {
  if (succeeded) {
    g_hooks.tracker->OnCopy(CopyEvent{call.bytes, call.kind, call.async});
  } else if (g_hooks.transfers != nullptr) {
    g_hooks.transfers->OnCopyFailed(d->correlationId);
  }
}

void Launch(const char* name) {
  if (g_hooks.tracker->paused()) return;
  g_hooks.tracker->OnLaunch();
  if (g_hooks.kernels != nullptr) g_hooks.kernels->OnLaunch(name);
}

constexpr const char kGraphLaunch[] = "(graph launch)";

// Where the host blocks: which kind of wait a callback id is, if any.
bool RuntimeSyncKind(CUpti_CallbackId cbid, SyncKind* kind) {
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020:
      *kind = SyncKind::kDevice;
      return true;
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000:
      *kind = SyncKind::kStream;
      return true;
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020:
      *kind = SyncKind::kEvent;
      return true;
    default:
      return false;
  }
}

bool DriverSyncKind(CUpti_CallbackId cbid, SyncKind* kind) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2:
      *kind = SyncKind::kDevice;
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz:
      *kind = SyncKind::kStream;
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize:
      *kind = SyncKind::kEvent;
      return true;
    default:
      return false;
  }
}

// Start of the outermost blocking call on this thread, 0 when none.
thread_local uint64_t t_block_start __attribute__((tls_model("initial-exec"))) = 0;

// The first CUDA call: start of the initialisation latency.
void FirstCall() {
  if (g_hooks.lifecycle == nullptr ||
      g_hooks.lifecycle->first_call_ns.load(std::memory_order_relaxed) != 0) {
    return;
  }
  g_hooks.lifecycle->FirstCall(g_hooks.tracker->NowNs());
  if (g_hooks.on_first_call != nullptr) g_hooks.on_first_call();
}

void BlockEnter() {
  if (g_hooks.lifecycle != nullptr && t_block_start == 0) t_block_start = g_hooks.tracker->NowNs();
}

void BlockExit(SyncKind kind) {
  if (g_hooks.lifecycle == nullptr || t_block_start == 0) return;
  g_hooks.lifecycle->Blocked(kind, g_hooks.tracker->NowNs() - t_block_start);
  t_block_start = 0;
}

// Runtime API exit, successful calls that are neither allocations nor copies.
void OnRuntimeExit(CUpti_CallbackId cbid, const CUpti_CallbackData* d) {
  // NOLINTBEGIN(bugprone-branch-clone): one case per API keeps the table readable
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020:
      Free(Addr(Params<cudaFree_v3020_params>(d).devPtr));
      break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020:
      Free(Addr(Params<cudaFreeAsync_v11020_params>(d).devPtr));
      break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020:
      Free(Addr(Params<cudaFreeHost_v3020_params>(d).ptr));
      break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaHostUnregister_v4000:
      Free(Addr(Params<cudaHostUnregister_v4000_params>(d).ptr));
      break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
    case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000:
    case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
      Launch(d->symbolName);
      break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000:
      Launch(kGraphLaunch);
      break;
    default:
      break;
  }
  // NOLINTEND(bugprone-branch-clone)
}

// Driver API exit, successful calls not nested in a runtime call that are
// neither allocations nor copies.
void OnDriverExit(CUpti_CallbackId cbid, const CUpti_CallbackData* d) {
  // NOLINTBEGIN(bugprone-branch-clone)
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
      Free(Params<cuMemFree_v2_params>(d).dptr);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
      Free(Params<cuMemFreeAsync_params>(d).dptr);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
      Free(Addr(Params<cuMemFreeHost_params>(d).p));
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister:
      Free(Addr(Params<cuMemHostUnregister_params>(d).p));
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
      const auto& p = Params<cuMemUnmap_params>(d);
      g_hooks.tracker->OnUnmapRange(p.ptr, p.size);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      Launch(d->symbolName);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
      Launch(kGraphLaunch);
      break;
    default:
      break;
  }
  // NOLINTEND(bugprone-branch-clone)
}

void OnRuntime(CUpti_CallbackId cbid, const CUpti_CallbackData* d) {
  CopyCall copy;
  SyncKind sync = SyncKind::kDevice;
  if (d->callbackSite == CUPTI_API_ENTER) {
    if (++t_runtime_depth == 1) FirstCall();
    if (ParseRuntimeCopy(cbid, d, &copy)) {
      CopyEnter(copy, d);
      if (!copy.async) BlockEnter();
    } else if (RuntimeSyncKind(cbid, &sync)) {
      BlockEnter();
    }
    return;
  }
  // With injection the first runtime call can deliver EXIT without ENTER.
  if (t_runtime_depth > 0) --t_runtime_depth;
  const auto* ret = static_cast<const cudaError_t*>(d->functionReturnValue);
  if (ret == nullptr) return;
  AllocCall call;
  if (ParseRuntimeAlloc(cbid, d, *ret == cudaSuccess, &call)) {
    if (*ret == cudaSuccess) {
      Alloc(call, d);
    } else if (*ret == cudaErrorMemoryAllocation) {
      OutOfMemory(call, d, *ret);
    }
  } else if (ParseRuntimeCopy(cbid, d, &copy)) {
    if (!copy.async) BlockExit(SyncKind::kCopy);
    CopyExit(copy, d, *ret == cudaSuccess);
  } else if (RuntimeSyncKind(cbid, &sync)) {
    BlockExit(sync);
  } else if (*ret == cudaSuccess) {
    OnRuntimeExit(cbid, d);
  }
}

void OnDriver(CUpti_CallbackId cbid, const CUpti_CallbackData* d) {
  // Calls nested in a runtime call are the runtime's business.
  if (t_runtime_depth > 0) return;
  CopyCall copy;
  SyncKind sync = SyncKind::kDevice;
  if (d->callbackSite == CUPTI_API_ENTER) {
    FirstCall();
    if (ParseDriverCopy(cbid, d, &copy)) {
      CopyEnter(copy, d);
      if (!copy.async) BlockEnter();
    } else if (DriverSyncKind(cbid, &sync)) {
      BlockEnter();
    }
    return;
  }
  const auto* ret = static_cast<const CUresult*>(d->functionReturnValue);
  if (ret == nullptr) return;
  AllocCall call;
  if (ParseDriverAlloc(cbid, d, *ret == CUDA_SUCCESS, &call)) {
    if (*ret == CUDA_SUCCESS) {
      Alloc(call, d);
    } else if (*ret == CUDA_ERROR_OUT_OF_MEMORY) {
      OutOfMemory(call, d, *ret);
    }
  } else if (ParseDriverCopy(cbid, d, &copy)) {
    if (!copy.async) BlockExit(SyncKind::kCopy);
    CopyExit(copy, d, *ret == CUDA_SUCCESS);
  } else if (DriverSyncKind(cbid, &sync)) {
    BlockExit(sync);
  } else if (*ret == CUDA_SUCCESS) {
    OnDriverExit(cbid, d);
  }
}

}  // namespace

void SetCallbackHooks(const CallbackHooks& hooks) { g_hooks = hooks; }

bool EnableCallbacks(const CuptiApi& api, CUpti_SubscriberHandle subscriber, std::string* error) {
  struct Entry {
    CUpti_CallbackDomain domain;
    CUpti_CallbackId cbid;
  };
  static constexpr Entry kEntries[] = {
#define GPUWATCH_RT(name) {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##name},
#define GPUWATCH_DRV(name) {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##name},
      GPUWATCH_RUNTIME_CBIDS(GPUWATCH_RT) GPUWATCH_DRIVER_CBIDS(GPUWATCH_DRV)
#undef GPUWATCH_RT
#undef GPUWATCH_DRV
          {CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED},
      {CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING},
  };
  for (const Entry& e : kEntries) {
    const CUptiResult r = api.EnableCallback(1, subscriber, e.domain, e.cbid);
    if (r != CUPTI_SUCCESS) {
      const char* text = nullptr;
      api.GetResultString(r, &text);
      *error = "cuptiEnableCallback(domain " + std::to_string(e.domain) + ", id " +
               std::to_string(e.cbid) + ") failed: " + (text != nullptr ? text : "?");
      return false;
    }
  }
  return true;
}

void CUPTIAPI OnCuptiCallback(void* /*userdata*/, CUpti_CallbackDomain domain,
                              CUpti_CallbackId cbid, const void* data) {
  if (g_hooks.tracker == nullptr || data == nullptr) return;
  switch (domain) {
    case CUPTI_CB_DOMAIN_RUNTIME_API:
      OnRuntime(cbid, static_cast<const CUpti_CallbackData*>(data));
      return;
    case CUPTI_CB_DOMAIN_DRIVER_API:
      OnDriver(cbid, static_cast<const CUpti_CallbackData*>(data));
      return;
    case CUPTI_CB_DOMAIN_RESOURCE:
      if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
        // The CUDA libraries of this context are loaded by now (a runtime
        // loaded after gpuwatch attached, or loaded again after a dlclose).
        if (g_hooks.stacks != nullptr) RefreshToolModules();
        if (g_hooks.lifecycle != nullptr) g_hooks.lifecycle->ContextReady(g_hooks.tracker->NowNs());
      } else if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING &&
                 g_hooks.on_context_destroy != nullptr) {
        g_hooks.on_context_destroy();
      }
      return;
    default:
      return;
  }
}

}  // namespace gpuwatch
