// CUDA IPC memory handles: cuIpcGetMemHandle, cuIpcOpenMemHandle(_v2), cuIpcCloseMemHandle.
//
// Device memory is host memory here, so another process can use it only through pages both map.
// The first export of a cuMemAlloc allocation moves its pages onto a memfd, at the same address
// and with the same bytes (such allocations are page-granular mmaps for this, memory.cc), and
// keeps the memfd open. The 64-byte handle names the exporter's pid, that fd's number and the
// memfd's inode, the allocation's size, device and buffer id (a new allocation at the same
// address has another, as cuda.h says its handle is unique). The importer maps
// /proc/<pid>/fd/<fd>, which needs the exporter to be alive and its fds readable by the importer
// (the same user, in the same PID namespace, a dumpable process), and checks the inode: an fd
// number reused by another file is not the memory. The mapping is kIpc memory of the importing
// context, charged nothing; a second open in that context adds a reference and returns the same
// address, and the close that drops the last reference unmaps it.
//
// cuda.h leaves the importer's view undefined once the exporter frees the memory: here the
// exporter's pages become private again (EndExport) and the importer keeps the memfd's, with the
// bytes they held, until it closes them; the handle cannot be opened any more.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

#include "driver/memory.h"
#include "driver/trace.h"

namespace gwsim::drv {
namespace {

constexpr char kMagic[8] = {'g', 'w', 's', 'i', 'm', 'I', 'P', 'C'};

// What the opaque bytes of a CUipcMemHandle hold.
struct IpcHandleData {
  char magic[8];
  uint32_t pid;
  int32_t fd;
  uint64_t inode;
  uint64_t file_device;
  uint64_t size;
  uint64_t export_id;  // the allocation's buffer id
  int32_t device;
  uint32_t reserved;
};
static_assert(sizeof(IpcHandleData) <= CU_IPC_HANDLE_SIZE);

size_t PageRound(size_t n) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

// Moves the allocation's pages onto a new memfd at the same address. Caller holds ipc_mu.
CUresult Share(const Allocation& a, int* out_fd) {
  const size_t bytes = PageRound(a.backing_size);
  const std::string name = "gwsim-ipc-" + std::to_string(a.device);
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  void* staging = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(bytes)) == 0) {
    staging = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (staging == MAP_FAILED) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  std::memcpy(staging, a.backing, a.backing_size);
  munmap(staging, bytes);
  if (mmap(a.backing, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
    close(fd);  // the private pages are still in place
    return CUDA_ERROR_MAP_FAILED;
  }
  *out_fd = fd;
  return CUDA_SUCCESS;
}

bool SameFile(const struct stat& st, const IpcHandleData& h) {
  return static_cast<uint64_t>(st.st_ino) == h.inode &&
         static_cast<uint64_t>(st.st_dev) == h.file_device &&
         static_cast<uint64_t>(st.st_size) >= h.size;
}

// The opening mapped at `base`, if its mapping is still in the MemoryTable (a destroyed context
// took it with the rest of its memory). Caller holds ipc_mu; a stale entry is dropped.
IpcOpening* LiveOpening(Driver& d, uintptr_t base) {
  auto it = d.ipc_opens.find(base);
  if (it == d.ipc_opens.end()) return nullptr;
  const std::optional<Allocation> a = d.memory.Find(base);
  if (!a || a->base != base || a->origin != Origin::kIpc || a->buffer_id != it->second.buffer_id) {
    d.ipc_opens.erase(it);
    return nullptr;
  }
  return &it->second;
}

// Maps the exporter's memfd; INVALID_VALUE when the handle names no memory that is still
// exported (the exporter freed it or exited, or the fd is another file now).
CUresult MapExported(const IpcHandleData& h, void** out) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%u/fd/%d", h.pid, h.fd);
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_INVALID_VALUE;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !SameFile(st, h)) {
    close(fd);
    return CUDA_ERROR_INVALID_VALUE;
  }
  void* p = mmap(nullptr, PageRound(h.size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);  // the mapping keeps the memory
  if (p == MAP_FAILED) return CUDA_ERROR_MAP_FAILED;
  *out = p;
  return CUDA_SUCCESS;
}

}  // namespace

CUresult IpcGetHandle(CUipcMemHandle* out, CUdeviceptr dptr) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Driver& d = D();
  std::lock_guard lock(d.ipc_mu);
  const std::optional<Allocation> a = d.memory.Find(dptr);
  // The base of cuMemAlloc memory only: not stream-ordered, managed, host, VMM, graph or array
  // memory, nor another process's.
  if (!a || a->base != dptr || a->origin != Origin::kDevice) return CUDA_ERROR_INVALID_VALUE;
  int fd = a->ipc_fd;
  if (fd < 0) {
    if (CUresult r = Share(*a, &fd); r != CUDA_SUCCESS) return r;
    d.memory.Update(a->base, [fd](Allocation& x) { x.ipc_fd = fd; });
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) return CUDA_ERROR_MAP_FAILED;
  IpcHandleData h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.pid = static_cast<uint32_t>(getpid());
  h.fd = fd;
  h.inode = static_cast<uint64_t>(st.st_ino);
  h.file_device = static_cast<uint64_t>(st.st_dev);
  h.size = a->size;
  h.export_id = a->buffer_id;
  h.device = a->device;
  *out = CUipcMemHandle{};
  std::memcpy(out->reserved, &h, sizeof(h));
  return CUDA_SUCCESS;
}

CUresult IpcOpen(CUdeviceptr* out, const CUipcMemHandle& handle, unsigned flags) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (out == nullptr || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  IpcHandleData h{};
  std::memcpy(&h, handle.reserved, sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || h.size == 0) {
    return CUDA_ERROR_INVALID_VALUE;  // not a handle cuIpcGetMemHandle made
  }
  // NVIDIA's driver refuses its own process's handles ("invalid device context").
  if (h.pid == static_cast<uint32_t>(getpid())) return CUDA_ERROR_INVALID_CONTEXT;
  Driver& d = D();
  Allocation a;
  {
    std::lock_guard lock(d.ipc_mu);
    for (auto it = d.ipc_opens.begin(); it != d.ipc_opens.end();) {
      const auto [base, opening] = *it;
      ++it;  // LiveOpening may erase the entry
      if (opening.pid != h.pid || opening.export_id != h.export_id) continue;
      IpcOpening* o = LiveOpening(d, base);
      if (o == nullptr) continue;
      if (o->ctx == ctx) {  // opened by this context already: one more reference
        ++o->refs;
        *out = base;
        return CUDA_SUCCESS;
      }
      // "may only be opened by one CUcontext per CUdevice per other process"
      if (o->ctx->device == ctx->device) return CUDA_ERROR_INVALID_CONTEXT;
    }
    void* p = nullptr;
    if (CUresult r = MapExported(h, &p); r != CUDA_SUCCESS) return r;
    a.base = reinterpret_cast<uintptr_t>(p);
    a.size = h.size;
    a.origin = Origin::kIpc;
    a.memory_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    a.device = ctx->device;
    a.ctx = ctx;
    a.backing = p;
    a.backing_size = h.size;
    a.mmapped = true;
    a.buffer_id = d.next_buffer_id.fetch_add(1);
    if (!d.memory.Insert(a)) {
      munmap(p, PageRound(h.size));
      return CUDA_ERROR_UNKNOWN;
    }
    d.ipc_opens[a.base] = IpcOpening{h.pid, h.export_id, ctx, 1, a.buffer_id};
  }
  // GWSIM_IPC_MEMORY_RECORDS: whether NVIDIA's CUPTI reports an opening is not known.
  if (d.config.ipc_memory_records) {
    EmitMemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, a, false,
                     CUPTI_INVALID_STREAM_ID);
  }
  *out = a.base;
  return CUDA_SUCCESS;
}

CUresult IpcClose(CUdeviceptr dptr) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  Driver& d = D();
  std::optional<Allocation> unmapped;
  {
    std::lock_guard lock(d.ipc_mu);
    IpcOpening* o = LiveOpening(d, dptr);
    if (o == nullptr) return CUDA_ERROR_INVALID_VALUE;  // not what cuIpcOpenMemHandle returned
    if (--o->refs > 0) return CUDA_SUCCESS;
    const uint64_t buffer_id = o->buffer_id;
    d.ipc_opens.erase(dptr);
    unmapped = d.memory.RemoveIf(dptr, [buffer_id](const Allocation& x) {
      return x.origin == Origin::kIpc && x.buffer_id == buffer_id;
    });
  }
  if (!unmapped) return CUDA_ERROR_INVALID_VALUE;
  if (d.config.ipc_memory_records) {
    EmitMemoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, *unmapped, false,
                     CUPTI_INVALID_STREAM_ID);
  }
  ReleaseBacking(*unmapped);  // unmaps it: IPC mappings are never recycled
  return CUDA_SUCCESS;
}

void EndExport(const Allocation& a) {
  if (a.backing != nullptr) {
    // Should this fail, the pages stay shared with the importers, which cuda.h leaves undefined.
    static_cast<void>(mmap(a.backing, PageRound(a.backing_size), PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0));
  }
  close(a.ipc_fd);
}

}  // namespace gwsim::drv
