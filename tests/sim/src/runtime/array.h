// CUDA arrays in the fake runtime (api_array.cc): what cudaMemcpy3D (api_copy.cc) needs.
#ifndef GWSIM_RUNTIME_ARRAY_H_
#define GWSIM_RUNTIME_ARRAY_H_

#include "runtime/cuda_headers.h"

namespace gwsim::rt {

// The driver descriptor of a cudaMemcpy3DParms, CUDA arrays included (positions and the
// extent's width count an array's elements; bytes for pointers).
cudaError_t ToDriver3D(const cudaMemcpy3DParms* p, CUDA_MEMCPY3D* out);

}  // namespace gwsim::rt

#endif  // GWSIM_RUNTIME_ARRAY_H_
