// CUDA arrays in the fake runtime (api_array.cc): what the copies in api_copy.cc need.
#ifndef GWSIM_RUNTIME_ARRAY_H_
#define GWSIM_RUNTIME_ARRAY_H_

#include "runtime/cuda_headers.h"

namespace gwsim::rt {

// The driver descriptor of a cudaMemcpy3DParms, CUDA arrays included (positions and the
// extent's width count an array's elements; bytes for pointers).
cudaError_t ToDriver3D(const cudaMemcpy3DParms* p, CUDA_MEMCPY3D* out);

// The memory type a cudaMemcpyKind implies on each side; false for a kind that is not one.
bool MemoryTypes(cudaMemcpyKind kind, CUmemorytype* src, CUmemorytype* dst);

}  // namespace gwsim::rt

#endif  // GWSIM_RUNTIME_ARRAY_H_
