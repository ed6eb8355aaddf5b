// The frame the driver's and the runtime's tracers fill for one API call (gwsim_abi.h).
#ifndef GWSIM_COMMON_API_FRAME_H_
#define GWSIM_COMMON_API_FRAME_H_

#include <cstdint>
#include <type_traits>

#include "gwsim_abi.h"

namespace gwsim {

// A frame for gwsim_api_enter: domain..symbol_name set, params left null for a call traced
// without parameters (Params = the tracer's NoParams).
template <typename NoParams, typename Params>
gwsim_api_frame ApiFrame(CUpti_CallbackDomain domain, uint32_t cbid, const char* name,
                         const Params& params, const char* symbol) {
  gwsim_api_frame frame{};
  frame.domain = domain;
  frame.cbid = cbid;
  frame.function_name = name;
  if constexpr (!std::is_same_v<Params, NoParams>) frame.params = &params;
  frame.symbol_name = symbol;
  return frame;
}

}  // namespace gwsim

// (a, b, c) -> a, b, c: a parenthesised macro argument with commas, unwrapped.
#define GWSIM_UNPAREN(...) __VA_ARGS__

#endif  // GWSIM_COMMON_API_FRAME_H_
