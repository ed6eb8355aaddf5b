// libFuzzer target for the CFI walker's table reader (libgpuwatch/stacks/cfi_unwind):
// `.eh_frame_hdr`, CIEs, FDEs and their call frame programs come from the
// modules of the host process and are read inside it, so a corrupt table must
// give no rule, never a read outside the module or undefined behaviour.
//
// Input: 4 bytes of pc (an offset from the tables' first byte, minus 0x8000,
// so that pcs before them are tried too), 2 bytes of the `.eh_frame_hdr`'s
// offset, then the tables, copied to a buffer of their exact size so that
// AddressSanitizer sees a read past them. Built by -DGPUWATCH_BUILD_FUZZERS=ON
// with clang; run by scripts/fuzz.sh. Seed: tests/fuzz/cfi_corpus (the tables
// of CfiUnwind.RulesOfAHandWrittenFunction).
#include <cstdint>
#include <cstring>
#include <memory>

#include "libgpuwatch/stacks/cfi_unwind.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 6) return 0;
  uint32_t pc_offset = 0;
  uint16_t hdr_offset = 0;
  std::memcpy(&pc_offset, data, 4);
  std::memcpy(&hdr_offset, data + 4, 2);
  const size_t tables = size - 6;
  const std::unique_ptr<uint8_t[]> copy(new uint8_t[tables + 1]);  // + 1: never empty
  std::memcpy(copy.get(), data + 6, tables);
  const uintptr_t begin = reinterpret_cast<uintptr_t>(copy.get());
  const gpuwatch::internal::CfiRule rule = gpuwatch::internal::CfiRuleFromTables(
      copy.get(), tables, hdr_offset, begin + pc_offset - 0x8000);
  // A rule the walker accepts has offsets it can pack (cfi_unwind.cc, Pack).
  if (rule.ok && !rule.outermost &&
      (rule.ra_offset < -2048 || rule.ra_offset >= 2048 || rule.rbp_offset < -2048 ||
       rule.rbp_offset >= 2048)) {
    __builtin_trap();
  }
  return 0;
}
