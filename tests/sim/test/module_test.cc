// Modules and libraries: loading images (ELF, PTX text, fatbinary, file), finding functions and
// globals, launching module functions, MODULE_LOADED / MODULE_UNLOAD_STARTING resource
// callbacks, unloading, and the errors CUDA documents.
#include <elf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "recorder.h"

namespace gwsim::test {
namespace {

using Bytes = std::vector<unsigned char>;

template <typename T>
void Append(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// A minimal cubin built by hand: an ELF64 file for EM_CUDA whose string table holds `names`
// (NUL-terminated), and, when `global` is set, a symbol table with that one object symbol whose
// initial value `init` lies in a data section.
Bytes Cubin(const std::vector<std::string>& names, const char* global = nullptr,
            const Bytes& init = {}) {
  std::string strtab(1, '\0');
  for (const std::string& n : names) strtab += n + '\0';
  const size_t global_name = strtab.size();
  if (global != nullptr) strtab += std::string(global) + '\0';
  std::string out(sizeof(Elf64_Ehdr), '\0');
  const size_t strtab_offset = out.size();
  out += strtab;
  const size_t data_offset = out.size();
  out.append(init.begin(), init.end());
  const size_t symtab_offset = out.size();
  if (global != nullptr) {
    Append(&out, Elf64_Sym{});
    Elf64_Sym sym{};
    sym.st_name = static_cast<Elf64_Word>(global_name);
    sym.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT);
    sym.st_shndx = 2;
    sym.st_size = init.size();
    Append(&out, sym);
  }
  const size_t shoff = out.size();
  Append(&out, Elf64_Shdr{});
  Elf64_Shdr sh{};
  sh.sh_type = SHT_STRTAB;
  sh.sh_offset = strtab_offset;
  sh.sh_size = strtab.size();
  Append(&out, sh);
  sh = Elf64_Shdr{};
  sh.sh_type = SHT_PROGBITS;
  sh.sh_offset = data_offset;
  sh.sh_size = init.size();
  Append(&out, sh);
  sh = Elf64_Shdr{};
  sh.sh_type = SHT_SYMTAB;
  sh.sh_offset = symtab_offset;
  sh.sh_size = global != nullptr ? 2 * sizeof(Elf64_Sym) : 0;
  sh.sh_link = 1;
  sh.sh_entsize = sizeof(Elf64_Sym);
  Append(&out, sh);
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_EXEC;
  eh.e_machine = EM_CUDA;
  eh.e_version = EV_CURRENT;
  eh.e_shoff = shoff;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = 4;
  std::memcpy(out.data(), &eh, sizeof(eh));
  return Bytes(out.begin(), out.end());
}

// A fatbinary holding `payload`: the 16-byte header (magic, version, header size, fat size).
Bytes Fatbin(const Bytes& payload) {
  std::string out;
  Append(&out, uint32_t{0xBA55ED50u});
  Append(&out, uint16_t{1});
  Append(&out, uint16_t{16});
  Append(&out, uint64_t{payload.size()});
  out.append(payload.begin(), payload.end());
  return Bytes(out.begin(), out.end());
}

constexpr char kPtx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n\n"
    ".visible .entry _Z3ptxPf(\n\t.param .u64 _Z3ptxPf_param_0\n)\n{\n\tret;\n}\n";

// What MODULE_LOADED / MODULE_UNLOAD_STARTING delivered.
struct ModuleEvent {
  CUpti_CallbackId cbid = 0;
  CUcontext context = nullptr;
  uint32_t id = 0;
  size_t size = 0;
  std::string bytes;
};

class ModuleEvents {
 public:
  ModuleEvents()
      : rec_({kResource, kDriver},
             [this](CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
               if (domain != kResource || (cbid != CUPTI_CBID_RESOURCE_MODULE_LOADED &&
                                           cbid != CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING)) {
                 return;
               }
               const auto* r = static_cast<const CUpti_ResourceData*>(data);
               const auto* m = static_cast<const CUpti_ModuleResourceData*>(r->resourceDescriptor);
               ModuleEvent e;
               e.cbid = cbid;
               e.context = r->context;
               e.id = m->moduleId;
               e.size = m->cubinSize;
               e.bytes.assign(m->pCubin, m->cubinSize);
               events_.push_back(e);
             }) {}
  std::vector<ModuleEvent> Take() {
    std::vector<ModuleEvent> out;
    out.swap(events_);
    return out;
  }
  Recorder& recorder() { return rec_; }

 private:
  std::vector<ModuleEvent> events_;
  Recorder rec_;
};

std::string AsString(const Bytes& b) { return std::string(b.begin(), b.end()); }

TEST(Modules, LoadFindLaunchAndUnload) {
  InitCuda();
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuCtxGetCurrent(&ctx), CUDA_SUCCESS);
  const Bytes image =
      Cubin({"_Z6squarePf", ".text._Z5shiftPi"}, "g_table", {1, 2, 3, 4, 5, 6, 7, 8});
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMORY2});
  ModuleEvents events;
  CUmodule mod = nullptr;
  ASSERT_EQ(cuModuleLoadData(&mod, image.data()), CUDA_SUCCESS);
  auto loaded = events.Take();
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].cbid, CUPTI_CBID_RESOURCE_MODULE_LOADED);
  EXPECT_EQ(loaded[0].context, ctx);
  EXPECT_NE(loaded[0].id, 0u);
  EXPECT_EQ(loaded[0].size, image.size());
  EXPECT_EQ(loaded[0].bytes, AsString(image));

  CUfunction f = nullptr;
  ASSERT_EQ(cuModuleGetFunction(&f, mod, "_Z6squarePf"), CUDA_SUCCESS);
  CUfunction again = nullptr;
  ASSERT_EQ(cuModuleGetFunction(&again, mod, "_Z6squarePf"), CUDA_SUCCESS);
  EXPECT_EQ(again, f);
  CUfunction shift = nullptr;
  EXPECT_EQ(cuModuleGetFunction(&shift, mod, "_Z5shiftPi"), CUDA_SUCCESS);  // ".text.<name>"
  EXPECT_EQ(cuModuleGetFunction(&again, mod, "_Z6square"), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuModuleGetFunction(&again, mod, "squarePf"), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuModuleGetFunction(&again, mod, "missing"), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuModuleGetFunction(&again, mod, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuModuleGetFunction(nullptr, mod, "_Z6squarePf"), CUDA_ERROR_INVALID_VALUE);
  const char* name = nullptr;
  ASSERT_EQ(cuFuncGetName(&name, f), CUDA_SUCCESS);
  EXPECT_STREQ(name, "_Z6squarePf");

  events.recorder().Take();
  ASSERT_EQ(cuLaunchKernel(f, 2, 1, 1, 64, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  const auto launches = events.recorder().Of(kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].symbol, "_Z6squarePf");

  CUdeviceptr global = 0;
  size_t bytes = 0;
  ASSERT_EQ(cuModuleGetGlobal(&global, &bytes, mod, "g_table"), CUDA_SUCCESS);
  EXPECT_EQ(bytes, 8u);
  unsigned char value[8] = {};
  ASSERT_EQ(cuMemcpyDtoH(value, global, 8), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(value, "\1\2\3\4\5\6\7\10", 8), 0);  // the initial value in the image
  CUdeviceptr same = 0;
  ASSERT_EQ(cuModuleGetGlobal(&same, nullptr, mod, "g_table"), CUDA_SUCCESS);
  EXPECT_EQ(same, global);
  EXPECT_EQ(cuModuleGetGlobal(&same, &bytes, mod, "_Z6squarePf"), CUDA_ERROR_NOT_FOUND);

  ASSERT_EQ(cuModuleUnload(mod), CUDA_SUCCESS);
  const auto unloaded = events.Take();
  ASSERT_EQ(unloaded.size(), 1u);
  EXPECT_EQ(unloaded[0].cbid, CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING);
  EXPECT_EQ(unloaded[0].id, loaded[0].id);
  EXPECT_EQ(unloaded[0].bytes, AsString(image));
  // Its functions are gone with it; unloading twice fails.
  EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuModuleGetFunction(&again, mod, "_Z6squarePf"), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuModuleUnload(mod), CUDA_ERROR_INVALID_VALUE);

  const Activity a = collector.Collect();
  ASSERT_EQ(a.kernels.size(), 1u);
  EXPECT_STREQ(a.kernels[0].name, "_Z6squarePf");
  EXPECT_EQ(a.kernels[0].gridX, 2);
  EXPECT_EQ(a.kernels[0].blockX, 64);
  std::vector<CUpti_ActivityMemory4> statics;
  for (const auto& r : a.memory) {
    if (r.memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC) statics.push_back(r);
  }
  ASSERT_EQ(statics.size(), 2u);
  EXPECT_EQ(statics[0].memoryOperationType, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
  EXPECT_EQ(statics[1].memoryOperationType, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE);
  EXPECT_EQ(statics[0].address, global);
  EXPECT_EQ(statics[0].bytes, 8u);
  EXPECT_STREQ(statics[0].name, "g_table");
}

TEST(Modules, ImagesThatAreNotModulesFail) {
  InitCuda();
  CUmodule mod = nullptr;
  EXPECT_EQ(cuModuleLoadData(&mod, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuModuleLoadData(nullptr, kPtx), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuModuleLoadData(&mod, "not a module"), CUDA_ERROR_INVALID_IMAGE);
  EXPECT_EQ(cuModuleLoadData(&mod, ""), CUDA_ERROR_INVALID_IMAGE);
  Bytes wrong_machine = Cubin({"k"});
  wrong_machine[offsetof(Elf64_Ehdr, e_machine)] = EM_X86_64;
  EXPECT_EQ(cuModuleLoadData(&mod, wrong_machine.data()), CUDA_ERROR_INVALID_IMAGE);
  const Bytes image = Cubin({"k"});
  EXPECT_EQ(cuModuleLoadFatBinary(&mod, image.data()), CUDA_ERROR_INVALID_IMAGE);  // not a fatbin
  EXPECT_EQ(cuModuleLoadDataEx(&mod, image.data(), 1, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuModuleLoad(&mod, "/nonexistent/gwsim.cubin"), CUDA_ERROR_FILE_NOT_FOUND);
  EXPECT_EQ(cuModuleUnload(nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST(Modules, PtxFatbinariesAndFiles) {
  InitCuda();
  ModuleEvents events;
  // PTX text: kernels are its .entry names. JIT options are accepted.
  CUjit_option options[] = {CU_JIT_MAX_REGISTERS};
  void* values[] = {reinterpret_cast<void*>(uintptr_t{32})};
  CUmodule ptx = nullptr;
  ASSERT_EQ(cuModuleLoadDataEx(&ptx, kPtx, 1, options, values), CUDA_SUCCESS);
  CUfunction f = nullptr;
  EXPECT_EQ(cuModuleGetFunction(&f, ptx, "_Z3ptxPf"), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleGetFunction(&f, ptx, "_Z3ptx"), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuModuleGetFunction(&f, ptx, "_Z3ptxPf_param_0"), CUDA_ERROR_NOT_FOUND);

  // A fatbinary around a cubin, and the wrapper nvcc's host stubs pass around.
  const Bytes cubin = Cubin({"_Z3fatv"});
  const Bytes fat = Fatbin(cubin);
  CUmodule from_fat = nullptr;
  ASSERT_EQ(cuModuleLoadFatBinary(&from_fat, fat.data()), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleGetFunction(&f, from_fat, "_Z3fatv"), CUDA_SUCCESS);
  struct Wrapper {
    int magic;
    int version;
    const void* data;
    void* unused;
  } const wrapper{0x466243b1, 1, fat.data(), nullptr};
  CUmodule from_wrapper = nullptr;
  ASSERT_EQ(cuModuleLoadFatBinary(&from_wrapper, &wrapper), CUDA_SUCCESS);

  // From a file.
  char path[] = "/tmp/gwsim-module-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, cubin.data(), cubin.size()), static_cast<ssize_t>(cubin.size()));
  close(fd);
  CUmodule from_file = nullptr;
  ASSERT_EQ(cuModuleLoad(&from_file, path), CUDA_SUCCESS);
  unlink(path);
  EXPECT_EQ(cuModuleGetFunction(&f, from_file, "_Z3fatv"), CUDA_SUCCESS);

  const auto loaded = events.Take();
  ASSERT_EQ(loaded.size(), 4u);
  EXPECT_EQ(loaded[0].size, sizeof(kPtx));
  EXPECT_EQ(loaded[0].bytes, std::string(kPtx, sizeof(kPtx)));
  EXPECT_EQ(loaded[1].size, fat.size());
  EXPECT_EQ(loaded[2].bytes, AsString(fat));
  EXPECT_EQ(loaded[3].bytes, AsString(cubin));
  for (size_t i = 1; i < loaded.size(); ++i) EXPECT_GT(loaded[i].id, loaded[i - 1].id);
  for (CUmodule m : {ptx, from_fat, from_wrapper, from_file}) {
    ASSERT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
  }
  EXPECT_EQ(events.Take().size(), 4u);
}

TEST(Modules, CallsAreTracedWithTheirParams) {
  InitCuda();
  const Bytes image = Cubin({"_Z4workv"});
  const void* seen_image = nullptr;
  const char* seen_name = nullptr;
  Recorder rec({kDriver}, [&](CUpti_CallbackDomain, CUpti_CallbackId cbid, const void* data) {
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    if (cb->callbackSite != CUPTI_API_ENTER) return;
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData) {
      seen_image = static_cast<const cuModuleLoadData_params*>(cb->functionParams)->image;
    } else if (cbid == CUPTI_DRIVER_TRACE_CBID_cuModuleGetFunction) {
      seen_name = static_cast<const cuModuleGetFunction_params*>(cb->functionParams)->name;
    }
  });
  CUmodule mod = nullptr;
  CUfunction f = nullptr;
  const char* kernel = "_Z4workv";
  ASSERT_EQ(cuModuleLoadData(&mod, image.data()), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&f, mod, kernel), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleUnload(mod), CUDA_SUCCESS);
  EXPECT_EQ(seen_image, image.data());
  EXPECT_EQ(seen_name, kernel);
  std::vector<std::string> names;
  for (const Event& e : rec.Take()) {
    if (e.site == CUPTI_API_EXIT) names.push_back(e.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"cuModuleLoadData", "cuModuleGetFunction",
                                             "cuModuleUnload"}));
}

TEST(Libraries, KernelsModulesAndUnloading) {
  InitCuda();
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuCtxGetCurrent(&ctx), CUDA_SUCCESS);
  const Bytes image = Cubin({"_Z4libkv", "_Z5otherv"});
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL});
  ModuleEvents events;
  CUlibrary lib = nullptr;
  ASSERT_EQ(cuLibraryLoadData(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
            CUDA_SUCCESS);
  EXPECT_TRUE(events.Take().empty());  // loaded into a context when it is used there
  CUkernel kernel = nullptr;
  ASSERT_EQ(cuLibraryGetKernel(&kernel, lib, "_Z4libkv"), CUDA_SUCCESS);
  CUkernel again = nullptr;
  ASSERT_EQ(cuLibraryGetKernel(&again, lib, "_Z4libkv"), CUDA_SUCCESS);
  EXPECT_EQ(again, kernel);
  EXPECT_EQ(cuLibraryGetKernel(&again, lib, "_Z4lib"), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuLibraryGetKernel(&again, nullptr, "_Z4libkv"), CUDA_ERROR_INVALID_HANDLE);
  CUfunction f = nullptr;
  ASSERT_EQ(cuKernelGetFunction(&f, kernel), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);

  CUmodule mod = nullptr;
  ASSERT_EQ(cuLibraryGetModule(&mod, lib), CUDA_SUCCESS);
  CUmodule same = nullptr;
  ASSERT_EQ(cuLibraryGetModule(&same, lib), CUDA_SUCCESS);
  EXPECT_EQ(same, mod);
  const auto loaded = events.Take();
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].cbid, CUPTI_CBID_RESOURCE_MODULE_LOADED);
  EXPECT_EQ(loaded[0].context, ctx);
  EXPECT_EQ(loaded[0].bytes, AsString(image));
  CUfunction from_module = nullptr;
  ASSERT_EQ(cuModuleGetFunction(&from_module, mod, "_Z4libkv"), CUDA_SUCCESS);
  EXPECT_EQ(from_module, f);
  EXPECT_EQ(cuModuleUnload(mod), CUDA_ERROR_NOT_PERMITTED);  // the library owns it

  ASSERT_EQ(cuLibraryUnload(lib), CUDA_SUCCESS);
  const auto unloaded = events.Take();
  ASSERT_EQ(unloaded.size(), 1u);
  EXPECT_EQ(unloaded[0].cbid, CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING);
  EXPECT_EQ(unloaded[0].id, loaded[0].id);
  EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuKernelGetFunction(&f, kernel), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuLibraryUnload(lib), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLibraryGetModule(&mod, lib), CUDA_ERROR_INVALID_HANDLE);
  CUlibrary bad = nullptr;
  EXPECT_EQ(cuLibraryLoadData(&bad, nullptr, nullptr, nullptr, 0, nullptr, nullptr, 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLibraryLoadData(&bad, "junk", nullptr, nullptr, 0, nullptr, nullptr, 0),
            CUDA_ERROR_INVALID_IMAGE);
  const Activity a = collector.Collect();
  ASSERT_EQ(a.kernels.size(), 1u);
  EXPECT_STREQ(a.kernels[0].name, "_Z4libkv");
}

}  // namespace
}  // namespace gwsim::test
