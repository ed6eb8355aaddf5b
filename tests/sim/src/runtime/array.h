// CUDA arrays in the fake runtime (api_array.cc): what the copies in api_copy.cc need.
#ifndef GWSIM_RUNTIME_ARRAY_H_
#define GWSIM_RUNTIME_ARRAY_H_

#include "runtime/core.h"  // GWSIM_RT_PER_THREAD_TWINS
#include "runtime/cuda_headers.h"

namespace gwsim::rt {

// The driver descriptor of a cudaMemcpy3DParms, CUDA arrays included (positions and the
// extent's width count an array's elements; bytes for pointers).
cudaError_t ToDriver3D(const cudaMemcpy3DParms* p, CUDA_MEMCPY3D* out);

// The memory type a cudaMemcpyKind implies on each side; false for a kind that is not one.
bool MemoryTypes(cudaMemcpyKind kind, CUmemorytype* src, CUmemorytype* dst);

// Defines the 3D copy `name` of a `params` struct and its async form `async_name`, each with its
// per-thread twin (`name`_ptds, `async_name`_ptsz, of v7000): they run `impl(p, async, stream,
// per_thread)`.
#define GWSIM_RT_COPY_3D(name, async_name, version, params, impl)                             \
  GWSIM_RT_PER_THREAD_TWINS(name, version, name##_ptds, v7000, (const struct params* p), (p), \
                            { return impl(p, false, nullptr, per_thread); })                  \
  GWSIM_RT_PER_THREAD_TWINS(async_name, version, async_name##_ptsz, v7000,                    \
                            (const struct params* p, cudaStream_t stream), (p, stream),       \
                            { return impl(p, true, stream, per_thread); })

}  // namespace gwsim::rt

#endif  // GWSIM_RUNTIME_ARRAY_H_
