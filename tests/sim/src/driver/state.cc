#include "driver/state.h"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "driver/memory.h"
#include "driver/trace.h"

namespace gwsim::drv {

Driver::Driver() : config(ReadSimConfig()) {
  const int count = static_cast<int>(config.visible.size());
  for (int i = 0; i < count; ++i) {
    auto* dev = new DeviceState();
    dev->ordinal = i;
    dev->physical = config.visible[static_cast<size_t>(i)];
    dev->primary = new CUctx_st();
    dev->primary->device = i;
    dev->primary->primary = true;
    dev->primary->legacy_stream = new CUstream_st{kLegacyStreamId, dev->primary, 0, 0};
    dev->default_pool = new CUmemPoolHandle_st{i, true, 0};
    dev->current_pool.store(dev->default_pool);
    contexts.insert(dev->primary);
    pools.insert(dev->default_pool);
    devices.push_back(dev);
  }
}

Driver& D() {
  static Driver* const driver = new Driver();  // leaked: see the file comment of state.h
  return *driver;
}

namespace {

// Per-thread state lives on the heap behind a trivially destructible thread_local pointer:
// glibc destroys thread_local objects before it runs atexit handlers, and the runtime's exit
// handler still calls into the driver on the main thread. A pthread key frees it when another
// thread exits (key destructors do not run for the thread that calls exit()).
thread_local ThreadState* t_state = nullptr;

void FreeThreadState(void* state) {
  t_state = nullptr;
  delete static_cast<ThreadState*>(state);
}

pthread_key_t ThreadStateKey() {
  static const pthread_key_t key = [] {
    pthread_key_t k;
    pthread_key_create(&k, FreeThreadState);
    return k;
  }();
  return key;
}

}  // namespace

ThreadState& T() {
  if (t_state == nullptr) {
    t_state = new ThreadState();
    pthread_setspecific(ThreadStateKey(), t_state);
  }
  return *t_state;
}

bool NoDriver() { return D().config.fail_mode == GWSIM_FAIL_NO_DRIVER; }

namespace {
uint64_t SelfId() { return static_cast<uint64_t>(pthread_self()); }
}  // namespace

bool Initialized() {
  Driver& d = D();
  const int state = d.init_state.load(std::memory_order_acquire);
  if (state == 2) return d.init_result == CUDA_SUCCESS;
  // InitializeInjection runs inside the first cuInit and may use the driver.
  return state == 1 && d.init_owner.load(std::memory_order_relaxed) == SelfId();
}

CUresult RequireInit() { return Initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }

CUctx_st* CurrentContext() {
  const auto& stack = T().ctx_stack;
  return stack.empty() ? nullptr : stack.back();
}

CUresult RequireContext(CUctx_st** out) {
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* ctx = CurrentContext();
  if (ctx == nullptr || !ctx->active.load(std::memory_order_acquire)) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  *out = ctx;
  return CUDA_SUCCESS;
}

CUresult CheckDevice(CUdevice dev) {
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= static_cast<int>(D().devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

bool ValidContext(CUctx_st* ctx) {
  Driver& d = D();
  std::lock_guard lock(d.mu);
  return d.contexts.count(ctx) != 0;
}

namespace {

// Runs CONTEXT_DESTROY_STARTING (while everything is still there), then frees what the
// context holds.
void TearDown(CUctx_st* ctx) {
  EmitResource(CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, ctx, nullptr);
  Driver& d = D();
  for (const Allocation& a : d.memory.RemoveContext(ctx)) ReleaseBacking(a);
  {
    std::lock_guard lock(d.mu);
    // Stream objects are kept (a stale handle must stay readable), only unregistered.
    for (auto it = d.streams.begin(); it != d.streams.end();) {
      if ((*it)->ctx == ctx) {
        d.retired.push_back(*it);
        it = d.streams.erase(it);
      } else {
        ++it;
      }
    }
  }
  ctx->active.store(false, std::memory_order_release);
}

}  // namespace

CUresult RetainPrimary(CUdevice dev, CUctx_st** out) {
  if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
  Driver& d = D();
  CUctx_st* ctx = d.devices[dev]->primary;
  bool created = false;
  {
    std::lock_guard lock(d.mu);
    if (ctx->primary_refcount++ == 0) {
      ctx->uid.store(d.next_context_uid.fetch_add(1));
      ctx->active.store(true, std::memory_order_release);
      created = true;
    }
  }
  if (created) EmitResource(CUPTI_CBID_RESOURCE_CONTEXT_CREATED, ctx, nullptr);
  *out = ctx;
  return CUDA_SUCCESS;
}

CUresult ReleasePrimary(CUdevice dev, bool reset) {
  if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
  Driver& d = D();
  CUctx_st* ctx = d.devices[dev]->primary;
  bool destroy = false;
  {
    std::lock_guard lock(d.mu);
    if (ctx->primary_refcount == 0) return reset ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    if (reset) {
      ctx->primary_refcount = 0;
      destroy = true;
    } else {
      destroy = --ctx->primary_refcount == 0;
    }
  }
  if (destroy) TearDown(ctx);
  return CUDA_SUCCESS;
}

CUresult CreateContext(CUdevice dev, unsigned flags, CUctx_st** out) {
  if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
  Driver& d = D();
  auto* ctx = new CUctx_st();
  ctx->device = dev;
  ctx->flags = flags;
  ctx->uid.store(d.next_context_uid.fetch_add(1));
  ctx->legacy_stream = new CUstream_st{kLegacyStreamId, ctx, 0, 0};
  ctx->active.store(true);
  {
    std::lock_guard lock(d.mu);
    d.contexts.insert(ctx);
  }
  T().ctx_stack.push_back(ctx);
  EmitResource(CUPTI_CBID_RESOURCE_CONTEXT_CREATED, ctx, nullptr);
  *out = ctx;
  return CUDA_SUCCESS;
}

CUresult DestroyContext(CUctx_st* ctx) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (ctx == nullptr || !ValidContext(ctx) || ctx->primary ||
      !ctx->active.load(std::memory_order_acquire)) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  TearDown(ctx);
  auto& stack = T().ctx_stack;
  stack.erase(std::remove(stack.begin(), stack.end(), ctx), stack.end());
  return CUDA_SUCCESS;
}

CUresult ResolveStream(CUstream stream, bool per_thread_default, CUstream_st** out) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (stream == nullptr) stream = per_thread_default ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
  if (stream == CU_STREAM_LEGACY) {
    *out = ctx->legacy_stream;
    return CUDA_SUCCESS;
  }
  if (stream == CU_STREAM_PER_THREAD) {
    auto& mine = T().per_thread_streams;
    for (CUstream_st* s : mine) {
      if (s->ctx == ctx) {
        *out = s;
        return CUDA_SUCCESS;
      }
    }
    // Leaked on purpose: a thread's default stream lives as long as the process here.
    auto* s = new CUstream_st{D().next_stream_id.fetch_add(1), ctx, 0, 0};
    mine.push_back(s);
    *out = s;
    return CUDA_SUCCESS;
  }
  Driver& d = D();
  std::lock_guard lock(d.mu);
  if (d.streams.count(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  *out = stream;
  return CUDA_SUCCESS;
}

CUresult CreateStream(unsigned flags, int priority, CUstream_st** out) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Driver& d = D();
  priority = std::clamp(priority, kGreatestStreamPriority, kLeastStreamPriority);
  auto* s = new CUstream_st{d.next_stream_id.fetch_add(1), ctx, flags, priority};
  {
    std::lock_guard lock(d.mu);
    d.streams.insert(s);
  }
  EmitResource(CUPTI_CBID_RESOURCE_STREAM_CREATED, ctx, s);
  *out = s;
  return CUDA_SUCCESS;
}

CUresult DestroyStream(CUstream_st* stream) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  Driver& d = D();
  {
    std::lock_guard lock(d.mu);
    if (d.streams.count(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  }
  EmitResource(CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING, stream->ctx, stream);
  std::lock_guard lock(d.mu);
  if (d.streams.erase(stream) != 0) d.retired.push_back(stream);  // kept: see Driver::retired
  return CUDA_SUCCESS;
}

bool Charge(int device, uint64_t bytes) {
  Driver& d = D();
  std::atomic<uint64_t>& used = d.devices[device]->used;
  uint64_t current = used.load(std::memory_order_relaxed);
  do {
    if (bytes > d.config.device_memory || current > d.config.device_memory - bytes) return false;
  } while (!used.compare_exchange_weak(current, current + bytes, std::memory_order_relaxed));
  return true;
}

void Uncharge(int device, uint64_t bytes) {
  if (bytes != 0) D().devices[device]->used.fetch_sub(bytes, std::memory_order_relaxed);
}

bool ValidEvent(CUevent_st* e) {
  Driver& d = D();
  std::lock_guard lock(d.mu);
  return d.events.count(e) != 0;
}

bool ValidPool(CUmemPoolHandle_st* p) {
  Driver& d = D();
  std::lock_guard lock(d.mu);
  return d.pools.count(p) != 0;
}

bool ValidFunction(CUfunc_st* f) {
  Driver& d = D();
  std::lock_guard lock(d.mu);
  return d.functions.count(f) != 0;
}

const char* InternName(const char* name) {
  Driver& d = D();
  std::lock_guard lock(d.mu);
  char*& copy = d.names[name != nullptr ? name : ""];
  if (copy == nullptr) copy = strdup(name != nullptr ? name : "");
  return copy;
}

// MemoryTable

bool MemoryTable::Insert(const Allocation& a) {
  std::unique_lock lock(mu_);
  auto next = map_.lower_bound(a.base);
  if (next != map_.end() && next->first < a.base + a.size) return false;
  if (next != map_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.size > a.base) return false;
  }
  map_.emplace(a.base, a);
  return true;
}

std::optional<Allocation> MemoryTable::Find(uintptr_t p) const {
  std::shared_lock lock(mu_);
  auto it = map_.upper_bound(p);
  if (it == map_.begin()) return std::nullopt;
  --it;
  if (p >= it->first + it->second.size) return std::nullopt;
  return it->second;
}

bool MemoryTable::CoversDevice(uintptr_t p, size_t n) const {
  std::shared_lock lock(mu_);
  auto it = map_.upper_bound(p);
  if (it == map_.begin()) return false;
  --it;
  uintptr_t covered = p;
  const uintptr_t end = p + n;
  while (it != map_.end() && it->first <= covered) {
    const Allocation& a = it->second;
    if (a.origin == Origin::kHost || a.origin == Origin::kRegistered) return false;
    covered = std::max(covered, a.base + a.size);
    if (covered >= end) return true;
    ++it;
  }
  return false;
}

uint64_t MemoryTable::PoolBytes(const CUmemPoolHandle_st* pool) const {
  std::shared_lock lock(mu_);
  uint64_t total = 0;
  for (const auto& [base, a] : map_) {
    if (a.pool == pool) total += a.size;
  }
  return total;
}

std::vector<Allocation> MemoryTable::RemoveContext(CUctx_st* ctx) {
  std::vector<Allocation> removed;
  std::unique_lock lock(mu_);
  for (auto it = map_.begin(); it != map_.end();) {
    // Registered host memory belongs to its owner; VMM mappings to their
    // handles; stream-ordered and graph memory to their pools, which
    // cudaDeviceReset "will not destroy" (cuda_runtime_api.h).
    const Origin origin = it->second.origin;
    if (it->second.ctx == ctx && origin != Origin::kRegistered && origin != Origin::kVmm &&
        origin != Origin::kAsync && origin != Origin::kGraph) {
      removed.push_back(it->second);
      it = map_.erase(it);
    } else {
      ++it;
    }
  }
  return removed;
}

}  // namespace gwsim::drv
