// Name tables for cuptiGetCallbackName and cuptiGetResultString.
#include <cstdint>

#include "cupti/internal.h"

namespace gwsim::cupti {
namespace {

struct NameEntry {
  uint32_t id;
  const char* name;
};

#include "gwsim_cupti_names.inc"  // generated: kRuntimeNames, kDriverNames, kResultNames

template <size_t N>
const char* Find(const NameEntry (&table)[N], uint32_t id) {
  for (const NameEntry& e : table) {
    if (e.id == id) return e.name;
  }
  return nullptr;
}

}  // namespace

const char* RuntimeCallbackName(uint32_t cbid) { return Find(kRuntimeNames, cbid); }
const char* DriverCallbackName(uint32_t cbid) { return Find(kDriverNames, cbid); }
const char* ResultName(CUptiResult result) {
  return Find(kResultNames, static_cast<uint32_t>(result));
}

}  // namespace gwsim::cupti
