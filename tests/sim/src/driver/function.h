// Per-kernel attributes (cuFuncGetAttribute / cuFuncSetAttribute) and the occupancy model of a
// compute capability 9.0 device (api_misc.cc; README "Kernels").
#ifndef GWSIM_DRIVER_FUNCTION_H_
#define GWSIM_DRIVER_FUNCTION_H_

#include "driver/cuda_headers.h"
#include "driver/state.h"

namespace gwsim::drv {

// The dynamic shared memory a launch of f may use: 48 KiB unless
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES raised it.
int MaxDynamicShared(const CUfunc_st* f);

}  // namespace gwsim::drv

#endif  // GWSIM_DRIVER_FUNCTION_H_
