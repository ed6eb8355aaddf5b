// From a pc to the rule that unwinds its frame (cfi_rules.cc): the parser
// half of gpuwatch's stack walker. Called by the walker (cfi_unwind.cc, which
// caches the rules by pc), by its tests and by the unwind-table fuzzer; it
// reads only the loaded module's own tables, bounded by its mapped ranges.
#ifndef GPUWATCH_LIBGPUWATCH_STACKS_CFI_RULES_H_
#define GPUWATCH_LIBGPUWATCH_STACKS_CFI_RULES_H_

#include <cstddef>
#include <cstdint>

namespace gpuwatch::internal {

// A frame's unwind rule as the walker uses it. `ok` false: the walker cannot
// unwind through this pc (the other fields are meaningless).
struct CfiRule {
  bool ok = false;
  bool outermost = false;     // the return address is undefined: the stack ends here
  bool cfa_from_rbp = false;  // CFA = rbp + cfa_offset, else rsp + cfa_offset
  int32_t cfa_offset = 0;
  int32_t ra_offset = 0;   // the return address is at CFA + ra_offset
  bool rbp_saved = false;  // the caller's rbp is at CFA + rbp_offset, else unchanged
  int32_t rbp_offset = 0;
};

// Computes the rule for the instruction at `pc` from the loaded module's
// unwind tables (dl_iterate_phdr, so it takes the loader's lock). For a return
// address pass the call instruction's address (return address - 1), as the
// walker does. `loader_unloads`, when given, receives the loader's count of
// unloaded objects as it was then (dlpi_subs), for the cache to notice unloads.
CfiRule ComputeCfiRule(uintptr_t pc, unsigned long long* loader_unloads = nullptr);

// The rule for `pc` from unwind tables in memory (tests, the fuzzer):
// [begin, begin + size) is taken as the module's only mapped range, with its
// `.eh_frame_hdr` at begin + hdr_offset. Reads nothing outside the range.
CfiRule CfiRuleFromTables(const void* begin, size_t size, size_t hdr_offset, uintptr_t pc);

}  // namespace gpuwatch::internal

#endif  // GPUWATCH_LIBGPUWATCH_STACKS_CFI_RULES_H_
