// The fake driver's simulated state: devices, contexts, streams, events, pools, kernels,
// memory and the simulated clock.
//
// Everything here is created on first use and deliberately never destroyed, so that atexit
// handlers, late callbacks and other threads can still use it while the process exits.
#ifndef GWSIM_DRIVER_STATE_H_
#define GWSIM_DRIVER_STATE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/env.h"
#include "driver/cuda_headers.h"

// The opaque handle types of cuda.h, defined by the simulator.
struct CUctx_st {
  int device = 0;
  bool primary = false;
  unsigned flags = 0;
  std::atomic<uint32_t> uid{0};  // CUPTI contextId; a re-created primary context gets a new one
  std::atomic<bool> active{false};
  int primary_refcount = 0;  // guarded by Driver::mu
  CUstream_st* legacy_stream = nullptr;
};

struct CUstream_st {
  uint32_t id = 0;
  CUctx_st* ctx = nullptr;
  unsigned flags = 0;
  int priority = 0;
};

struct CUevent_st {
  CUctx_st* ctx = nullptr;
  unsigned flags = 0;
  std::atomic<uint64_t> time_ns{0};
  std::atomic<bool> recorded{false};
};

struct CUmemPoolHandle_st {
  int device = 0;
  bool is_default = false;
  uint64_t release_threshold = 0;
};

struct CUfunc_st {
  std::string name;
};

namespace gwsim::drv {

inline constexpr uint32_t kLegacyStreamId = 7;
inline constexpr size_t kAllocAlignment = 512;
inline constexpr size_t kVmmGranularity = 2u << 20;
inline constexpr int kDriverVersion = 13000;

// What the simulator knows of an address range.
enum class Origin : uint8_t {
  kDevice,      // cuMemAlloc / cuMemAllocPitch
  kAsync,       // cuMemAllocAsync / cuMemAllocFromPoolAsync
  kManaged,     // cuMemAllocManaged
  kHost,        // cuMemAllocHost / cuMemHostAlloc (pinned)
  kRegistered,  // cuMemHostRegister (pinned, memory owned by the caller)
  kVmm,         // a cuMemMap mapping
  kVariable,    // a __device__ variable's storage
  kArray,       // the storage of a CUDA array or mipmapped array (array.h)
  kGraph,       // the memory of a graph allocation node while a launch has it mapped (graph.h)
  kIpc,         // another process's cuMemAlloc memory, mapped by cuIpcOpenMemHandle (ipc.cc)
};

struct Allocation {
  uintptr_t base = 0;
  size_t size = 0;
  Origin origin = Origin::kDevice;
  uint8_t memory_kind = 0;  // CUpti_ActivityMemoryKind
  int device = 0;
  CUctx_st* ctx = nullptr;
  void* backing = nullptr;  // what to release; null when the caller owns the memory
  size_t backing_size = 0;
  bool mmapped = false;
  uint64_t charged = 0;  // bytes counted against the device capacity
  CUmemPoolHandle_st* pool = nullptr;
  uint32_t stream_id = 0;
  unsigned flags = 0;
  uint64_t buffer_id = 0;
  const char* name = nullptr;
  int ipc_fd = -1;  // kDevice: the memfd under it since its first IPC export (ipc.cc); -1: none
};

// Live address ranges, by base address. Thread-safe.
class MemoryTable {
 public:
  // Fails (returns false) when the range overlaps a known one.
  bool Insert(const Allocation& a);
  // The range containing p, if any.
  std::optional<Allocation> Find(uintptr_t p) const;
  // Whether [p, p+n) is fully covered by contiguous known ranges of device-side memory
  // (device, managed, VMM, variables).
  bool CoversDevice(uintptr_t p, size_t n) const;
  // Removes the range starting exactly at base, if `accept` agrees.
  template <typename Pred>
  std::optional<Allocation> RemoveIf(uintptr_t base, Pred accept) {
    std::unique_lock lock(mu_);
    auto it = map_.find(base);
    if (it == map_.end() || !accept(it->second)) return std::nullopt;
    Allocation a = it->second;
    map_.erase(it);
    return a;
  }
  // Bytes of the live allocations made from a pool.
  uint64_t PoolBytes(const CUmemPoolHandle_st* pool) const;
  // Removes and returns every range of a context.
  std::vector<Allocation> RemoveContext(CUctx_st* ctx);
  // Calls `change` on the range starting exactly at base; false when there is none.
  template <typename Change>
  bool Update(uintptr_t base, Change change) {
    std::unique_lock lock(mu_);
    auto it = map_.find(base);
    if (it == map_.end()) return false;
    change(it->second);
    return true;
  }

 private:
  mutable std::shared_mutex mu_;
  std::map<uintptr_t, Allocation> map_;
};

struct DeviceState {
  int ordinal = 0;
  int physical = 0;  // the node's device (CUDA_VISIBLE_DEVICES): its UUID and PCI bus id
  std::atomic<uint64_t> used{0};
  CUctx_st* primary = nullptr;
  CUmemPoolHandle_st* default_pool = nullptr;
  std::atomic<CUmemPoolHandle_st*> current_pool{nullptr};
};

// Virtual memory management (cuMemCreate & co., vmm.cc). A handle refers to physical memory (a
// memfd); a handle imported from an exported one refers to the same memory.
struct PhysicalMemory {
  int fd = -1;
  size_t size = 0;
  int device = 0;
  bool charged = false;  // made in this process (another process's import is not)
  int handles = 0;       // handles that refer to it and are not gone yet
  uint64_t inode = 0;    // the memfd's (st_dev, st_ino), to recognise its exported fds
  uint64_t file_device = 0;
};
struct Physical {
  uint64_t memory = 0;  // key in Driver::physical_memory
  int maps = 0;
  int refs = 1;  // the creating (or importing) call's, one per cuMemRetainAllocationHandle;
                 // each cuMemRelease drops one, and at 0 the handle is released
  unsigned handle_types = 0;  // what it may be exported as (CUmemAllocationHandleType bits)
};
struct Mapping {
  size_t size = 0;
  CUmemGenericAllocationHandle handle = 0;
};

// An IPC handle opened in this process (ipc.cc), by the address it is mapped at.
struct IpcOpening {
  uint32_t pid = 0;         // the exporter's
  uint64_t export_id = 0;   // the exported allocation's buffer id, in the exporter
  CUctx_st* ctx = nullptr;  // the context that opened it
  int refs = 0;             // opens not closed yet
  uint64_t buffer_id = 0;   // the mapping's own, in this process's MemoryTable
};

class Driver {
 public:
  Driver();

  SimConfig config;
  std::vector<DeviceState*> devices;
  MemoryTable memory;

  // Initialisation (cuInit).
  std::mutex init_mu;
  std::atomic<int> init_state{0};  // 0 not started, 1 running, 2 done
  std::atomic<uint64_t> init_owner{0};
  CUresult init_result = CUDA_ERROR_NOT_INITIALIZED;

  // Handle registries, for validation. Guarded by mu. Destroyed handles move to `retired` and
  // are never freed, so that a stale handle stays readable (the real driver may reuse or unmap
  // them; a test of a profiler should not crash in the simulator for reading one).
  std::mutex mu;
  std::unordered_set<CUctx_st*> contexts;
  std::unordered_set<CUstream_st*> streams;
  std::unordered_set<CUevent_st*> events;
  std::unordered_set<CUmemPoolHandle_st*> pools;
  std::unordered_set<CUfunc_st*> functions;
  std::vector<void*> retired;
  // Variable names handed out in MEMORY2 records; interned, never freed.
  std::unordered_map<std::string, char*> names;

  std::mutex vmm_mu;
  std::map<uintptr_t, size_t> reservations;  // base -> size
  std::unordered_map<CUmemGenericAllocationHandle, Physical> physicals;
  std::unordered_map<uint64_t, PhysicalMemory> physical_memory;
  uint64_t next_physical_memory = 1;
  std::map<uintptr_t, Mapping> mappings;
  CUmemGenericAllocationHandle next_physical = 1;

  // CUDA IPC (ipc.cc): exports move memory onto memfds, and what this process opened.
  std::mutex ipc_mu;
  std::map<uintptr_t, IpcOpening> ipc_opens;  // guarded by ipc_mu

  std::atomic<uint32_t> next_context_uid{1};
  std::atomic<uint32_t> next_stream_id{13};
  std::atomic<uint32_t> next_correlation_id{1};
  std::atomic<uint64_t> next_buffer_id{1};
  std::atomic<int64_t> next_grid_id{1};
  std::atomic<uint64_t> clock_ns{1'000'000'000};
};

// The process-wide state, created on first use and never destroyed.
Driver& D();

// Per-thread state.
struct ThreadState {
  ThreadState() = default;
  ThreadState(const ThreadState&) = delete;
  ThreadState& operator=(const ThreadState&) = delete;
  ~ThreadState() {
    for (CUstream_st* s : per_thread_streams) delete s;
  }

  std::vector<CUctx_st*> ctx_stack;  // back() is the current context
  gwsim_api_frame* top_frame = nullptr;
  int quiet = 0;
  std::vector<CUstream_st*> per_thread_streams;  // one per context, created on use
};
ThreadState& T();

// Simulated clock.
inline uint64_t Now() { return D().clock_ns.load(std::memory_order_relaxed); }
// Advances the clock by ns and returns the start of that interval.
inline uint64_t Advance(uint64_t ns) {
  return D().clock_ns.fetch_add(ns, std::memory_order_relaxed);
}

bool NoDriver();
bool Initialized();
// CUDA_SUCCESS when cuInit has succeeded (or is running on this thread).
CUresult RequireInit();
// The current context, which must be active.
CUresult RequireContext(CUctx_st** out);
CUctx_st* CurrentContext();
CUresult CheckDevice(CUdevice dev);

// Contexts.
CUresult RetainPrimary(CUdevice dev, CUctx_st** out);
CUresult ReleasePrimary(CUdevice dev, bool reset);
CUresult CreateContext(CUdevice dev, unsigned flags, CUctx_st** out);
CUresult DestroyContext(CUctx_st* ctx);
bool ValidContext(CUctx_st* ctx);

// Streams: resolves NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD against the current context.
CUresult ResolveStream(CUstream stream, bool per_thread_default, CUstream_st** out);
// Stream priorities (cuCtxGetStreamPriorityRange): lower numbers are greater priorities.
inline constexpr int kLeastStreamPriority = 0;
inline constexpr int kGreatestStreamPriority = -5;
// A priority outside the range is clamped to it, as the driver does.
CUresult CreateStream(unsigned flags, int priority, CUstream_st** out);
CUresult DestroyStream(CUstream_st* stream);

// Capacity accounting.
bool Charge(int device, uint64_t bytes);
void Uncharge(int device, uint64_t bytes);

// Registries.
bool ValidEvent(CUevent_st* e);
bool ValidPool(CUmemPoolHandle_st* p);
bool ValidFunction(CUfunc_st* f);

// A copy of `name` that lives as long as the process (one per distinct name).
const char* InternName(const char* name);

}  // namespace gwsim::drv

#endif  // GWSIM_DRIVER_STATE_H_
