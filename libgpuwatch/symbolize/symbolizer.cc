#include "libgpuwatch/symbolize/symbolizer.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <dwarf.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#include "libgpuwatch/base/enum_names.h"
#include "libgpuwatch/base/log.h"
#include "libgpuwatch/base/mutex.h"
#include "libgpuwatch/symbolize/libdw.h"
#include "libgpuwatch/symbolize/symbol_table.h"

namespace gpuwatch {

namespace {

using internal::LibdwApi;

std::string Demangle(const char* name) {
  if (name == nullptr) return {};
  int status = 0;
  char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || demangled == nullptr) return name;
  std::string result(demangled);
  std::free(demangled);  // NOLINT(cppcoreguidelines-no-malloc): __cxa_demangle's contract
  return result;
}

std::string ExecutablePath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return {};
  return std::string(buf, static_cast<size_t>(n));
}

// The dynamic loader's load and unload counters, to tell cheaply whether a
// dwfl module list can be stale.
struct LoaderGeneration {
  unsigned long long adds = 0;
  unsigned long long subs = 0;
  bool operator==(const LoaderGeneration&) const = default;
};

LoaderGeneration CurrentLoaderGeneration() {
  LoaderGeneration gen;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* data) -> int {
        if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
          auto* g = static_cast<LoaderGeneration*>(data);
          g->adds = info->dlpi_adds;
          g->subs = info->dlpi_subs;
        }
        return 1;  // the counters are global; the first object is enough
      },
      &gen);
  return gen;
}

struct LoadedModule {
  std::string path;
  uintptr_t start = 0;
  uintptr_t end = 0;
};

// The loaded objects as the dynamic loader knows them, with the address
// range of their PT_LOAD segments. Objects without a path (the vdso) are
// left out; dladdr covers them.
std::vector<LoadedModule> LoadedModules() {
  struct Ctx {
    std::vector<LoadedModule> modules;
    std::string exe;
  } ctx{{}, ExecutablePath()};
  // Collect only; dwfl work happens after, outside the loader's lock.
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* c = static_cast<Ctx*>(data);
        const char* name = info->dlpi_name;
        LoadedModule module;
        if (name == nullptr || name[0] == '\0') {
          if (c->modules.empty()) module.path = c->exe;  // the main program comes first
        } else if (name[0] == '/') {
          module.path = name;
        }
        if (module.path.empty()) return 0;
        bool first = true;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          const uintptr_t align = ph.p_align > 1 ? ph.p_align : 1;
          const uintptr_t lo = info->dlpi_addr + (ph.p_vaddr & ~(align - 1));
          const uintptr_t hi = info->dlpi_addr + ph.p_vaddr + ph.p_memsz;
          module.start = first ? lo : std::min(module.start, lo);
          module.end = first ? hi : std::max(module.end, hi);
          first = false;
        }
        if (!first) c->modules.push_back(std::move(module));
        return 0;
      },
      &ctx);
  return std::move(ctx.modules);
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

const char* SymbolizerBackendName(SymbolizerBackend backend) {
  static constexpr const char* kNames[] = {"none", "libdw", "dladdr"};
  static_assert(std::size(kNames) == static_cast<size_t>(SymbolizerBackend::kDladdr) + 1);
  return EnumName(backend, kNames, "none");
}

// Why the indexes below exist: in elfutils 0.188, dwfl_module_addrinfo scans
// the whole symbol table on every call (about 110 us per pc in libstdc++,
// far worse in libtorch), and dwarf_getscopes walks the compilation unit's
// DIE tree from the top on every call (about 600 us per pc in a unit that
// includes heavy headers). A report resolves tens of thousands of pcs, so
// each table is read once into a sorted vector and searched by address.

// A subprogram's address range inside one compilation unit (DWARF addresses,
// i.e. without the module bias).
struct FunctionRange {
  Dwarf_Addr start = 0;
  Dwarf_Addr end = 0;
  Dwarf_Die die{};
};

struct Symbolizer::Session {
  // dwfl keeps a pointer to the callbacks, and they to debuginfo_path, for
  // the whole session.
  char* debuginfo_path = nullptr;
  Dwfl_Callbacks callbacks{};
  Dwfl* dwfl = nullptr;
  LoaderGeneration reported;
  int reports = 0;
  // Per module (sorted by start, best binding last among equal starts).
  std::unordered_map<Dwfl_Module*, std::vector<SymbolEntry>> symbols;
  // Per module, the symbols around its last one-pass search (libc's).
  std::unordered_map<Dwfl_Module*, SymbolWindow> windows;
  size_t passes = 0;
  // Per compilation unit, keyed by module and CU DIE offset.
  std::map<std::pair<Dwfl_Module*, Dwarf_Off>, std::vector<FunctionRange>> functions;
  // Demangled names by the address of the mangled string (owned by libelf
  // or libdw, so stable for the session): many pcs share a function, and
  // demangling is a good part of the cost of a new pc.
  std::unordered_map<const char*, std::string> demangled;

  const std::string& DemangleCached(const char* name) {
    static const std::string kEmpty;
    if (name == nullptr) return kEmpty;
    auto it = demangled.find(name);
    if (it == demangled.end()) it = demangled.emplace(name, Demangle(name)).first;
    return it->second;
  }
};

Symbolizer::Symbolizer(const SymbolizerOptions& options) : options_(options) {
  backend_ = SymbolizerBackend::kDladdr;
  if (options_.force_dladdr) return;
  api_ = options_.libdw_soname == nullptr ? DefaultLibdw() : LoadLibdw(options_.libdw_soname);
  if (api_ == nullptr) return;
  std::lock_guard<Mutex> lock(LibdwMutex());
  session_ = std::make_unique<Session>();
  session_->callbacks.find_elf = api_->dwfl_linux_proc_find_elf;
  session_->callbacks.find_debuginfo = api_->dwfl_standard_find_debuginfo;
  session_->callbacks.debuginfo_path = &session_->debuginfo_path;
  session_->dwfl = api_->dwfl_begin(&session_->callbacks);
  if (session_->dwfl == nullptr) {
    Warn("libdw could not start a session (%s); reports show no file:line", api_->dwfl_errmsg(-1));
    session_.reset();
    return;
  }
  ReportModules();
  backend_ = SymbolizerBackend::kLibdw;
}

Symbolizer::~Symbolizer() {
  if (session_ != nullptr && session_->dwfl != nullptr) {
    std::lock_guard<Mutex> lock(LibdwMutex());
    api_->dwfl_end(session_->dwfl);
  }
}

// Caller holds LibdwMutex().
//
// Modules come from dl_iterate_phdr, not /proc/self/maps (what
// dwfl_linux_proc_report reads): libelf mmaps the ELF files it opens, and
// once a session has opened a library, the maps file shows that read-only
// mapping next to the loaded one, which dwfl merges into the module and so
// computes a wrong load bias for every later report. The loader's own list
// has no such ghosts. Each file is opened lazily by find_elf, on the first
// pc that falls in it.
void Symbolizer::ReportModules() {
  session_->reported = CurrentLoaderGeneration();
  // A re-report frees the modules that went away, and a new module may reuse
  // a freed one's address: the indexes keyed by module start over.
  if (session_->reports++ > 0) {
    session_->symbols.clear();
    session_->windows.clear();
    session_->functions.clear();
    session_->demangled.clear();
  }
  api_->dwfl_report_begin(session_->dwfl);
  for (const LoadedModule& module : LoadedModules()) {
    api_->dwfl_report_module(session_->dwfl, module.path.c_str(), module.start, module.end);
  }
  api_->dwfl_report_end(session_->dwfl, nullptr, nullptr);
}

size_t Symbolizer::symbol_tables_read() const {
  return session_ != nullptr ? session_->symbols.size() : 0;
}

size_t Symbolizer::symbol_passes() const { return session_ != nullptr ? session_->passes : 0; }

std::span<const Frame> Symbolizer::SymbolizeAll(uintptr_t pc, bool is_return_address) {
  auto& cache = is_return_address ? cache_ : exact_cache_;
  auto it = cache.find(pc);
  if (it == cache.end()) {
    // pc - 1 lands inside the call instruction; see the header.
    const uintptr_t lookup = is_return_address && pc > 0 ? pc - 1 : pc;
    it = cache.emplace(pc, Resolve(pc, lookup)).first;
  }
  return it->second;
}

void Symbolizer::SymbolizeStack(std::span<const uintptr_t> pcs, std::vector<Frame>* out) {
  for (const uintptr_t pc : pcs) {
    const std::span<const Frame> frames = SymbolizeAll(pc);
    out->insert(out->end(), frames.begin(), frames.end());
  }
}

std::vector<Frame> Symbolizer::SymbolizeStack(std::span<const uintptr_t> pcs) {
  std::vector<Frame> out;
  out.reserve(pcs.size());
  SymbolizeStack(pcs, &out);
  return out;
}

std::vector<Frame> Symbolizer::Resolve(uintptr_t pc, uintptr_t lookup) {
  std::vector<Frame> frames;
  if (backend_ == SymbolizerBackend::kLibdw && libdw_allowed_) {
    frames = ResolveWithLibdw(pc, lookup);
  }
  // dladdr also covers what dwfl cannot place (e.g. a module it failed to
  // open): a name and a module beat nothing.
  if (frames.empty() || frames.front().module.empty()) frames = ResolveWithDladdr(pc, lookup);
  if (frames.empty()) {
    Frame unknown;
    unknown.pc = pc;
    frames.push_back(std::move(unknown));
  }
  return frames;
}

std::vector<Frame> Symbolizer::ResolveWithDladdr(uintptr_t pc, uintptr_t lookup) {
  Frame frame;
  frame.pc = pc;
  Dl_info info{};
  link_map* map = nullptr;
  // A pc is an address in this process; dladdr1 takes it as a pointer.
  if (dladdr1(reinterpret_cast<void*>(lookup),  // NOLINT(performance-no-int-to-ptr)
              &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0) {
    return {frame};
  }
  if (map != nullptr) {
    frame.offset = pc - map->l_addr;
    // The main program's link_map has an empty name; dladdr would give
    // argv[0], which may be relative or wrong.
    frame.module = (map->l_name != nullptr && map->l_name[0] != '\0') ? std::string(map->l_name)
                                                                      : ExecutablePath();
  } else if (info.dli_fname != nullptr) {
    frame.module = info.dli_fname;
    frame.offset = pc - reinterpret_cast<uintptr_t>(info.dli_fbase);
  }
  if (info.dli_sname != nullptr && info.dli_saddr != nullptr) {
    frame.function = Demangle(info.dli_sname);
  }
  return {frame};
}

namespace {

bool IsScopeTag(int tag) {
  return tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block ||
         tag == DW_TAG_try_block || tag == DW_TAG_catch_block;
}

// Collects the subprograms with code under `die` and its siblings. Does not
// descend into subprograms (their scopes are searched per pc).
void CollectFunctions(const LibdwApi& dw, Dwarf_Die die, int depth,
                      std::vector<FunctionRange>* out) {
  do {
    const int tag = dw.dwarf_tag(&die);
    // Most subprograms of a unit are the headers' declarations, without code.
    // dwarf_ranges finds a subprogram's range only in DW_AT_low_pc (with
    // DW_AT_high_pc) or DW_AT_ranges: asking whether either is there first
    // skips its decoding for the rest (a small CUDA program's unit: 6 of 242
    // subprograms have code; 0.10 million instructions instead of 0.26).
    if (tag == DW_TAG_subprogram &&
        (dw.dwarf_hasattr(&die, DW_AT_low_pc) != 0 || dw.dwarf_hasattr(&die, DW_AT_ranges) != 0)) {
      Dwarf_Addr base = 0;
      Dwarf_Addr start = 0;
      Dwarf_Addr end = 0;
      ptrdiff_t offset = 0;
      while ((offset = dw.dwarf_ranges(&die, offset, &base, &start, &end)) > 0) {
        if (end > start) out->push_back({start, end, die});
      }
    } else if (depth < 64 && (tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
                              tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
                              tag == DW_TAG_module || tag == DW_TAG_lexical_block)) {
      Dwarf_Die child;
      if (dw.dwarf_child(&die, &child) == 0) CollectFunctions(dw, child, depth + 1, out);
    }
    Dwarf_Die next;
    if (dw.dwarf_siblingof(&die, &next) != 0) break;
    die = next;
  } while (true);
}

// The child scope of `parent` that contains `addr`, looking through lexical
// blocks that carry no address range of their own.
bool FindChildScope(const LibdwApi& dw, Dwarf_Die* parent, Dwarf_Addr addr, int depth,
                    Dwarf_Die* result) {
  Dwarf_Die child;
  if (depth > 64 || dw.dwarf_child(parent, &child) != 0) return false;
  do {
    const int tag = dw.dwarf_tag(&child);
    if (IsScopeTag(tag)) {
      if (dw.dwarf_haspc(&child, addr) > 0) {
        *result = child;
        return true;
      }
      if (tag == DW_TAG_lexical_block && dw.dwarf_hasattr(&child, DW_AT_low_pc) == 0 &&
          dw.dwarf_hasattr(&child, DW_AT_ranges) == 0 &&
          FindChildScope(dw, &child, addr, depth + 1, result)) {
        return true;
      }
    }
    Dwarf_Die next;
    if (dw.dwarf_siblingof(&child, &next) != 0) break;
    child = next;
  } while (true);
  return false;
}

}  // namespace

std::vector<Frame> Symbolizer::ResolveWithLibdw(uintptr_t pc, uintptr_t lookup) {
  std::lock_guard<Mutex> lock(LibdwMutex());
  const LibdwApi& dw = *api_;
  // Something was dlopen'ed or dlclose'd since the modules were reported.
  // Checked on every new pc (not only on a miss): a new library can land
  // where a closed one was.
  if (!(CurrentLoaderGeneration() == session_->reported)) ReportModules();
  Dwfl_Module* mod = dw.dwfl_addrmodule(session_->dwfl, lookup);
  if (mod == nullptr) return {};

  Frame base;
  base.pc = pc;
  const char* module_name =
      dw.dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  if (module_name != nullptr) base.module = module_name;
  GElf_Addr bias = 0;
  if (dw.dwfl_module_getelf(mod, &bias) != nullptr) base.offset = pc - bias;

  // The symbol table names the function that really contains the pc (the
  // outermost one when code was inlined into it).
  auto sym_it = session_->symbols.find(mod);
  if (sym_it == session_->symbols.end()) {
    // libc's frames in most stacks are its start-up frames, whose names
    // alone are shown: found in one pass, not by reading and sorting its
    // whole table (from its debug file, where one is installed); the next
    // one, near the first, in the symbols the pass kept around it.
    const char* once = nullptr;
    bool found = false;
    if (StartsWith(Basename(base.module), "libc.so")) {
      SymbolWindow& window = session_->windows[mod];
      found = FindSymbolInWindow(dw, mod, window, lookup, &once);
      if (!found) {
        ++session_->passes;
        found = FindSymbolInOnePass(dw, mod, lookup, &once, &window);
      }
    }
    if (found) {
      const std::string& function = session_->DemangleCached(once);
      if (IsStartupFunction(function, base.module)) {
        base.function = function;
        return {base};
      }
    }
    sym_it = session_->symbols.emplace(mod, ReadFunctionSymbols(dw, mod)).first;
  }
  const std::string& outer_function = session_->DemangleCached(FindSymbol(sym_it->second, lookup));
  if (IsStartupFunction(outer_function, base.module)) {
    // Named by the symbol table alone: libc's line tables are in a separate
    // debug file (libc6-dbg) that libdw decompresses whole on first use,
    // about 200 million instructions, for a line below main nobody reads.
    base.function = outer_function;
    return {base};
  }

  // The line table gives the innermost location, inside any inlined code.
  Frame innermost = base;
  if (Dwfl_Line* line = dw.dwfl_module_getsrc(mod, lookup); line != nullptr) {
    int lineno = 0;
    const char* file = dw.dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr);
    if (file != nullptr) innermost.file = file;
    innermost.line = lineno;
  }

  // Scopes containing the pc, innermost first, ending with the subprogram.
  std::vector<Dwarf_Die> scopes;
  Dwarf_Addr cu_bias = 0;
  Dwarf_Die* cu = options_.expand_inlines ? dw.dwfl_module_addrdie(mod, lookup, &cu_bias) : nullptr;
  if (cu != nullptr) {
    const Dwarf_Addr addr = lookup - cu_bias;
    auto fn_it = session_->functions.find({mod, dw.dwarf_dieoffset(cu)});
    if (fn_it == session_->functions.end()) {
      std::vector<FunctionRange> ranges;
      Dwarf_Die child;
      if (dw.dwarf_child(cu, &child) == 0) CollectFunctions(dw, child, 0, &ranges);
      std::sort(ranges.begin(), ranges.end(),
                [](const FunctionRange& a, const FunctionRange& b) { return a.start < b.start; });
      fn_it = session_->functions
                  .emplace(std::make_pair(mod, dw.dwarf_dieoffset(cu)), std::move(ranges))
                  .first;
    }
    const std::vector<FunctionRange>& ranges = fn_it->second;
    auto it = std::upper_bound(ranges.begin(), ranges.end(), addr,
                               [](Dwarf_Addr a, const FunctionRange& r) { return a < r.start; });
    if (it != ranges.begin() && addr < std::prev(it)->end) {
      Dwarf_Die scope = std::prev(it)->die;
      scopes.push_back(scope);
      Dwarf_Die inner;
      while (FindChildScope(dw, &scope, addr, 0, &inner)) {
        scopes.push_back(inner);
        scope = inner;
      }
      std::reverse(scopes.begin(), scopes.end());
    } else if (ranges.empty()) {
      // Nothing indexed in this unit (e.g. its functions sit in partial
      // units, as dwz leaves them): the slow, general walk. Not done for a
      // pc in a gap of an indexed unit (padding between functions), where
      // it would walk the whole unit to find nothing.
      Dwarf_Die* found = nullptr;
      const int n = dw.dwarf_getscopes(cu, addr, &found);
      if (n > 0) scopes.assign(found, found + n);
      std::free(found);  // NOLINT(cppcoreguidelines-no-malloc): dwarf_getscopes' contract
    }
  }

  // Each DW_TAG_inlined_subroutine is a frame whose caller is the next
  // function scope out; its DW_AT_call_file and DW_AT_call_line give the
  // caller's location.
  std::vector<Frame> frames;
  frames.reserve(scopes.size() + 1);
  Dwarf_Files* files = nullptr;
  size_t nfiles = 0;
  Frame current = innermost;
  std::string subprogram_name;
  for (Dwarf_Die& die : scopes) {
    const int tag = dw.dwarf_tag(&die);
    if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram) continue;
    Dwarf_Attribute attr;
    const char* name = nullptr;
    if (dw.dwarf_attr_integrate(&die, DW_AT_linkage_name, &attr) != nullptr ||
        dw.dwarf_attr_integrate(&die, DW_AT_MIPS_linkage_name, &attr) != nullptr ||
        dw.dwarf_attr_integrate(&die, DW_AT_name, &attr) != nullptr) {
      name = dw.dwarf_formstring(&attr);
    }
    if (tag == DW_TAG_subprogram) {
      subprogram_name = session_->DemangleCached(name);
      break;  // the containing function: added below
    }
    current.function = session_->DemangleCached(name);
    current.inlined = true;
    frames.push_back(current);

    // Where it was inlined: that is the caller frame's location.
    current = base;
    Dwarf_Word call_file = 0;
    Dwarf_Word call_line = 0;
    if (dw.dwarf_attr(&die, DW_AT_call_line, &attr) != nullptr &&
        dw.dwarf_formudata(&attr, &call_line) == 0) {
      current.line = static_cast<int>(call_line);
    }
    if (dw.dwarf_attr(&die, DW_AT_call_file, &attr) != nullptr &&
        dw.dwarf_formudata(&attr, &call_file) == 0) {
      if (files == nullptr && dw.dwarf_getsrcfiles(cu, &files, &nfiles) != 0) files = nullptr;
      if (files != nullptr && call_file < nfiles) {
        const char* file = dw.dwarf_filesrc(files, call_file, nullptr, nullptr);
        if (file != nullptr) current.file = file;
      }
    }
  }

  // The containing function: named by the symbol table, which also covers
  // code without DWARF; DWARF's name when the symbol is missing.
  current.function = outer_function.empty() ? subprogram_name : outer_function;
  current.inlined = false;
  frames.push_back(std::move(current));
  return frames;
}

// --- Trimming ---------------------------------------------------------------

std::string_view Basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool InSourceFile(const Frame& frame) {
  const std::string_view file = Basename(frame.file);
  const size_t dot = file.rfind('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view ext = file.substr(dot);
  return ext == ".cu" || ext == ".cc" || ext == ".cpp" || ext == ".cxx" || ext == ".c" ||
         ext == ".C";
}

bool IsGpuwatchFrame(const Frame& frame) {
  return StartsWith(Basename(frame.module), "libgpuwatch.so") ||
         StartsWith(frame.function, "gpuwatch::");
}

bool IsCudaInternalFrame(const Frame& frame) {
  const std::string_view module = Basename(frame.module);
  if (StartsWith(module, "libcupti.so") || StartsWith(module, "libcuda.so") ||
      StartsWith(module, "libcudart.so")) {
    return true;
  }
  const std::string_view fn = frame.function;
  if (StartsWith(fn, "cudart::") || StartsWith(fn, "__cudart")) return true;
  // cudaXxx / cuXxx API entry points (static cudart lives in the user's
  // executable, so its module says nothing), unless defined in a source file:
  // NVIDIA's runtime has no line tables, and its inline wrappers live in
  // headers, so a function of that name in a .cu/.cc file is the program's
  // own (the CUDA samples' cudaGraphsManual).
  const auto upper_at = [&fn](size_t i) { return fn.size() > i && fn[i] >= 'A' && fn[i] <= 'Z'; };
  if (((StartsWith(fn, "cuda") && upper_at(4)) || (StartsWith(fn, "cu") && upper_at(2))) &&
      !InSourceFile(frame)) {
    return true;
  }
  // NVTX's functions (nvtxRangePushA, nvtxMemRegionsRegister, its loader's
  // nvtxExt...): header-only, so they live in the user's module, above the
  // line that called them.
  return (StartsWith(fn, "nvtx") && upper_at(4)) || StartsWith(fn, "nvtx3::");
}

bool IsStartupFunction(std::string_view function, std::string_view module) {
  if (StartsWith(function, "__libc_start") || function == "_start") return true;
  return StartsWith(Basename(module), "libc.so") &&
         (function == "start_thread" || function == "clone3" || function == "clone" ||
          function == "__clone3" || function == "__clone");
}

bool IsToolFrame(const Frame& frame) {
  return IsGpuwatchFrame(frame) || IsCudaInternalFrame(frame);
}

size_t TrimTop(std::vector<Frame>* frames, const std::function<bool(const Frame&)>& drop) {
  size_t n = 0;
  while (n + 1 < frames->size() && drop((*frames)[n])) ++n;
  frames->erase(frames->begin(), frames->begin() + static_cast<std::ptrdiff_t>(n));
  return n;
}

}  // namespace gpuwatch
