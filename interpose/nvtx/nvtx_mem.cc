// NVTX's memory extension, tool side: a pool allocator declares its segments
// as heaps (nvtxMemHeapRegister) and the blocks it hands out as regions
// (nvtxMemRegionsRegister, ...); gpuwatch keeps the regions that are still
// registered, with the stack and phase that registered each, in the
// recording's RegionTable (libgpuwatch/record/regions.h), through the
// Session's event API, with the chained tool's region handles, if any (a
// region is registered only once a Session records, so all of this state is
// the Session's).
//
// NVTX loads extensions through their own entry point,
// InitializeInjectionNvtxExtension, from the library NVTX_INJECTION64_PATH
// names, once per module (the memory module of each NVTX instance). Taken:
// heap registration, unregistration and reset, region registration, resize
// and unregistration, for virtual-address heaps and regions (the only type
// the extension defines). Naming and permissions stay the chained tool's, or
// no-ops.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExtMem.h>

#include <pthread.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "interpose/callbacks/callbacks.h"
#include "interpose/callbacks/current_session.h"
#include "interpose/callbacks/guard.h"
#include "interpose/nvtx/nvtx.h"
#include "libgpuwatch/session/events.h"
#include "libgpuwatch/session/session.h"

namespace gpuwatch {

namespace {

// The slots gpuwatch takes, by their index in the memory module's segment.
enum MemSlot : uint8_t {
  kHeapRegister,
  kHeapUnregister,
  kHeapReset,
  kRegionsRegister,
  kRegionsResize,
  kRegionsUnregister,
  kNumMemSlots
};
constexpr std::array<size_t, kNumMemSlots> kSlotIds = {
    NVTX3EXT_CBID_nvtxMemHeapRegister,  NVTX3EXT_CBID_nvtxMemHeapUnregister,
    NVTX3EXT_CBID_nvtxMemHeapReset,     NVTX3EXT_CBID_nvtxMemRegionsRegister,
    NVTX3EXT_CBID_nvtxMemRegionsResize, NVTX3EXT_CBID_nvtxMemRegionsUnregister,
};

// The chained tool's function per slot (0: none), set by the first module
// to initialize.
std::array<std::atomic<intptr_t>, kNumMemSlots> g_next{};

template <typename Fn>
Fn Next(MemSlot slot) {
  // NOLINTNEXTLINE(performance-no-int-to-ptr): a function NVTX stored as an integer
  return reinterpret_cast<Fn>(g_next[slot].load(std::memory_order_acquire));
}

uint64_t Address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// NVTX's "no tool" handles (its macros cast an integer in a way C++ refuses).
// NOLINTBEGIN(performance-no-int-to-ptr): opaque handles, never dereferenced
const auto kNoHeap = reinterpret_cast<nvtxMemHeapHandle_t>(intptr_t{-1});
const auto kNoRegion = reinterpret_cast<nvtxMemRegionHandle_t>(intptr_t{-1});
// NOLINTEND(performance-no-int-to-ptr)

// The event API to the recording regions go to, or none while gpuwatch is
// not recording (before attach, after a failed one, paused: nothing new is
// registered).
std::optional<Events> Active(bool registering) {
  Session* session = CurrentSession();
  if (session == nullptr) return std::nullopt;
  Events events = session->events();
  if (registering && !events.enabled()) return std::nullopt;
  return events;
}

// A batch's descriptors are `element_size` apart, and a descriptor is read
// only when that stride covers it (a newer NVTX may make them longer).
template <typename T>
const T* ElementAt(const void* base, size_t element_size, size_t i) {
  if (base == nullptr || element_size < sizeof(T)) return nullptr;
  return reinterpret_cast<const T*>(static_cast<const char*>(base) + i * element_size);
}

nvtxMemHeapHandle_t NVTX_API HeapRegister(nvtxDomainHandle_t domain,
                                          const nvtxMemHeapDesc_t* desc) {
  const auto next =
      Next<nvtxMemHeapHandle_t(NVTX_API*)(nvtxDomainHandle_t, const nvtxMemHeapDesc_t*)>(
          kHeapRegister);
  nvtxMemHeapHandle_t handle = next != nullptr ? next(domain, desc) : nullptr;
  const bool virtual_range = desc != nullptr && desc->type == NVTX_MEM_TYPE_VIRTUAL_ADDRESS &&
                             desc->typeSpecificDesc != nullptr &&
                             desc->typeSpecificDescSize >= sizeof(nvtxMemVirtualRangeDesc_t);
  if (!virtual_range) return handle != nullptr ? handle : kNoHeap;
  const auto* range = static_cast<const nvtxMemVirtualRangeDesc_t*>(desc->typeSpecificDesc);
  // A heap of virtual memory is named by its address (NVTX's rule), unless
  // the chained tool answered with a handle of its own.
  if (handle == nullptr || handle == kNoHeap) {
    handle = static_cast<nvtxMemHeapHandle_t>(const_cast<void*>(range->ptr));
  }
  if (std::optional<Events> events = Active(true)) {
    const ScopedInsideGpuwatch inside;
    events->HeapRegistered(
        {Address(handle), Address(range->ptr), range->size, CaptureSiteNow(), events->NowMs()});
  }
  return handle;
}

void NVTX_API HeapUnregister(nvtxDomainHandle_t domain, nvtxMemHeapHandle_t heap) {
  if (std::optional<Events> events = Active(false)) events->HeapUnregistered(Address(heap));
  const auto next = Next<void(NVTX_API*)(nvtxDomainHandle_t, nvtxMemHeapHandle_t)>(kHeapUnregister);
  if (next != nullptr) next(domain, heap);
}

void NVTX_API HeapReset(nvtxDomainHandle_t domain, nvtxMemHeapHandle_t heap) {
  if (std::optional<Events> events = Active(false)) events->HeapReset(Address(heap));
  const auto next = Next<void(NVTX_API*)(nvtxDomainHandle_t, nvtxMemHeapHandle_t)>(kHeapReset);
  if (next != nullptr) next(domain, heap);
}

void NVTX_API RegionsRegister(nvtxDomainHandle_t domain, const nvtxMemRegionsRegisterBatch_t* b) {
  const bool ours = b != nullptr && b->regionType == NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  std::optional<Events> events = ours ? Active(true) : std::nullopt;
  if (events) {
    const ScopedInsideGpuwatch inside;
    PoolRegion region;
    region.heap = Address(b->heap);
    region.stack_id = CaptureSiteNow();  // once per batch: one call site
    region.time_ms = events->NowMs();
    region.phase = static_cast<uint16_t>(CurrentPhase());
    for (size_t i = 0; i < b->regionCount; ++i) {
      const auto* d =
          ElementAt<nvtxMemVirtualRangeDesc_t>(b->regionDescElements, b->regionDescElementSize, i);
      if (d == nullptr) break;
      region.address = Address(d->ptr);
      region.size = d->size;
      events->RegionRegistered(region);
    }
  }
  const auto next = Next<void(NVTX_API*)(nvtxDomainHandle_t, const nvtxMemRegionsRegisterBatch_t*)>(
      kRegionsRegister);
  if (next != nullptr) next(domain, b);
  if (!ours || b->regionHandleElementsOut == nullptr) return;
  for (size_t i = 0; i < b->regionCount; ++i) {
    const auto* d =
        ElementAt<nvtxMemVirtualRangeDesc_t>(b->regionDescElements, b->regionDescElementSize, i);
    if (next != nullptr) {
      if (events && d != nullptr)
        events->RegionHandleMade(Address(b->regionHandleElementsOut[i]), Address(d->ptr));
      continue;
    }
    // gpuwatch's own handle of a virtual-memory region is its address:
    // references by handle and by pointer then name the same region.
    b->regionHandleElementsOut[i] =
        d != nullptr ? static_cast<nvtxMemRegionHandle_t>(const_cast<void*>(d->ptr)) : kNoRegion;
  }
}

void NVTX_API RegionsResize(nvtxDomainHandle_t domain, const nvtxMemRegionsResizeBatch_t* b) {
  std::optional<Events> events =
      b != nullptr && b->regionType == NVTX_MEM_TYPE_VIRTUAL_ADDRESS ? Active(false) : std::nullopt;
  for (size_t i = 0; events && i < b->regionDescCount; ++i) {
    const auto* d =
        ElementAt<nvtxMemVirtualRangeDesc_t>(b->regionDescElements, b->regionDescElementSize, i);
    if (d == nullptr) break;
    events->RegionResized(Address(d->ptr), d->size);
  }
  const auto next =
      Next<void(NVTX_API*)(nvtxDomainHandle_t, const nvtxMemRegionsResizeBatch_t*)>(kRegionsResize);
  if (next != nullptr) next(domain, b);
}

void NVTX_API RegionsUnregister(nvtxDomainHandle_t domain,
                                const nvtxMemRegionsUnregisterBatch_t* b) {
  // A handle is the region's address, unless a chained tool made it (then
  // the recording's region table knows the address: RegionHandleMade).
  const bool known_type = b != nullptr && (b->refType == NVTX_MEM_REGION_REF_TYPE_POINTER ||
                                           b->refType == NVTX_MEM_REGION_REF_TYPE_HANDLE);
  const bool their_handles = known_type && b->refType == NVTX_MEM_REGION_REF_TYPE_HANDLE &&
                             g_next[kRegionsRegister].load(std::memory_order_acquire) != 0;
  std::optional<Events> events = known_type ? Active(false) : std::nullopt;
  for (size_t i = 0; events && i < b->refCount; ++i) {
    const auto* ref = ElementAt<nvtxMemRegionRef_t>(b->refElements, b->refElementSize, i);
    if (ref == nullptr) break;
    if (their_handles) {
      events->RegionUnregisteredByHandle(Address(ref->pointer));
    } else {
      events->RegionUnregistered(Address(ref->pointer));
    }
  }
  const auto next =
      Next<void(NVTX_API*)(nvtxDomainHandle_t, const nvtxMemRegionsUnregisterBatch_t*)>(
          kRegionsUnregister);
  if (next != nullptr) next(domain, b);
}

template <typename Fn>
intptr_t Slot(Fn fn) {
  return reinterpret_cast<intptr_t>(fn);
}

// The memory module's segment of function slots; null when `info` is
// another module, an incompatible version, or too short.
nvtxExtModuleSegment_t* MemorySegment(nvtxExtModuleInfo_t* info) {
  if (info == nullptr || info->moduleId != NVTX_EXT_MODULEID_MEM ||
      info->compatId < NVTX_EXT_COMPATID_MEM || info->segments == nullptr) {
    return nullptr;
  }
  for (size_t s = 0; s < info->segmentsCount; ++s) {
    nvtxExtModuleSegment_t* segment = info->segments + s;
    if (segment->segmentId == 1 && segment->functionSlots != nullptr &&
        segment->slotCount > NVTX3EXT_CBID_nvtxMemRegionsUnregister) {
      return segment;
    }
  }
  return nullptr;
}

using ExtensionEntry = int(NVTX_API*)(nvtxExtModuleInfo_t*);

ExtensionEntry ChainedExtensionEntry() {
  static const auto entry =
      reinterpret_cast<ExtensionEntry>(ChainedNvtxSymbol("InitializeInjectionNvtxExtension"));
  return entry;
}

}  // namespace

int InitializeNvtxExtension(void* module_info) {
  auto* info = static_cast<nvtxExtModuleInfo_t*>(module_info);
  nvtxExtModuleSegment_t* segment = MemorySegment(info);
  int chained = 0;
  if (const ExtensionEntry entry = ChainedExtensionEntry()) {
    std::array<intptr_t, kNumMemSlots> before{};
    for (size_t i = 0; segment != nullptr && i < kNumMemSlots; ++i) {
      before[i] = segment->functionSlots[kSlotIds[i]];
    }
    chained = entry(info);
    for (size_t i = 0; segment != nullptr && chained != 0 && i < kNumMemSlots; ++i) {
      const intptr_t theirs = segment->functionSlots[kSlotIds[i]];
      if (theirs == before[i] || theirs == 0) continue;
      intptr_t none = 0;
      g_next[i].compare_exchange_strong(none, theirs, std::memory_order_acq_rel);
    }
  }
  if (segment == nullptr) return chained;
  const std::array<intptr_t, kNumMemSlots> ours = {
      Slot(&HeapRegister),    Slot(&HeapUnregister), Slot(&HeapReset),
      Slot(&RegionsRegister), Slot(&RegionsResize),  Slot(&RegionsUnregister),
  };
  for (size_t i = 0; i < kNumMemSlots; ++i) segment->functionSlots[kSlotIds[i]] = ours[i];
  return 1;
}

int InitializeNvtxExtensionChainOnly(void* module_info) {
  const ExtensionEntry entry = ChainedExtensionEntry();
  return entry != nullptr ? entry(static_cast<nvtxExtModuleInfo_t*>(module_info)) : 0;
}

}  // namespace gpuwatch
