#include "libgpuwatch/stacks/python_stack.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

#include "libgpuwatch/base/clock.h"
#include "libgpuwatch/base/fork_locks.h"
#include "libgpuwatch/base/log.h"
#include "libgpuwatch/base/utf8.h"
#include "libgpuwatch/stacks/python_layouts.h"

namespace gpuwatch {

namespace {

using namespace python_layouts;  // NOLINT(google-build-using-namespace): this file's tables

// --- The interpreter's entry points ----------------------------------------

using IntFn = int (*)();
using PtrFn = void* (*)();
using Addr2LineFn = int (*)(void* code, int byte_offset);
using PendingCallFn = int (*)(int (*)(void*), void*);
using ImportFn = void* (*)(const char*);
using GetAttrFn = void* (*)(void*, const char*);
using CFunctionNewFn = void* (*)(void* def, void* self, void* module);
using CallObjArgsFn = void* (*)(void*, ...);
using DecRefFn = void (*)(void*);
using ErrFetchFn = void (*)(void**, void**, void**);
using ErrRestoreFn = void (*)(void*, void*, void*);
using BuildValueFn = void* (*)(const char*, ...);

struct Runtime {
  Layout layout{};
  IntFn is_initialized = nullptr;
  IntFn is_finalizing = nullptr;
  PtrFn current_tstate = nullptr;     // the thread state holding the GIL (3.8-3.11) or attached
                                      // to this thread (3.12+), unchecked
  PtrFn this_thread_state = nullptr;  // PyGILState_GetThisThreadState
  Addr2LineFn addr2line = nullptr;
  uintptr_t code_type = 0;
  uintptr_t frame_type = 0;
  uintptr_t unicode_type = 0;
  const int* finishing = nullptr;  // 3.8 only
  // For registering the atexit guard (from a pending call, with the GIL).
  PendingCallFn add_pending_call = nullptr;
  ImportFn import_module = nullptr;
  GetAttrFn get_attr = nullptr;
  CFunctionNewFn cfunction_new = nullptr;
  CallObjArgsFn call_obj_args = nullptr;
  DecRefFn decref = nullptr;
  ErrFetchFn err_fetch = nullptr;
  ErrRestoreFn err_restore = nullptr;
  BuildValueFn build_value = nullptr;
  // Report time: where the interpreter and its eval loop are.
  uintptr_t interp_lo = 0;
  uintptr_t interp_hi = 0;
  uintptr_t eval_lo = 0;
  uintptr_t eval_hi = 0;
};

// Published once by InitPythonStacks (release); never freed.
constinit std::atomic<const Runtime*> g_runtime{nullptr};
constinit std::once_flag g_init_once;
constinit std::atomic<bool> g_enabled{false};

// The shutdown guard (see the header). g_in_flight counts reads of frames
// without the GIL in progress; the atexit callback sets g_shutdown and waits
// for it to drain. seq_cst on both sides: each side writes one variable and
// then reads the other.
constinit std::atomic<bool> g_arm_requested{false};
constinit std::atomic<bool> g_armed{false};
constinit std::atomic<bool> g_shutdown{false};
alignas(64) constinit std::atomic<int> g_in_flight{0};

// 0 unknown, 1 the process's main thread, 2 another thread.
thread_local int t_main_thread __attribute__((tls_model("initial-exec"))) = 0;

bool IsMainThread() {
  if (t_main_thread == 0) {
    t_main_thread = syscall(SYS_gettid) == getpid() ? 1 : 2;
  }
  return t_main_thread == 1;
}

template <typename T>
T Load(uintptr_t address) {
  T value;
  std::memcpy(&value, reinterpret_cast<const void*>(address), sizeof(T));  // NOLINT
  return value;
}

bool HasType(uintptr_t object, uintptr_t type) {
  return object != 0 && Load<uintptr_t>(object + kObType) == type;
}

// The UTF-8 bytes of a str object, up to `cap`; "?" for anything else. Reads
// memory only.
size_t ReadString(const Runtime& rt, uintptr_t object, char* out, size_t cap) {
  if (!HasType(object, rt.unicode_type)) {
    out[0] = '?';
    return 1;
  }
  const Layout& l = rt.layout;
  const uint32_t state = Load<uint32_t>(object + kStrState);
  const uint32_t kind = (state >> 2) & 7;
  const bool compact = (state & 0x20) != 0;
  const bool ascii = (state & 0x40) != 0;
  const bool ready = !l.str_ready_bit || (state & 0x80) != 0;
  const auto length = Load<int64_t>(object + kStrLength);
  if (!compact || !ready || length < 0) {
    out[0] = '?';
    return 1;
  }
  const auto count = static_cast<size_t>(length);
  if (ascii) {
    const size_t n = std::min(count, cap);
    std::memcpy(out, reinterpret_cast<const void*>(object + l.str_ascii_data), n);  // NOLINT
    return n;
  }
  const uintptr_t data = object + l.str_compact_data;
  size_t at = 0;
  for (size_t i = 0; i < count && at < cap; ++i) {
    uint32_t cp = 0;
    switch (kind) {
      case 1:
        cp = Load<uint8_t>(data + i);
        break;
      case 2:
        cp = Load<uint16_t>(data + 2 * i);
        break;
      case 4:
        cp = Load<uint32_t>(data + 4 * i);
        break;
      default:
        out[0] = '?';
        return 1;
    }
    const size_t next = PutUtf8(cp, out, at, cap);
    if (next == at) break;  // full
    at = next;
  }
  return at;
}

// Folds what identifies a code object besides its address into the key's
// check word.
uint32_t CheckOf(uintptr_t filename, uintptr_t name, int firstlineno) {
  uint64_t h = filename * 0x9E3779B97F4A7C15ULL ^ name * 0xC2B2AE3D27D4EB4FULL ^
               static_cast<uint64_t>(static_cast<uint32_t>(firstlineno));
  h ^= h >> 29;
  return static_cast<uint32_t>(h ^ (h >> 32));
}

// First sight of a frame: copy its strings and compute its line.
uint32_t InternFrame(const Runtime& rt, PyFrameTable* table, const PyFrameKey& key,
                     uintptr_t filename, uintptr_t name) {
  char file[PyFrameTable::kMaxString];
  char function[PyFrameTable::kMaxString];
  const size_t file_len = ReadString(rt, filename, file, sizeof(file));
  const size_t function_len = ReadString(rt, name, function, sizeof(function));
  const int offset = key.lasti < 0 ? -1 : key.lasti * rt.layout.lasti_bytes;
  int line = rt.addr2line(reinterpret_cast<void*>(key.code), offset);  // NOLINT
  if (line < 0) line = 0;
  return table->Insert(key, std::string_view(file, file_len),
                       std::string_view(function, function_len), line);
}

// Walks the frames of `tstate`, innermost first. See Layout.
int WalkFrames(const Runtime& rt, PyFrameTable* table, uintptr_t tstate, uintptr_t* out, int max) {
  const Layout& l = rt.layout;
  uintptr_t frame = 0;
  if (l.tstate_frame >= 0) {
    frame = Load<uintptr_t>(tstate + l.tstate_frame);
  } else {
    const auto cframe = Load<uintptr_t>(tstate + l.tstate_cframe);
    if (cframe != 0) frame = Load<uintptr_t>(cframe + l.cframe_current);
  }
  int n = 0;
  for (int visited = 0; frame != 0 && n < max && visited < kMaxVisited; ++visited) {
    const auto back = Load<uintptr_t>(frame + l.frame_back);
    bool entry = true;
    if (l.frame_objects) {
      if (!HasType(frame, rt.frame_type)) break;  // not a frame: stop, never guess
    } else {
      if (Load<char>(frame + l.frame_owner) == kOwnedByCStack) {
        // The shim outside the frames one eval loop call runs (3.12+).
        if (n > 0) out[n - 1] |= kPythonTokenEntry;
        frame = back;
        continue;
      }
      entry = l.frame_is_entry >= 0 && Load<uint8_t>(frame + l.frame_is_entry) != 0;
    }
    const auto code = Load<uintptr_t>(frame + l.frame_code);
    if (!HasType(code, rt.code_type)) {
      frame = back;
      continue;
    }
    int lasti = -1;
    if (l.frame_lasti >= 0) {
      lasti = Load<int>(frame + l.frame_lasti);
    } else {
      const auto instr = Load<uintptr_t>(frame + l.frame_instr);
      const uintptr_t start = code + l.code_adaptive;
      const auto units = Load<int64_t>(code + kObSize);
      if (instr >= start && static_cast<int64_t>((instr - start) / 2) < units) {
        lasti = static_cast<int>((instr - start) / 2);
      }
    }
    const auto filename = Load<uintptr_t>(code + l.code_filename);
    const auto name = Load<uintptr_t>(code + l.code_name);
    const PyFrameKey key{code, lasti,
                         CheckOf(filename, name, Load<int>(code + l.code_firstlineno))};
    uint32_t id = table->Find(key);
    if (id == 0) id = InternFrame(rt, table, key, filename, name);
    out[n++] = MakePythonToken(id, entry);
    frame = back;
  }
  // The outermost frame read ends its group, whatever the version.
  if (n > 0) out[n - 1] |= kPythonTokenEntry;
  return n;
}

// --- The atexit guard --------------------------------------------------------

// PyMethodDef, whose layout is part of the stable ABI.
struct MethodDef {
  const char* name;
  void* (*method)(void* self, void* unused);
  int flags;
  const char* doc;
};
constexpr int kMethNoArgs = 0x0004;

// Runs from Python's atexit, before the interpreter frees the states of
// threads that still run: no read without the GIL may start after it, and it
// returns once those in progress ended. Reads are short (microseconds); the
// wait is capped so that a thread stopped mid-read cannot hang the exit.
void* OnPythonExit(void* /*self*/, void* /*unused*/) {
  g_shutdown.store(true, std::memory_order_seq_cst);
  const uint64_t deadline = MonotonicNs() + 2000000000ULL;
  while (g_in_flight.load(std::memory_order_seq_cst) > 0 && MonotonicNs() < deadline) {
    sched_yield();
  }
  const Runtime* rt = g_runtime.load(std::memory_order_acquire);
  return rt->build_value("");  // a new reference to None
}

constinit MethodDef g_exit_def = {"gpuwatch_python_exit", &OnPythonExit, kMethNoArgs, nullptr};

// A pending call: runs on the main thread, with the GIL, between two
// bytecodes, where running Python code is safe. Registers OnPythonExit with
// the atexit module. Errors are swallowed and the caller's error state is
// left as it was.
int ArmShutdownGuard(void* /*arg*/) {
  const Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr) return 0;
  void* type = nullptr;
  void* value = nullptr;
  void* traceback = nullptr;
  rt->err_fetch(&type, &value, &traceback);
  void* module = rt->import_module("atexit");
  void* reg = module != nullptr ? rt->get_attr(module, "register") : nullptr;
  void* fn = reg != nullptr ? rt->cfunction_new(&g_exit_def, nullptr, nullptr) : nullptr;
  void* result = fn != nullptr ? rt->call_obj_args(reg, fn, nullptr) : nullptr;
  if (result != nullptr) g_armed.store(true, std::memory_order_seq_cst);
  rt->decref(result);
  rt->decref(fn);
  rt->decref(reg);
  rt->decref(module);
  rt->err_restore(type, value, traceback);  // also drops any error of ours
  return 0;
}

// Queues ArmShutdownGuard once. Py_AddPendingCall needs no GIL.
void RequestShutdownGuard(const Runtime& rt) {
  if (g_arm_requested.load(std::memory_order_relaxed) || rt.add_pending_call == nullptr) return;
  if (rt.finishing != nullptr && *rt.finishing != 0) return;
  if (g_arm_requested.exchange(true)) return;
  if (rt.add_pending_call(&ArmShutdownGuard, nullptr) != 0) {
    g_arm_requested.store(false);  // the queue was full: try again on a later capture
  }
}

// --- Discovery ---------------------------------------------------------------

// 3.13 publishes its own structure offsets for debuggers and profilers at the
// start of _PyRuntime (_Py_DebugOffsets, stable within a minor version). When
// they are there, the table above must agree with them: a patch release that
// moved a field disables Python frames instead of misreading them. Offsets of
// the fields compared, within _Py_DebugOffsets of 3.13.
bool DebugOffsetsAgree(const Layout& l) {
  if (l.minor != 13) return true;
  const auto* runtime = static_cast<const char*>(dlsym(RTLD_DEFAULT, "_PyRuntime"));
  if (runtime == nullptr || std::memcmp(runtime, "xdebugpy", 8) != 0) return true;
  const auto at = [runtime](int offset) {
    uint64_t value = 0;
    std::memcpy(&value, runtime + offset, sizeof(value));
    return value;
  };
  struct Field {
    int debug_offset;
    int64_t expected;
  };
  const Field fields[] = {
      {16, 0},  // free_threaded
      {184, l.tstate_frame},
      {232, l.frame_back},
      {240, l.frame_code},
      {248, l.frame_instr},
      {264, l.frame_owner},
      {280, l.code_filename},
      {296, l.code_name},
      {312, l.code_firstlineno},
      {344, l.code_adaptive},
      {360, kObType},
      {544, kStrState},
      {552, kStrLength},
      {560, l.str_ascii_data},
  };
  for (const Field& f : fields) {
    if (at(f.debug_offset) != static_cast<uint64_t>(f.expected)) return false;
  }
  return true;
}

template <typename Fn>
Fn Sym(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

// The [lo, hi) span of the PT_LOAD segments of the object containing `address`.
bool ObjectRange(uintptr_t address, uintptr_t* lo, uintptr_t* hi) {
  struct Ctx {
    uintptr_t address;
    uintptr_t lo;
    uintptr_t hi;
    bool found;
  } ctx{address, 0, 0, false};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* c = static_cast<Ctx*>(data);
        uintptr_t lo = UINTPTR_MAX;
        uintptr_t hi = 0;
        bool contains = false;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
          const uintptr_t end = start + ph.p_memsz;
          lo = std::min(lo, start);
          hi = std::max(hi, end);
          if (c->address >= start && c->address < end) contains = true;
        }
        if (!contains) return 0;
        c->lo = lo;
        c->hi = hi;
        c->found = true;
        return 1;
      },
      &ctx);
  *lo = ctx.lo;
  *hi = ctx.hi;
  return ctx.found;
}

void ResetInFlightInChild() { g_in_flight.store(0); }

void DoInit() {
  using VersionFn = const char* (*)();
  const auto get_version = Sym<VersionFn>("Py_GetVersion");
  if (get_version == nullptr) return;  // not a Python process
  const char* version = get_version();
  int major = 0;
  int minor = 0;
  if (version == nullptr || std::sscanf(version, "%d.%d", &major, &minor) != 2) return;
  // Free-threaded builds lay objects out differently (ob_tid, split
  // refcounts); trace-refs builds add two pointers to every object.
  if (std::strstr(version, "free-threading") != nullptr ||
      dlsym(RTLD_DEFAULT, "_Py_MergeZeroLocalRefcount") != nullptr) {
    Warn("Python %d.%d free-threaded build: stacks have native frames only", major, minor);
    return;
  }
  if (dlsym(RTLD_DEFAULT, "_Py_PrintReferences") != nullptr) {
    Warn("Python built --with-trace-refs: stacks have native frames only");
    return;
  }
  const Layout* layout = nullptr;
  for (const Layout& l : kLayouts) {
    if (major == 3 && l.minor == minor) layout = &l;
  }
  if (layout == nullptr) {
    Warn("Python %d.%d is not supported (3.8 to 3.13 are): stacks have native frames only", major,
         minor);
    return;
  }
  if (!DebugOffsetsAgree(*layout)) {
    Warn(
        "Python %d.%d lays out its frames differently than gpuwatch expects: stacks have "
        "native frames only",
        major, minor);
    return;
  }
  auto* rt = new Runtime();  // leaked on purpose, like all of gpuwatch's state
  rt->layout = *layout;
  rt->is_initialized = Sym<IntFn>("Py_IsInitialized");
  rt->is_finalizing = Sym<IntFn>(minor >= 13 ? "Py_IsFinalizing" : "_Py_IsFinalizing");
  rt->current_tstate =
      Sym<PtrFn>(minor >= 13 ? "PyThreadState_GetUnchecked" : "_PyThreadState_UncheckedGet");
  rt->this_thread_state = Sym<PtrFn>("PyGILState_GetThisThreadState");
  rt->addr2line = Sym<Addr2LineFn>("PyCode_Addr2Line");
  rt->code_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyCode_Type"));
  rt->frame_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyFrame_Type"));
  rt->unicode_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyUnicode_Type"));
  auto* eval = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
  if (rt->is_initialized == nullptr || rt->is_finalizing == nullptr ||
      rt->current_tstate == nullptr || rt->this_thread_state == nullptr ||
      rt->addr2line == nullptr || rt->code_type == 0 || rt->frame_type == 0 ||
      rt->unicode_type == 0 || eval == nullptr) {
    Warn("Python %d.%d lacks a function gpuwatch needs: stacks have native frames only", major,
         minor);
    delete rt;
    return;
  }
  if (minor == 8) {
    if (auto* runtime = static_cast<char*>(dlsym(RTLD_DEFAULT, "_PyRuntime"))) {
      rt->finishing = reinterpret_cast<const int*>(runtime + kFinishingOffset38);
    }
  }
  rt->add_pending_call = Sym<PendingCallFn>("Py_AddPendingCall");
  rt->import_module = Sym<ImportFn>("PyImport_ImportModule");
  rt->get_attr = Sym<GetAttrFn>("PyObject_GetAttrString");
  rt->cfunction_new = Sym<CFunctionNewFn>("PyCFunction_NewEx");
  rt->call_obj_args = Sym<CallObjArgsFn>("PyObject_CallFunctionObjArgs");
  rt->decref = Sym<DecRefFn>("Py_DecRef");
  rt->err_fetch = Sym<ErrFetchFn>("PyErr_Fetch");
  rt->err_restore = Sym<ErrRestoreFn>("PyErr_Restore");
  rt->build_value = Sym<BuildValueFn>("Py_BuildValue");
  if (rt->import_module == nullptr || rt->get_attr == nullptr || rt->cfunction_new == nullptr ||
      rt->call_obj_args == nullptr || rt->decref == nullptr || rt->err_fetch == nullptr ||
      rt->err_restore == nullptr || rt->build_value == nullptr) {
    rt->add_pending_call = nullptr;  // no guard: only the main thread reads without the GIL
  }
  ObjectRange(reinterpret_cast<uintptr_t>(rt->is_initialized), &rt->interp_lo, &rt->interp_hi);
  Dl_info info{};
  ElfW(Sym)* symbol = nullptr;
  if (dladdr1(eval, &info, reinterpret_cast<void**>(&symbol), RTLD_DL_SYMENT) != 0 &&
      symbol != nullptr && symbol->st_size > 0) {
    rt->eval_lo = reinterpret_cast<uintptr_t>(eval);
    rt->eval_hi = rt->eval_lo + symbol->st_size;
  }
  // The frame table is the Session's (StackTable::EnablePythonFrames), locked
  // around fork with its stack table; here only the reads in flight, which
  // a fork child has none of.
  fork_locks::Entry entry;
  entry.lock = [](void*) {};
  entry.unlock = [](void*) {};
  entry.child = [](void*) { ResetInFlightInChild(); };
  entry.tier = fork_locks::Tier::kOuter;
  entry.name = "Python frame reads";
  fork_locks::Add(entry);
  g_runtime.store(rt, std::memory_order_release);
  g_enabled.store(true, std::memory_order_release);
  if (rt->is_initialized() != 0 && rt->is_finalizing() == 0) RequestShutdownGuard(*rt);
}

}  // namespace

bool InitPythonStacks() {
  std::call_once(g_init_once, DoInit);
  return PythonStacksEnabled();
}

bool PythonStacksEnabled() { return g_enabled.load(std::memory_order_acquire); }

int CapturePythonFrames(PyFrameTable* table, uintptr_t* out, int max) {
  const Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr || table == nullptr || max <= 0 || rt->is_initialized() == 0) return 0;
  if (!g_arm_requested.load(std::memory_order_relaxed) && rt->is_finalizing() == 0) {
    RequestShutdownGuard(*rt);
  }
  const auto current = reinterpret_cast<uintptr_t>(rt->current_tstate());
  const auto own = reinterpret_cast<uintptr_t>(rt->this_thread_state());
  // Up to 3.11 the "current" thread state is whichever thread holds the GIL;
  // from 3.12 it is this thread's, set only while it holds the GIL.
  if (current != 0 && (current == own || rt->layout.minor >= 12)) {
    if (rt->is_finalizing() != 0) return 0;
    return WalkFrames(*rt, table, current, out, max);
  }
  if (own == 0) return 0;  // a native thread that never entered Python
  // This thread does not hold the GIL: its frames stay put while it runs C
  // code, but finalization may free them under a thread other than the main
  // thread (see the header).
  const bool main = IsMainThread();
  if (!main && !g_armed.load(std::memory_order_acquire)) return 0;
  g_in_flight.fetch_add(1, std::memory_order_seq_cst);
  int n = 0;
  if ((main || !g_shutdown.load(std::memory_order_seq_cst)) && rt->is_initialized() != 0 &&
      rt->is_finalizing() == 0) {
    n = WalkFrames(*rt, table, own, out, max);
  }
  g_in_flight.fetch_sub(1, std::memory_order_seq_cst);
  return n;
}

bool IsPythonEvalPc(uintptr_t pc) {
  const Runtime* rt = g_runtime.load(std::memory_order_acquire);
  return rt != nullptr && pc > rt->eval_lo && pc - 1 < rt->eval_hi;
}

bool IsPythonInterpreterPc(uintptr_t pc) {
  const Runtime* rt = g_runtime.load(std::memory_order_acquire);
  return rt != nullptr && pc > rt->interp_lo && pc - 1 < rt->interp_hi;
}

}  // namespace gpuwatch
