// Shared state of the fake CUPTI: its link to the fake driver and the activity buffers.
#ifndef GWSIM_CUPTI_INTERNAL_H_
#define GWSIM_CUPTI_INTERNAL_H_

#include <cupti.h>

#include <cstddef>
#include <cstdint>

#include "gwsim_abi.h"

#define GWSIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace gwsim::cupti {

// The fake driver, found with dlopen("libcuda.so.1") on first use (as the real CUPTI does).
struct DriverLink {
  bool present = false;  // a simulator driver was found and is not in GWSIM_FAIL=no-driver
  uint32_t fail_mode = GWSIM_FAIL_NONE;
  uint32_t cupti_version = CUPTI_API_VERSION;  // GWSIM_CUPTI_VERSION
  gwsim_now_ns_fn now_ns = nullptr;
  gwsim_context_ids_fn context_ids = nullptr;
  gwsim_stream_id_fn stream_id = nullptr;
};
// Connects once (registering this library's hooks with the driver) and returns the link.
const DriverLink& Link();

// Activity API, implemented in activity.cc.
int ActivityKindEnabled(CUpti_ActivityKind kind);
void ActivityRecord(const CUpti_Activity* record, size_t size);
// At a runtime or driver call's ENTER: one EXTERNAL_CORRELATION record per kind of external id
// the calling thread has pushed (cuptiActivityPushExternalCorrelationId), tying its innermost
// id to the call's correlation id, when that kind of record is enabled.
void ActivityExternalCorrelation(uint32_t correlation_id);
void ActivityDisableAll();

// Callback names (generated from cupti_*_cbid.h and cupti_result.h at configure time).
const char* RuntimeCallbackName(uint32_t cbid);
const char* DriverCallbackName(uint32_t cbid);
const char* ResultName(CUptiResult result);

}  // namespace gwsim::cupti

#endif  // GWSIM_CUPTI_INTERNAL_H_
