// Python frames of the calling thread, for processes that run CPython.
//
// When gpuwatch is loaded into `python train.py`, a native stack is mostly the
// interpreter's eval loop; what the user wants is the line of their script.
// So every captured stack also records the calling thread's Python frames
// (file, function, line), and the report merges them with the native frames
// (mixed_stack.h), as py-spy --native and memray --native show them.
//
// Finding CPython. Nothing is linked or compiled against a Python version: at
// attach, InitPythonStacks() looks the interpreter up with dlsym(RTLD_DEFAULT)
// (Py_GetVersion, Py_IsInitialized, PyGILState_GetThisThreadState, ...) and
// picks the structure layout of its minor version, 3.8 to 3.13. Other versions,
// free-threaded builds (3.13t) and --with-trace-refs builds get native stacks
// and one warning line. Processes without CPython are not affected at all.
//
// Reading frames: struct offsets, not the C API. The frames must be read
// without the GIL: ctypes releases it around every foreign call and PyTorch's
// bindings release it around every operator, so the thread that allocates
// usually does not hold it. The C API (PyThreadState_GetFrame, PyFrame_GetBack,
// ...) needs the GIL, takes references and, from 3.11, allocates frame
// objects, which can run the garbage collector (and so any __del__) inside a
// CUDA callback. A thread's own frame chain does not change while the thread
// is busy in C code, with or without the GIL, so gpuwatch reads it directly:
// the thread state's innermost frame, each frame's code object, instruction
// offset and link, the code object's co_filename and co_name (co_qualname
// from 3.11) and the strings' bytes. The offsets per version, taken from the
// CPython headers (python_stack.cc lists them), are checked at run time
// against the type of each object read (PyFrame_Type, PyCode_Type,
// PyUnicode_Type), and the tests run the interpreters 3.8 to 3.13. Line
// numbers come from PyCode_Addr2Line, which only reads the code object. The
// strings are copied once per (code object, instruction) into a PyFrameTable;
// later captures of the same frame cost a hash lookup.
//
// When the frames are read:
// - Python must be initialized (Py_IsInitialized) and not finalizing
//   (_Py_IsFinalizing / Py_IsFinalizing): during start-up and shutdown, stacks
//   are native only.
// - The calling thread must have a Python thread state
//   (PyGILState_GetThisThreadState). Threads created by native code that never
//   entered Python have none: native frames only.
// - A thread that holds the GIL reads its frames (nothing can free them under
//   it). A thread that does not hold it reads its own frames too, with one
//   hazard: when the interpreter finalizes, it clears and frees the thread
//   states (and with them the frames) of daemon threads that are still
//   running. gpuwatch therefore registers a Python `atexit` callback, which
//   runs before that, and which waits for every such read in progress and
//   stops new ones (an atomic counter and flag). The callback is registered
//   from a pending call (Py_AddPendingCall) that the main thread runs the next
//   time it executes Python code after gpuwatch attached, the one place where
//   running Python code is safe. Until then, threads other than the main
//   thread that do not hold the GIL record native frames only. The main
//   thread is the one that finalizes, so its frames cannot be freed under it.
//
// Hot-path cost: a few indirect calls to check the state above, then per
// frame a few loads and one lock-free table lookup (bench/python_stack_benchmark.cc;
// docs/python.md has the figures). No allocation and no lock, except the
// first time a frame is seen (PyFrameTable::Insert).
#ifndef GPUWATCH_LIBGPUWATCH_STACKS_PYTHON_STACK_H_
#define GPUWATCH_LIBGPUWATCH_STACKS_PYTHON_STACK_H_

#include <cstdint>

#include "libgpuwatch/stacks/python_frames.h"

namespace gpuwatch {

// Looks for CPython in the process and, when a supported version is found,
// prepares Python frame capture. Returns true when Python frames will be
// recorded. Idempotent: only the first call does anything. Prints one warning
// line when CPython is there but unsupported, nothing when it is absent.
// Thread-safe; call at attach, not from a CUDA callback (it uses dlsym and
// dl_iterate_phdr).
bool InitPythonStacks();

// True once InitPythonStacks() succeeded. Thread-safe.
bool PythonStacksEnabled();

// Writes the calling thread's Python frames as tokens (python_frames.h) to
// out[0..max), innermost first, interning them in `table` (the Session's:
// StackTable::python_frames()), and returns how many. Returns 0 when
// `table` is null. Returns 0 when Python
// frames are off, the interpreter is starting or finalizing, the thread has no
// Python frames, or reading them is not safe (see the file comment).
// Thread-safe. Allocation-free and lock-free except the first time a frame is
// seen. Not async-signal-safe.
int CapturePythonFrames(PyFrameTable* table, uintptr_t* out, int max);

// --- Report time -----------------------------------------------------------

// True when the return address `pc` lies in the interpreter's eval loop
// (_PyEval_EvalFrameDefault): one C-level call of it runs the Python frames
// of one token group. Thread-safe.
bool IsPythonEvalPc(uintptr_t pc);

// True when the return address `pc` lies in the interpreter itself (libpython
// or the python executable that contains it). Thread-safe.
bool IsPythonInterpreterPc(uintptr_t pc);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_STACKS_PYTHON_STACK_H_
