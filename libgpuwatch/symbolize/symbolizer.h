// Report-time symbolization: pcs captured by CaptureStack -> function, file,
// line and module.
//
// Never call this on a hot path or inside a CUDA callback: it opens ELF and
// DWARF files, allocates freely and may take milliseconds per new module. It
// is meant for the report writer, with one Symbolizer per report so that the
// DWARF state and the per-pc cache are shared by every stack of the report.
//
// Backends. elfutils libdw (its dwfl API) gives file:line and inline frames.
// It is loaded with dlopen("libdw.so.1", RTLD_LOCAL) on first use and is
// never a link dependency, so libgpuwatch.so loads on machines without
// elfutils and libdw's own dependencies (libelf, libz, ...) stay out of the
// host's global symbol scope. When libdw is missing, the fallback is dladdr +
// abi::__cxa_demangle: function (exported symbols only) and module, no
// file:line; one warning line says so. The frames that start a process or
// a thread (IsStartupFunction) are named from the symbol table alone, never
// with file:line: that would open libc's DWARF.
//
// Return addresses. Every pc from CaptureStack is a return address, which
// can belong to the line after the call, or even to the next function when
// the call was the last instruction. The lookup therefore uses pc - 1 (the
// last byte of the call instruction) unless the pc is marked exact (e.g. the
// interrupted pc of a signal frame). Frame::pc keeps the pc as captured.
#ifndef GPUWATCH_LIBGPUWATCH_SYMBOLIZE_SYMBOLIZER_H_
#define GPUWATCH_LIBGPUWATCH_SYMBOLIZE_SYMBOLIZER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gpuwatch {

struct Frame {
  uintptr_t pc = 0;      // as captured (a return address unless looked up as exact)
  std::string function;  // demangled, e.g. "ns::Foo(int)"; empty when unknown
  std::string file;      // source path as recorded in DWARF; empty when unknown
  int line = 0;          // 1-based; 0 when unknown
  std::string module;    // path of the executable or shared object; empty when unknown
  uintptr_t offset = 0;  // pc - module load bias: the pc as an ELF virtual address
  // True when this frame's function was inlined into the next frame's. The
  // frames of one inline chain share the same pc.
  bool inlined = false;
};

enum class SymbolizerBackend : int {
  kNone = 0,    // nothing resolved (only pc is filled in)
  kLibdw = 1,   // elfutils: function, file:line, inline frames, module
  kDladdr = 2,  // fallback: exported function names and module only
};

// "none", "libdw", "dladdr". Thread-safe.
const char* SymbolizerBackendName(SymbolizerBackend backend);

struct SymbolizerOptions {
  // Soname to dlopen instead of "libdw.so.1". nullptr: the default, loaded
  // once per process and shared by all instances. Any other value is loaded
  // for this instance only and warns again on failure (for tests).
  const char* libdw_soname = nullptr;
  // Use dladdr even when libdw is available.
  bool force_dladdr = false;
  // Report inlined functions as frames of their own (like addr2line -i).
  bool expand_inlines = true;
};

namespace internal {
struct LibdwApi;
}  // namespace internal

// Turns pcs into frames, caching the result per pc for the Symbolizer's life.
//
// Thread-safety: an instance is not thread-safe; use it from one thread.
// Separate instances may be used on different threads (libdw calls are
// serialised by a process-wide lock). Nothing here is async-signal-safe.
class Symbolizer {
 public:
  Symbolizer() : Symbolizer(SymbolizerOptions{}) {}
  // Opens a dwfl session over the modules loaded now (dl_iterate_phdr).
  // Modules loaded or unloaded later are picked up on the next new pc.
  explicit Symbolizer(const SymbolizerOptions& options);
  ~Symbolizer();

  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  SymbolizerBackend backend() const { return backend_; }

  // Whether new pcs may be resolved with libdw (default true). elfutils
  // ends the process (exit 1) when it runs out of memory, so a host near
  // its memory limit gets names and modules without file:line instead.
  void set_libdw_allowed(bool allowed) { libdw_allowed_ = allowed; }

  // The frames of one pc, innermost first: inlined functions (inlined =
  // true) and then the function that contains the pc. Never empty. The span
  // stays valid for the life of the Symbolizer.
  std::span<const Frame> SymbolizeAll(uintptr_t pc, bool is_return_address = true);

  // The innermost frame of pc (the first of SymbolizeAll). The reference
  // stays valid for the life of the Symbolizer.
  const Frame& Symbolize(uintptr_t pc, bool is_return_address = true) {
    return SymbolizeAll(pc, is_return_address).front();
  }

  // Appends the frames of a captured stack (all pcs return addresses), with
  // inline frames expanded, outermost caller last.
  void SymbolizeStack(std::span<const uintptr_t> pcs, std::vector<Frame>* out);
  std::vector<Frame> SymbolizeStack(std::span<const uintptr_t> pcs);

  // Number of distinct pcs resolved so far.
  size_t cache_size() const { return cache_.size() + exact_cache_.size(); }
  // Modules whose whole symbol table was read so far (libc's start-up
  // frames are named without it).
  size_t symbol_tables_read() const;
  // One-pass searches of a symbol table so far (libc's start-up frames).
  size_t symbol_passes() const;

 private:
  std::vector<Frame> Resolve(uintptr_t pc, uintptr_t lookup);
  std::vector<Frame> ResolveWithLibdw(uintptr_t pc, uintptr_t lookup);
  std::vector<Frame> ResolveWithDladdr(uintptr_t pc, uintptr_t lookup);
  void ReportModules();

  SymbolizerOptions options_;
  SymbolizerBackend backend_ = SymbolizerBackend::kNone;
  bool libdw_allowed_ = true;
  const internal::LibdwApi* api_ = nullptr;
  struct Session;  // the dwfl session and its callbacks
  std::unique_ptr<Session> session_;
  std::unordered_map<uintptr_t, std::vector<Frame>> cache_;
  std::unordered_map<uintptr_t, std::vector<Frame>> exact_cache_;
};

// --- Trimming the tool's own frames from the top of a stack ---------------
//
// A stack captured in a CUDA callback starts inside gpuwatch, then CUPTI,
// the driver and the CUDA runtime, and only then reaches the code that called
// cudaMalloc. Decision: all of those are dropped, including the outermost
// CUDA API frame (cudaMalloc itself), so that frame 0 is the user's line that
// made the call. The API's name is already in the event (its kind), cudart
// has no line information to add, and the leak site a user wants is their
// own line.

// True for frames of gpuwatch itself: module libgpuwatch.so*, or a function
// in namespace gpuwatch (gpuwatch linked statically, e.g. in tests).
bool IsGpuwatchFrame(const Frame& frame);

// True for frames of the CUDA stack below the user: modules libcupti.so*,
// libcuda.so*, libcudart.so*, and, for a statically linked cudart (nvcc's
// default, whose code lives in the user's executable), functions named
// cudart::*, __cudart*, or a CUDA API name (cuda or cu followed by an upper
// case letter, e.g. cudaMalloc, cuMemAlloc_v2) not defined in a source file
// (InSourceFile: NVIDIA's runtime has no line tables and its inline
// wrappers are in headers, so the program's own cudaGraphsManual() in a .cu
// file stays). NVTX's functions (nvtx and an upper case
// letter, nvtx3::*) count too: NVTX is header-only, so they sit in the
// user's module above the line that called them.
bool IsCudaInternalFrame(const Frame& frame);

// True when the frame's file is a source file (.cu, .cc, .cpp, .cxx, .c, .C),
// not a header.
bool InSourceFile(const Frame& frame);

// True for the frames that start a process or a thread, below main or a
// thread's own function: `__libc_start*` and `_start`, and libc's
// start_thread, clone3 and clone (and their aliases __clone3 and __clone,
// the names libc's table gives them). The symbolizer names them from the
// symbol table alone, with no file:line.
bool IsStartupFunction(std::string_view function, std::string_view module);

// IsGpuwatchFrame || IsCudaInternalFrame: the default trimming predicate.
bool IsToolFrame(const Frame& frame);

// Drops frames from the front of *frames while `drop` is true for them, but
// never the last frame (a stack that is all tool frames keeps its outermost
// one). Returns the number dropped.
size_t TrimTop(std::vector<Frame>* frames, const std::function<bool(const Frame&)>& drop);

// The part of a path after its last '/'.
std::string_view Basename(std::string_view path);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_SYMBOLIZE_SYMBOLIZER_H_
