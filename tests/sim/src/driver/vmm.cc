// Virtual memory management: reservations, physical handles, mappings, access, and sharing a
// handle's memory through a POSIX file descriptor.
//
// A reservation is a PROT_NONE anonymous mapping; cuMemCreate makes a memfd of the requested
// size; cuMemMap maps that fd over the reservation (so two mappings of one handle alias, as on a
// GPU), still PROT_NONE until cuMemSetAccess. A handle counts references: its cuMemCreate's (or
// import's) and one per cuMemRetainAllocationHandle of an address it maps; each cuMemRelease
// drops one. The memory returns to the device when every handle that refers to it (the created
// one, and any imported from its exported fd) has no reference and no mapping left, in either
// order, as cuda.h documents.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "driver/memory.h"
#include "driver/trace.h"

namespace gwsim::drv {

CUresult AddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (ptr == nullptr || size == 0 || size % kVmmGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
  const size_t align = alignment > kVmmGranularity ? alignment : kVmmGranularity;
  if ((align & (align - 1)) != 0 || size > SIZE_MAX - align) return CUDA_ERROR_INVALID_VALUE;
  void* raw =
      mmap(nullptr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t base = (start + align - 1) & ~(uintptr_t{align} - 1);
  if (base > start) munmap(raw, base - start);
  const uintptr_t end = start + size + align;
  if (end > base + size) munmap(reinterpret_cast<void*>(base + size), end - (base + size));
  Driver& d = D();
  std::lock_guard lock(d.vmm_mu);
  d.reservations[base] = size;
  *ptr = base;
  return CUDA_SUCCESS;
}

CUresult AddressFree(CUdeviceptr ptr, size_t size) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  Driver& d = D();
  std::lock_guard lock(d.vmm_mu);
  auto it = d.reservations.find(ptr);
  if (it == d.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  auto m = d.mappings.lower_bound(ptr);
  if (m != d.mappings.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;  // mapped
  munmap(reinterpret_cast<void*>(ptr), size);
  d.reservations.erase(it);
  return CUDA_SUCCESS;
}

namespace {

// The memfd's name tells an importer in another process the device: gwsim-vmm-<device>.
constexpr char kMemfdPrefix[] = "gwsim-vmm-";

// Caller holds vmm_mu.
void DropPhysicalIfUnused(Driver& d, CUmemGenericAllocationHandle handle) {
  auto it = d.physicals.find(handle);
  if (it == d.physicals.end() || it->second.refs > 0 || it->second.maps != 0) return;
  const uint64_t key = it->second.memory;
  d.physicals.erase(it);
  auto mem = d.physical_memory.find(key);
  if (mem == d.physical_memory.end() || --mem->second.handles > 0) return;
  close(mem->second.fd);
  if (mem->second.charged) Uncharge(mem->second.device, mem->second.size);
  d.physical_memory.erase(mem);
}

// A new handle to `memory`. Caller holds vmm_mu.
CUmemGenericAllocationHandle NewHandle(Driver& d, uint64_t memory, unsigned handle_types) {
  const CUmemGenericAllocationHandle h = d.next_physical++;
  d.physicals[h] = Physical{memory, 0, 1, handle_types};
  ++d.physical_memory[memory].handles;
  return h;
}

// Caller holds vmm_mu. Null when unknown.
PhysicalMemory* MemoryOf(Driver& d, const Physical& p) {
  auto it = d.physical_memory.find(p.memory);
  return it != d.physical_memory.end() ? &it->second : nullptr;
}

// The mapping that covers `addr`, or null. Caller holds vmm_mu.
const Mapping* MappingAt(Driver& d, CUdeviceptr addr) {
  auto m = d.mappings.upper_bound(addr);
  if (m == d.mappings.begin()) return nullptr;
  --m;
  return addr - m->first < m->second.size ? &m->second : nullptr;
}

}  // namespace

CUresult CreatePhysical(CUmemGenericAllocationHandle* handle, size_t size,
                        const CUmemAllocationProp* prop) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (handle == nullptr || prop == nullptr || size == 0 || size % kVmmGranularity != 0 ||
      prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Sharing through a POSIX file descriptor is simulated; Windows handles and fabric are not.
  const auto types = static_cast<unsigned>(prop->requestedHandleTypes);
  if ((types & ~unsigned{CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}) != 0) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  const int device = prop->location.id;
  if (CUresult r = CheckDevice(device); r != CUDA_SUCCESS) return r;
  if (!Charge(device, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  const std::string name = kMemfdPrefix + std::to_string(device);
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    Uncharge(device, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Driver& d = D();
  std::lock_guard lock(d.vmm_mu);
  const uint64_t memory = d.next_physical_memory++;
  d.physical_memory[memory] = PhysicalMemory{fd,
                                             size,
                                             device,
                                             true,
                                             0,
                                             static_cast<uint64_t>(st.st_ino),
                                             static_cast<uint64_t>(st.st_dev)};
  *handle = NewHandle(d, memory, types);
  return CUDA_SUCCESS;
}

CUresult ReleasePhysical(CUmemGenericAllocationHandle handle) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  Driver& d = D();
  std::lock_guard lock(d.vmm_mu);
  auto it = d.physicals.find(handle);
  if (it == d.physicals.end() || it->second.refs == 0) return CUDA_ERROR_INVALID_VALUE;
  --it->second.refs;
  DropPhysicalIfUnused(d, handle);
  return CUDA_SUCCESS;
}

CUresult RetainPhysical(CUmemGenericAllocationHandle* handle, CUdeviceptr addr) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  Driver& d = D();
  std::lock_guard lock(d.vmm_mu);
  // Any address inside a mapping; the handle it was mapped with, released or not (its mapping
  // keeps it), one reference more.
  const Mapping* m = MappingAt(d, addr);
  auto phys = m != nullptr ? d.physicals.find(m->handle) : d.physicals.end();
  if (handle == nullptr || phys == d.physicals.end()) return CUDA_ERROR_INVALID_VALUE;
  ++phys->second.refs;
  *handle = m->handle;
  return CUDA_SUCCESS;
}

CUresult PhysicalProperties(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  Driver& d = D();
  std::lock_guard lock(d.vmm_mu);
  auto phys = d.physicals.find(handle);
  const bool held = phys != d.physicals.end() && phys->second.refs > 0;
  const PhysicalMemory* memory = held ? MemoryOf(d, phys->second) : nullptr;
  if (prop == nullptr || memory == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *prop = CUmemAllocationProp{};
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop->location.id = memory->device;
  prop->requestedHandleTypes = static_cast<CUmemAllocationHandleType>(phys->second.handle_types);
  return CUDA_SUCCESS;
}

CUresult Map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (size == 0 || size % kVmmGranularity != 0 || ptr % kVmmGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Driver& d = D();
  std::lock_guard lock(d.vmm_mu);
  auto phys = d.physicals.find(handle);
  if (phys == d.physicals.end() || phys->second.refs == 0) return CUDA_ERROR_INVALID_HANDLE;
  const PhysicalMemory* memory = MemoryOf(d, phys->second);
  if (memory == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (offset > memory->size || size > memory->size - offset) return CUDA_ERROR_INVALID_VALUE;
  auto res = d.reservations.upper_bound(ptr);
  if (res == d.reservations.begin()) return CUDA_ERROR_INVALID_VALUE;
  --res;
  if (ptr + size > res->first + res->second) return CUDA_ERROR_INVALID_VALUE;
  auto next = d.mappings.lower_bound(ptr);
  if (next != d.mappings.end() && next->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
  if (next != d.mappings.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.size > ptr) return CUDA_ERROR_INVALID_VALUE;
  }
  void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, memory->fd,
                 static_cast<off_t>(offset));
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  d.mappings[ptr] = Mapping{size, handle};
  ++phys->second.maps;
  Allocation a;
  a.base = ptr;
  a.size = size;
  a.origin = Origin::kVmm;
  a.memory_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  a.device = memory->device;
  a.buffer_id = d.next_buffer_id.fetch_add(1);
  d.memory.Insert(a);
  return CUDA_SUCCESS;
}

CUresult Unmap(CUdeviceptr ptr, size_t size) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  Driver& d = D();
  std::lock_guard lock(d.vmm_mu);
  // Every mapping in [ptr, ptr+size) must lie wholly inside it.
  std::vector<std::map<uintptr_t, Mapping>::iterator> victims;
  for (auto it = d.mappings.lower_bound(ptr); it != d.mappings.end() && it->first < ptr + size;
       ++it) {
    if (it->first + it->second.size > ptr + size) return CUDA_ERROR_INVALID_VALUE;
    victims.push_back(it);
  }
  if (victims.empty()) return CUDA_ERROR_INVALID_VALUE;
  auto before = d.mappings.lower_bound(ptr);
  if (before != d.mappings.begin() &&
      std::prev(before)->first + std::prev(before)->second.size > ptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (auto it : victims) {
    const uintptr_t base = it->first;
    const Mapping m = it->second;
    d.memory.RemoveIf(base, [](const Allocation& a) { return a.origin == Origin::kVmm; });
    // Put the reservation back in place of the mapping. Should that fail, the range is left
    // unmapped, which cuMemAddressFree's munmap tolerates.
    if (mmap(reinterpret_cast<void*>(base), m.size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED) {
      munmap(reinterpret_cast<void*>(base), m.size);
    }
    d.mappings.erase(it);
    auto phys = d.physicals.find(m.handle);
    if (phys != d.physicals.end()) --phys->second.maps;
    DropPhysicalIfUnused(d, m.handle);
  }
  return CUDA_SUCCESS;
}

CUresult SetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (desc == nullptr || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  int prot = PROT_NONE;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        CheckDevice(desc[i].location.id) != CUDA_SUCCESS) {
      return CUDA_ERROR_INVALID_DEVICE;
    }
    if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) prot = PROT_READ | PROT_WRITE;
    if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ && prot == PROT_NONE) prot = PROT_READ;
  }
  Driver& d = D();
  std::lock_guard lock(d.vmm_mu);
  uintptr_t covered = ptr;
  auto it = d.mappings.upper_bound(ptr);
  if (it == d.mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  for (; it != d.mappings.end() && it->first <= covered && covered < ptr + size; ++it) {
    covered = it->first + it->second.size;
  }
  if (covered < ptr + size) return CUDA_ERROR_INVALID_VALUE;
  if (mprotect(reinterpret_cast<void*>(ptr), size, prot) != 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult ExportPhysical(void* shareable, CUmemGenericAllocationHandle handle,
                        CUmemAllocationHandleType type, unsigned long long flags) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (shareable == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  Driver& d = D();
  std::lock_guard lock(d.vmm_mu);
  auto phys = d.physicals.find(handle);
  if (phys == d.physicals.end() || phys->second.refs == 0) return CUDA_ERROR_INVALID_VALUE;
  // Only what cuMemCreate's requestedHandleTypes asked for can be exported.
  if ((phys->second.handle_types & type) == 0) return CUDA_ERROR_INVALID_VALUE;
  const PhysicalMemory* memory = MemoryOf(d, phys->second);
  if (memory == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const int fd = dup(memory->fd);  // the caller's to pass on and close
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *static_cast<int*>(shareable) = fd;
  return CUDA_SUCCESS;
}

CUresult ImportPhysical(CUmemGenericAllocationHandle* handle, void* os_handle,
                        CUmemAllocationHandleType type) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(os_handle));
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) return CUDA_ERROR_INVALID_VALUE;
  Driver& d = D();
  std::lock_guard lock(d.vmm_mu);
  // This process's memory: one more handle to it, nothing charged.
  for (const auto& [key, memory] : d.physical_memory) {
    if (memory.inode == static_cast<uint64_t>(st.st_ino) &&
        memory.file_device == static_cast<uint64_t>(st.st_dev)) {
      *handle = NewHandle(d, key, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      return CUDA_SUCCESS;
    }
  }
  // Another process's: a simulator memfd names its device; it is not charged here.
  char link[64];
  char target[256] = {};
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof(target) - 1);
  const std::string path(target, n > 0 ? static_cast<size_t>(n) : 0);
  const std::string prefix = std::string("/memfd:") + kMemfdPrefix;
  if (path.compare(0, prefix.size(), prefix) != 0 || st.st_size <= 0) {
    return CUDA_ERROR_INVALID_VALUE;  // not memory a (simulated) CUDA process exported
  }
  const int device = std::atoi(path.c_str() + prefix.size());
  if (CheckDevice(device) != CUDA_SUCCESS) return CUDA_ERROR_NOT_SUPPORTED;
  const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  const uint64_t memory = d.next_physical_memory++;
  d.physical_memory[memory] = PhysicalMemory{own,
                                             static_cast<size_t>(st.st_size),
                                             device,
                                             false,
                                             0,
                                             static_cast<uint64_t>(st.st_ino),
                                             static_cast<uint64_t>(st.st_dev)};
  *handle = NewHandle(d, memory, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  return CUDA_SUCCESS;
}

}  // namespace gwsim::drv
