// Exported driver API: modules (cuModuleLoad*, cuModuleGetFunction, cuModuleGetGlobal,
// cuModuleUnload) and libraries (cuLibraryLoadData, cuLibraryGetKernel, cuLibraryGetModule,
// cuLibraryUnload).
//
// The simulator runs no device code: a module is a copy of its image. A function name is found
// when it occurs in the image as a NUL-terminated string (at the start of the image or after a
// NUL or a '.', as in an ELF string table, ".text.<name>" included) or, in a PTX image, as the
// name of an `.entry`. A global is found in an ELF image's symbol table (an object symbol; its
// st_size is the size, its section's bytes the initial value). Functions launch with
// cuLaunchKernel like registered kernels; unloading a module invalidates them.
#include <elf.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/leaked.h"
#include "driver/cuda_headers.h"
#include "driver/memory.h"
#include "driver/state.h"
#include "driver/trace.h"

struct CUlib_st;

struct CUmod_st {
  uint32_t id = 0;
  std::string image;  // the module's own copy: pCubin of its resource callbacks
  bool elf = false;
  CUctx_st* ctx = nullptr;
  uint32_t ctx_uid = 0;         // the context's id when loaded: a reset context loses its modules
  CUlib_st* library = nullptr;  // a library's module: cuModuleUnload may not unload it
  // Guarded by the module registry's lock.
  std::unordered_map<std::string, CUfunc_st*> functions;
  std::unordered_map<std::string, std::pair<CUdeviceptr, size_t>> globals;
};

struct CUlib_st {
  std::string image;
  bool elf = false;
  // Guarded by the module registry's lock. Kernels are context-independent; the simulator's
  // CUkernel is the CUfunction it returns for every context.
  std::unordered_map<std::string, CUfunc_st*> kernels;
  std::vector<CUmod_st*> modules;  // one per context it was used in
};

namespace gwsim::drv {
namespace {

constexpr size_t kMaxImageBytes = size_t{1} << 30;
// Little-endian magic numbers of a fatbinary and of the __fatBinC_Wrapper_t nvcc's host stubs
// pass to __cudaRegisterFatBinary.
constexpr char kFatbinMagic[] = "\x50\xED\x55\xBA";
constexpr char kFatbinWrapperMagic[] = "\xB1\x43\x62\x46";
constexpr size_t kMagicSize = 4;

struct Registry {
  std::mutex mu;
  std::unordered_set<CUmod_st*> modules;
  std::unordered_set<CUlib_st*> libraries;
  // Unloaded modules and libraries are kept (never freed): a stale handle stays readable.
  std::vector<const void*> retired;
  std::atomic<uint32_t> next_module_id{1};
};

Registry& R() { return Leaked<Registry>(); }  // never destroyed, like the rest of the state

enum class ImageKind { kElf, kFatbin, kPtx };

template <typename T>
T Read(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Whether p starts with the n bytes of magic. Compares byte by byte and stops at the first
// difference, so that a short NUL-terminated text is never read past its end.
bool Starts(const unsigned char* p, size_t limit, const char* magic, size_t n) {
  if (n > limit) return false;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != static_cast<unsigned char>(magic[i])) return false;
  }
  return true;
}

// The extent of an ELF64 image from its headers: the end of the last header table or section
// with file contents. `limit` bounds what may be read (SIZE_MAX: the caller vouches for it).
CUresult ElfExtent(const unsigned char* p, size_t limit, size_t* out) {
  if (limit < sizeof(Elf64_Ehdr)) return CUDA_ERROR_INVALID_IMAGE;
  const auto eh = Read<Elf64_Ehdr>(p);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      eh.e_machine != EM_CUDA || (eh.e_shnum != 0 && eh.e_shentsize != sizeof(Elf64_Shdr))) {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  const uint64_t bound = limit < kMaxImageBytes ? limit : kMaxImageBytes;
  uint64_t end = sizeof(Elf64_Ehdr);
  const uint64_t sh_end = eh.e_shoff + uint64_t{eh.e_shnum} * eh.e_shentsize;
  const uint64_t ph_end = eh.e_phoff + uint64_t{eh.e_phnum} * eh.e_phentsize;
  if (eh.e_shoff > bound || sh_end > bound || eh.e_phoff > bound || ph_end > bound) {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  end = std::max({end, sh_end, ph_end});
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    const auto sh = Read<Elf64_Shdr>(p + eh.e_shoff + i * sizeof(Elf64_Shdr));
    if (sh.sh_type == SHT_NOBITS || sh.sh_type == SHT_NULL) continue;
    if (sh.sh_offset > bound || sh.sh_size > bound - sh.sh_offset) return CUDA_ERROR_INVALID_IMAGE;
    end = std::max<uint64_t>(end, sh.sh_offset + sh.sh_size);
  }
  *out = static_cast<size_t>(end);
  return CUDA_SUCCESS;
}

// Finds the image an address holds and its size: an ELF (cubin), a fatbinary (or the wrapper
// nvcc's host stubs pass to __cudaRegisterFatBinary) or NUL-terminated PTX text.
CUresult MeasureImage(const unsigned char* p, size_t limit, const unsigned char** start,
                      size_t* size, ImageKind* kind) {
  if (Starts(p, limit, ELFMAG, SELFMAG)) {
    *start = p;
    *kind = ImageKind::kElf;
    return ElfExtent(p, limit, size);
  }
  if (limit == SIZE_MAX && Starts(p, limit, kFatbinWrapperMagic, kMagicSize)) {
    const auto* data = Read<const unsigned char*>(p + 8);
    if (data == nullptr || !Starts(data, limit, kFatbinMagic, kMagicSize)) {
      return CUDA_ERROR_INVALID_IMAGE;
    }
    p = data;
  }
  if (limit >= 16 && Starts(p, limit, kFatbinMagic, kMagicSize)) {
    const auto header_size = Read<uint16_t>(p + 6);
    const auto fat_size = Read<uint64_t>(p + 8);
    if (header_size < 16 || fat_size > kMaxImageBytes ||
        (limit != SIZE_MAX && header_size + fat_size > limit)) {
      return CUDA_ERROR_INVALID_IMAGE;
    }
    *start = p;
    *size = header_size + fat_size;
    *kind = ImageKind::kFatbin;
    return CUDA_SUCCESS;
  }
  // PTX: text with a .version directive (what a JIT would insist on).
  const size_t length = strnlen(reinterpret_cast<const char*>(p), limit);
  const std::string_view text(reinterpret_cast<const char*>(p), length);
  if (length == 0 || text.find(".version") == std::string_view::npos) {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  *start = p;
  *size = length < limit ? length + 1 : length;
  *kind = ImageKind::kPtx;
  return CUDA_SUCCESS;
}

bool IdentifierChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$';
}

// Whether an image defines the function `name` (see the file comment).
bool HasFunction(std::string_view image, std::string_view name) {
  if (name.empty()) return false;
  for (size_t at = image.find(name); at != std::string_view::npos; at = image.find(name, at + 1)) {
    const size_t end = at + name.size();
    const char before = at == 0 ? '\0' : image[at - 1];
    if (end < image.size() && image[end] == '\0' && (before == '\0' || before == '.')) return true;
    // PTX: ".entry <name>(" with any whitespace between.
    if (end < image.size() && !IdentifierChar(image[end]) && at > 0 && !IdentifierChar(before)) {
      size_t i = at;
      while (i > 0 && (image[i - 1] == ' ' || image[i - 1] == '\t' || image[i - 1] == '\n' ||
                       image[i - 1] == '\r')) {
        --i;
      }
      constexpr std::string_view kEntry = ".entry";
      if (i < at && i >= kEntry.size() &&
          image.substr(i - kEntry.size(), kEntry.size()) == kEntry) {
        return true;
      }
    }
  }
  return false;
}

// An object symbol of an ELF image: its size and, when its section has contents, where its
// initial value lies in the image.
bool FindGlobal(const std::string& image, const char* name, size_t* size, size_t* init_offset,
                bool* has_init) {
  const auto* p = reinterpret_cast<const unsigned char*>(image.data());
  const auto eh = Read<Elf64_Ehdr>(p);
  auto section = [&](unsigned i) {
    return Read<Elf64_Shdr>(p + eh.e_shoff + i * sizeof(Elf64_Shdr));
  };
  for (unsigned s = 0; s < eh.e_shnum; ++s) {
    const Elf64_Shdr symtab = section(s);
    if (symtab.sh_type != SHT_SYMTAB || symtab.sh_link >= eh.e_shnum) continue;
    const Elf64_Shdr strtab = section(symtab.sh_link);
    if (strtab.sh_type != SHT_STRTAB) continue;
    for (uint64_t off = 0; off + sizeof(Elf64_Sym) <= symtab.sh_size; off += sizeof(Elf64_Sym)) {
      const auto sym = Read<Elf64_Sym>(p + symtab.sh_offset + off);
      if (ELF64_ST_TYPE(sym.st_info) != STT_OBJECT || sym.st_name >= strtab.sh_size) continue;
      const char* sym_name = reinterpret_cast<const char*>(p + strtab.sh_offset + sym.st_name);
      if (strnlen(sym_name, strtab.sh_size - sym.st_name) == strtab.sh_size - sym.st_name ||
          std::strcmp(sym_name, name) != 0 || sym.st_size == 0) {
        continue;
      }
      *size = sym.st_size;
      *has_init = false;
      if (sym.st_shndx < eh.e_shnum) {
        const Elf64_Shdr home = section(sym.st_shndx);
        if (home.sh_type != SHT_NOBITS && home.sh_type != SHT_NULL &&
            sym.st_value <= home.sh_size && sym.st_size <= home.sh_size - sym.st_value) {
          *init_offset = home.sh_offset + sym.st_value;
          *has_init = true;
        }
      }
      return true;
    }
  }
  return false;
}

// Copies an image given by address; CUDA_ERROR_INVALID_IMAGE for anything that is none of the
// kinds above.
CUresult CopyImage(const void* image, bool fatbin_only, std::string* out, bool* elf) {
  if (image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const unsigned char* start = nullptr;
  size_t size = 0;
  ImageKind kind{};
  if (CUresult r =
          MeasureImage(static_cast<const unsigned char*>(image), SIZE_MAX, &start, &size, &kind);
      r != CUDA_SUCCESS) {
    return r;
  }
  if (fatbin_only && kind != ImageKind::kFatbin) return CUDA_ERROR_INVALID_IMAGE;
  out->assign(reinterpret_cast<const char*>(start), size);
  *elf = kind == ImageKind::kElf;
  return CUDA_SUCCESS;
}

CUresult ReadImageFile(const char* path, std::string* out, bool* elf) {
  if (path == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::FILE* f = std::fopen(path, "rb");
  if (f == nullptr) return CUDA_ERROR_FILE_NOT_FOUND;
  std::string bytes;
  char buffer[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0 && bytes.size() <= kMaxImageBytes) {
    bytes.append(buffer, n);
  }
  std::fclose(f);
  const unsigned char* start = nullptr;
  size_t size = 0;
  ImageKind kind{};
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (CUresult r = MeasureImage(p, bytes.size(), &start, &size, &kind); r != CUDA_SUCCESS) {
    return r;
  }
  *out = bytes.substr(static_cast<size_t>(start - p), size);
  if (kind == ImageKind::kPtx && out->back() != '\0') out->push_back('\0');
  *elf = kind == ImageKind::kElf;
  return CUDA_SUCCESS;
}

void Announce(CUpti_CallbackId cbid, const CUmod_st* m) {
  CUpti_ModuleResourceData data{};
  data.moduleId = m->id;
  data.cubinSize = m->image.size();
  data.pCubin = m->image.data();
  EmitModuleResource(cbid, m->ctx, &data);
}

// Creates and registers a module of ctx; MODULE_LOADED is delivered once it is usable.
CUmod_st* NewModule(CUctx_st* ctx, std::string image, bool elf, CUlib_st* library) {
  Registry& r = R();
  auto* m = new CUmod_st();
  m->id = r.next_module_id.fetch_add(1);
  m->image = std::move(image);
  m->elf = elf;
  m->ctx = ctx;
  m->ctx_uid = ctx->uid.load();
  m->library = library;
  return m;
}

// Whether a registered module's context still holds it. Caller holds the registry lock.
bool Alive(const CUmod_st* m) {
  return R().modules.count(const_cast<CUmod_st*>(m)) != 0 && m->ctx->active.load() &&
         m->ctx->uid.load() == m->ctx_uid;
}

void Unregister(const std::vector<CUfunc_st*>& functions) {
  Driver& d = D();
  std::lock_guard lock(d.mu);
  for (CUfunc_st* f : functions) {
    if (d.functions.erase(f) != 0) d.retired.push_back(f);  // kept: see Driver::retired
  }
}

// MODULE_UNLOAD_STARTING (while everything is still there), then its globals are freed.
void Unload(CUmod_st* m) {
  Announce(CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING, m);
  std::vector<CUfunc_st*> functions;
  std::vector<CUdeviceptr> globals;
  {
    std::lock_guard lock(R().mu);
    if (m->library == nullptr) {
      for (const auto& [name, f] : m->functions) functions.push_back(f);
    }
    for (const auto& [name, g] : m->globals) globals.push_back(g.first);
    m->globals.clear();
  }
  Unregister(functions);
  for (CUdeviceptr p : globals) Free(p, Bit(Origin::kVariable), false, CUPTI_INVALID_STREAM_ID);
}

CUresult Load(CUmodule* module, const void* image, bool fatbin_only) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (module == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::string bytes;
  bool elf = false;
  if (CUresult r = CopyImage(image, fatbin_only, &bytes, &elf); r != CUDA_SUCCESS) return r;
  CUmod_st* m = NewModule(ctx, std::move(bytes), elf, nullptr);
  {
    std::lock_guard lock(R().mu);
    R().modules.insert(m);
  }
  Announce(CUPTI_CBID_RESOURCE_MODULE_LOADED, m);
  *module = m;
  return CUDA_SUCCESS;
}

CUresult LoadFile(CUmodule* module, const char* path) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (module == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::string bytes;
  bool elf = false;
  if (CUresult r = ReadImageFile(path, &bytes, &elf); r != CUDA_SUCCESS) return r;
  CUmod_st* m = NewModule(ctx, std::move(bytes), elf, nullptr);
  {
    std::lock_guard lock(R().mu);
    R().modules.insert(m);
  }
  Announce(CUPTI_CBID_RESOURCE_MODULE_LOADED, m);
  *module = m;
  return CUDA_SUCCESS;
}

CUresult UnloadModule(CUmodule module) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  {
    std::lock_guard lock(R().mu);
    if (module == nullptr || !Alive(module)) return CUDA_ERROR_INVALID_VALUE;
    if (module->library != nullptr) return CUDA_ERROR_NOT_PERMITTED;
    R().modules.erase(module);
    R().retired.push_back(module);
  }
  Unload(module);
  return CUDA_SUCCESS;
}

// The kernel `name` of a library, created on first request.
CUresult LibraryKernel(CUlib_st* library, const char* name, CUfunc_st** out) {
  {
    std::lock_guard lock(R().mu);
    auto it = library->kernels.find(name);
    if (it != library->kernels.end()) {
      *out = it->second;
      return CUDA_SUCCESS;
    }
  }
  if (!HasFunction(library->image, name)) return CUDA_ERROR_NOT_FOUND;
  CUfunc_st* f = gwsim_register_function(name);
  std::lock_guard lock(R().mu);
  auto [it, inserted] = library->kernels.emplace(name, f);
  if (!inserted) Unregister({f});  // another thread got there first
  *out = it->second;
  return CUDA_SUCCESS;
}

CUresult GetFunction(CUfunction* hfunc, CUmodule module, const char* name) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (hfunc == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard lock(R().mu);
    if (module == nullptr || !Alive(module)) return CUDA_ERROR_INVALID_VALUE;
    auto it = module->functions.find(name);
    if (it != module->functions.end()) {
      *hfunc = it->second;
      return CUDA_SUCCESS;
    }
  }
  CUfunc_st* f = nullptr;
  if (module->library != nullptr) {
    if (CUresult r = LibraryKernel(module->library, name, &f); r != CUDA_SUCCESS) return r;
  } else {
    if (!HasFunction(module->image, name)) return CUDA_ERROR_NOT_FOUND;
    f = gwsim_register_function(name);
  }
  std::lock_guard lock(R().mu);
  if (!Alive(module)) {  // unloaded meanwhile
    if (module->library == nullptr) Unregister({f});
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto [it, inserted] = module->functions.emplace(name, f);
  if (!inserted && module->library == nullptr) Unregister({f});  // another thread got there first
  *hfunc = it->second;
  return CUDA_SUCCESS;
}

// Globals get their storage on first request (a MEMORY2 DEVICE_STATIC record with the name).
CUresult GetGlobal(CUdeviceptr* dptr, size_t* bytes, CUmodule module, const char* name) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard lock(R().mu);
    if (module == nullptr || !Alive(module)) return CUDA_ERROR_INVALID_VALUE;
    auto it = module->globals.find(name);
    if (it != module->globals.end()) {
      if (dptr != nullptr) *dptr = it->second.first;
      if (bytes != nullptr) *bytes = it->second.second;
      return CUDA_SUCCESS;
    }
  }
  size_t size = 0;
  size_t init_offset = 0;
  bool has_init = false;
  if (!module->elf || !FindGlobal(module->image, name, &size, &init_offset, &has_init)) {
    return CUDA_ERROR_NOT_FOUND;
  }
  AllocRequest req;
  req.size = size;
  req.origin = Origin::kVariable;
  req.memory_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC;
  req.name = InternName(name);
  uintptr_t p = 0;
  if (CUresult r = Allocate(req, module->ctx, &p); r != CUDA_SUCCESS) return r;
  if (has_init) {
    std::memcpy(reinterpret_cast<void*>(p), module->image.data() + init_offset, size);
  } else {
    std::memset(reinterpret_cast<void*>(p), 0, size);
  }
  CUdeviceptr address = p;
  bool lost = false;
  bool alive = false;
  {
    std::lock_guard lock(R().mu);
    alive = Alive(module);
    if (alive) {
      auto [it, inserted] = module->globals.emplace(name, std::pair{CUdeviceptr{p}, size});
      lost = !inserted;  // another thread got there first
      address = it->second.first;
    }
  }
  if (lost || !alive) Free(p, Bit(Origin::kVariable), false, CUPTI_INVALID_STREAM_ID);
  if (!alive) return CUDA_ERROR_INVALID_VALUE;  // unloaded meanwhile
  if (dptr != nullptr) *dptr = address;
  if (bytes != nullptr) *bytes = size;
  return CUDA_SUCCESS;
}

CUresult LoadLibrary(CUlibrary* library, const void* code, const CUjit_option* jit_options,
                     void* const* jit_values, unsigned num_jit, const CUlibraryOption* options,
                     void* const* values, unsigned num_options) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (library == nullptr || (num_jit != 0 && (jit_options == nullptr || jit_values == nullptr)) ||
      (num_options != 0 && (options == nullptr || values == nullptr))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::string bytes;
  bool elf = false;
  if (CUresult r = CopyImage(code, false, &bytes, &elf); r != CUDA_SUCCESS) return r;
  auto* lib = new CUlib_st();
  lib->image = std::move(bytes);
  lib->elf = elf;
  std::lock_guard lock(R().mu);
  R().libraries.insert(lib);
  *library = lib;
  return CUDA_SUCCESS;
}

bool ValidLibrary(CUlib_st* library) {
  std::lock_guard lock(R().mu);
  return library != nullptr && R().libraries.count(library) != 0;
}

// The library's module in the current context, loaded (MODULE_LOADED) on first request.
CUresult LibraryModule(CUmodule* out, CUlibrary library) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidLibrary(library)) return CUDA_ERROR_INVALID_HANDLE;
  {
    std::lock_guard lock(R().mu);
    for (CUmod_st* m : library->modules) {
      if (m->ctx == ctx && Alive(m)) {
        *out = m;
        return CUDA_SUCCESS;
      }
    }
  }
  CUmod_st* m = NewModule(ctx, library->image, library->elf, library);
  {
    std::lock_guard lock(R().mu);
    if (R().libraries.count(library) == 0) {  // unloaded meanwhile
      R().retired.push_back(m);
      return CUDA_ERROR_INVALID_HANDLE;
    }
    R().modules.insert(m);
    library->modules.push_back(m);
  }
  Announce(CUPTI_CBID_RESOURCE_MODULE_LOADED, m);
  *out = m;
  return CUDA_SUCCESS;
}

CUresult UnloadLibrary(CUlibrary library) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  std::vector<CUmod_st*> loaded;
  std::vector<CUfunc_st*> kernels;
  {
    std::lock_guard lock(R().mu);
    if (library == nullptr || R().libraries.erase(library) == 0) return CUDA_ERROR_INVALID_VALUE;
    R().retired.push_back(library);
    for (CUmod_st* m : library->modules) {
      if (Alive(m)) loaded.push_back(m);
      R().modules.erase(m);
      R().retired.push_back(m);
    }
    for (const auto& [name, f] : library->kernels) kernels.push_back(f);
  }
  for (CUmod_st* m : loaded) Unload(m);
  Unregister(kernels);
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace gwsim::drv

using namespace gwsim::drv;  // NOLINT(google-build-using-namespace): the C ABI shims below

GWSIM_EXPORT CUresult CUDAAPI cuModuleLoad(CUmodule* module, const char* fname) {
  return TraceDriver(GWSIM_DRV(cuModuleLoad), cuModuleLoad_params{module, fname},
                     [&] { return LoadFile(module, fname); });
}

GWSIM_EXPORT CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
  return TraceDriver(GWSIM_DRV(cuModuleLoadData), cuModuleLoadData_params{module, image},
                     [&] { return Load(module, image, false); });
}

// JIT options are accepted and ignored (there is no JIT; nothing is written to log buffers).
GWSIM_EXPORT CUresult CUDAAPI cuModuleLoadDataEx(CUmodule* module, const void* image,
                                                 unsigned int numOptions, CUjit_option* options,
                                                 void** optionValues) {
  return TraceDriver(GWSIM_DRV(cuModuleLoadDataEx),
                     cuModuleLoadDataEx_params{module, image, numOptions, options, optionValues},
                     [&] {
                       if (numOptions != 0 && (options == nullptr || optionValues == nullptr)) {
                         if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
                         return CUDA_ERROR_INVALID_VALUE;
                       }
                       return Load(module, image, false);
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) {
  return TraceDriver(GWSIM_DRV(cuModuleLoadFatBinary),
                     cuModuleLoadFatBinary_params{module, fatCubin},
                     [&] { return Load(module, fatCubin, true); });
}

GWSIM_EXPORT CUresult CUDAAPI cuModuleUnload(CUmodule hmod) {
  return TraceDriver(GWSIM_DRV(cuModuleUnload), cuModuleUnload_params{hmod},
                     [&] { return UnloadModule(hmod); });
}

GWSIM_EXPORT CUresult CUDAAPI cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod,
                                                  const char* name) {
  return TraceDriver(GWSIM_DRV(cuModuleGetFunction), cuModuleGetFunction_params{hfunc, hmod, name},
                     [&] { return GetFunction(hfunc, hmod, name); });
}

GWSIM_EXPORT CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr* dptr, size_t* bytes, CUmodule hmod,
                                                   const char* name) {
  return TraceDriver(GWSIM_DRV(cuModuleGetGlobal_v2),
                     cuModuleGetGlobal_v2_params{dptr, bytes, hmod, name},
                     [&] { return GetGlobal(dptr, bytes, hmod, name); });
}

GWSIM_EXPORT CUresult CUDAAPI cuLibraryLoadData(CUlibrary* library, const void* code,
                                                CUjit_option* jitOptions, void** jitOptionsValues,
                                                unsigned int numJitOptions,
                                                CUlibraryOption* libraryOptions,
                                                void** libraryOptionValues,
                                                unsigned int numLibraryOptions) {
  return TraceDriver(
      GWSIM_DRV(cuLibraryLoadData),
      cuLibraryLoadData_params{library, code, jitOptions, jitOptionsValues, numJitOptions,
                               libraryOptions, libraryOptionValues, numLibraryOptions},
      [&] {
        return LoadLibrary(library, code, jitOptions, jitOptionsValues, numJitOptions,
                           libraryOptions, libraryOptionValues, numLibraryOptions);
      });
}

GWSIM_EXPORT CUresult CUDAAPI cuLibraryUnload(CUlibrary library) {
  return TraceDriver(GWSIM_DRV(cuLibraryUnload), cuLibraryUnload_params{library},
                     [&] { return UnloadLibrary(library); });
}

GWSIM_EXPORT CUresult CUDAAPI cuLibraryGetKernel(CUkernel* pKernel, CUlibrary library,
                                                 const char* name) {
  return TraceDriver(GWSIM_DRV(cuLibraryGetKernel),
                     cuLibraryGetKernel_params{pKernel, library, name}, [&] {
                       if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
                       if (pKernel == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
                       if (!ValidLibrary(library)) return CUDA_ERROR_INVALID_HANDLE;
                       CUfunc_st* f = nullptr;
                       const CUresult r = LibraryKernel(library, name, &f);
                       if (r == CUDA_SUCCESS) *pKernel = reinterpret_cast<CUkernel>(f);
                       return r;
                     });
}

GWSIM_EXPORT CUresult CUDAAPI cuLibraryGetModule(CUmodule* pMod, CUlibrary library) {
  return TraceDriver(GWSIM_DRV(cuLibraryGetModule), cuLibraryGetModule_params{pMod, library},
                     [&] { return LibraryModule(pMod, library); });
}
