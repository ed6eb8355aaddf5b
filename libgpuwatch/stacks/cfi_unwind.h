// A stack walker of gpuwatch's own, for x86-64: the `.eh_frame` unwind rules
// of each return address, read once and cached by address.
//
// libunwind's unw_backtrace spends about 90 instructions a frame on a walk it
// has walked before (its per-thread cache lookup, cursor set-up, register
// bookkeeping); at 39 frames per CUDA allocation that was most of gpuwatch's
// cost per event. What a frame needs, once its rule is known, is two or three
// loads: the canonical frame address (CFA) is rsp or rbp plus an offset, the
// return address and the caller's rbp sit at fixed offsets from it. So the
// first time a pc is seen its rule is computed from the module's
// `.eh_frame_hdr` and `.eh_frame` (the same data libunwind and libgcc use) and
// packed into one word of a process-wide, lock-free table keyed by pc.
//
// A walk by rules is still a chain of dependent loads (return address, its
// rule, the next CFA): about 7 ns a frame. Successive stacks of a thread
// mostly share their outer frames, so each thread also keeps the frames of
// its last walk; a walk that reaches one of them (same ip and sp) checks the
// rest against the stack, one independent load a frame, and walks by rules
// again from the first frame whose return address changed (cfi_unwind.cc,
// Record). A 37-frame stack walked again costs about 45 ns so, against 250
// with libunwind (docs/BENCHMARKS.md).
//
// The walker declines (returns -1) rather than guess: a frame whose rule it
// cannot express (a signal frame, a CFA or register given by a DWARF
// expression, a module without `.eh_frame_hdr`, code without unwind
// information such as JIT code), or a stack it cannot bound (a coroutine's or
// an alternate signal stack). (A full table costs speed, not stacks: a pc
// that finds no slot has its rule computed at each sight.) The caller then
// unwinds the whole
// stack with libunwind or libgcc, as before; unwind.h counts those
// fallbacks. Every read of the stack is checked against the thread's stack
// bounds, so a wrong rule (a module unloaded and another loaded at its
// address before the table noticed) gives a wrong stack, never a fault.
#ifndef GPUWATCH_LIBGPUWATCH_STACKS_CFI_UNWIND_H_
#define GPUWATCH_LIBGPUWATCH_STACKS_CFI_UNWIND_H_

#include <cstddef>
#include <cstdint>

#include "libgpuwatch/stacks/cfi_rules.h"

namespace gpuwatch {

// Writes the calling thread's return addresses into buffer[0..n): buffer[0]
// is the return address into CfiBacktrace's caller, then that function's
// caller's, and so on to the outermost frame or `size`. Returns n, or -1 when
// the stack cannot be walked this way (see above); buffer is then undefined.
//
// Thread-safe. No heap allocation, no lock and no system call when every pc
// is in the table; a pc seen for the first time takes the dynamic loader's
// lock (dl_iterate_phdr), and the first call on a thread maps a page for the
// record of its walks and asks glibc for the thread's stack bounds (on the
// main thread that reads /proc/self/maps). Not async-signal-safe
// (dl_iterate_phdr), nor re-entrant on one thread (the record).
int CfiBacktrace(uintptr_t* buffer, int size);

// CfiBacktrace without the copy: sets *pcs to where the n pcs are, `buffer`
// or the calling thread's record of this walk (a walk that took its frames
// from the last one leaves them there), valid until the thread's next walk.
// buffer[0, size) is scratch either way. Same thread-safety.
int CfiBacktraceInPlace(uintptr_t* buffer, int size, const uintptr_t** pcs);

// Forgets every cached rule. CfiBacktrace calls it itself when it notices that
// a module was unloaded (the loader's unload count moved). Thread-safe.
void FlushCfiRules();

// Finds the calling thread's stack bounds now, for its first walk to use.
// For the main thread before Linux 6.11, glibc reads all of /proc/self/maps,
// milliseconds in a process with thousands of mappings (PyTorch), which would
// otherwise land on the program's first CUDA call; gpuwatch calls this when
// it attaches. Thread-safe; at most one thread is primed.
void PrimeStackBounds();

namespace internal {

// How many pcs the table holds (tests, benchmarks).
int CfiRulesCached();

// Whether the table holds a rule for `pc` (tests).
bool CfiRuleIsCached(uintptr_t pc);

// Calls `hook` (nullptr: none) after each rule is computed, before it enters
// the table (tests: a flush there stands for one made by another thread).
void SetRuleComputedHookForTest(void (*hook)(uintptr_t pc));

// How many frames the calling thread's walks have taken from its last walk
// (checked against the stack) instead of walking them by rule (tests).
uint64_t CfiFramesReused();

}  // namespace internal

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_STACKS_CFI_UNWIND_H_
