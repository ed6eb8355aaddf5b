#include "libgpuwatch/cfi_unwind.h"

#include <link.h>
#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <new>

namespace gpuwatch {

namespace internal {
namespace {

// DWARF register numbers on x86-64.
constexpr uint64_t kRegRbp = 6;
constexpr uint64_t kRegRsp = 7;

// Sanity bounds on the tables: anything larger is treated as corrupt.
constexpr uint64_t kMaxEntryBytes = 1 << 24;
constexpr int kMaxRememberedStates = 8;
constexpr int kMaxModuleRanges = 16;

// The readable loaded ranges of one module. Every read of its unwind tables
// is checked against them, so corrupt tables cannot make us read unmapped
// memory.
struct Module {
  uintptr_t eh_frame_hdr = 0;
  int count = 0;
  uintptr_t begin[kMaxModuleRanges] = {};
  uintptr_t end[kMaxModuleRanges] = {};

  bool Contains(uintptr_t at, uint64_t n) const {
    for (int i = 0; i < count; ++i) {
      if (at >= begin[i] && at <= end[i] && n <= end[i] - at) return true;
    }
    return false;
  }
};

// Reads DWARF data from a module's mapped tables, bounded by `end` and by the
// module's ranges. A failed read makes ok() false and returns 0.
class Reader {
 public:
  Reader(const Module& module, uintptr_t at, uintptr_t end)
      : module_(&module), pos_(at), end_(end) {}

  bool ok() const { return ok_; }
  uintptr_t pos() const { return pos_; }
  bool AtEnd() const { return !ok_ || pos_ >= end_; }
  void Fail() { ok_ = false; }

  void Skip(uint64_t n) {
    if (Take(n)) pos_ += n;
  }

  template <typename T>
  T Fixed() {
    T value{};
    if (!Take(sizeof(T))) return value;
    // Reading mapped tables by address is the point.
    std::memcpy(&value, reinterpret_cast<const void*>(pos_),  // NOLINT(performance-no-int-to-ptr)
                sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  uint8_t U8() { return Fixed<uint8_t>(); }

  uint64_t Uleb() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t byte = U8();
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    Fail();
    return 0;
  }

  int64_t Sleb() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64;) {
      const uint8_t byte = U8();
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      shift += 7;
      if ((byte & 0x80) == 0) {
        if (shift < 64 && (byte & 0x40) != 0) value |= ~uint64_t{0} << shift;
        return static_cast<int64_t>(value);
      }
    }
    Fail();
    return 0;
  }

  // A pointer in DW_EH_PE_* encoding `enc`. `datarel` is the base of
  // DW_EH_PE_datarel (the .eh_frame_hdr section), 0 where it is not allowed.
  // DW_EH_PE_indirect is not followed: only personality pointers use it, and
  // they are skipped unread.
  uint64_t Encoded(uint8_t enc, uintptr_t datarel) {
    const uintptr_t at = pos_;
    uint64_t value = 0;
    switch (enc & 0x0f) {
      case 0x00:  // absptr
      case 0x04:  // udata8
      case 0x0c:  // sdata8
        value = Fixed<uint64_t>();
        break;
      case 0x01:
        value = Uleb();
        break;
      case 0x02:
        value = Fixed<uint16_t>();
        break;
      case 0x03:
        value = Fixed<uint32_t>();
        break;
      case 0x09:
        value = static_cast<uint64_t>(Sleb());
        break;
      case 0x0a:
        value = static_cast<uint64_t>(static_cast<int64_t>(Fixed<int16_t>()));
        break;
      case 0x0b:
        value = static_cast<uint64_t>(static_cast<int64_t>(Fixed<int32_t>()));
        break;
      default:
        Fail();
        return 0;
    }
    switch (enc & 0x70) {
      case 0x00:
        break;
      case 0x10:  // pcrel
        value += at;
        break;
      case 0x30:  // datarel
        if (datarel == 0) Fail();
        value += datarel;
        break;
      default:  // textrel, funcrel, aligned: not used on x86-64 Linux
        Fail();
        return 0;
    }
    return ok_ ? value : 0;
  }

  // An entry's length field; `wide` is set for the 64-bit DWARF format.
  // Returns 0 on failure or for a zero terminator.
  uint64_t Length(bool* wide) {
    uint64_t length = Fixed<uint32_t>();
    *wide = length == 0xffffffff;
    if (*wide) length = Fixed<uint64_t>();
    if (length > kMaxEntryBytes) Fail();
    return ok_ ? length : 0;
  }

 private:
  bool Take(uint64_t n) {
    if (ok_ && pos_ <= end_ && n <= end_ - pos_ && module_->Contains(pos_, n)) return true;
    ok_ = false;
    return false;
  }

  const Module* module_;
  uintptr_t pos_;
  uintptr_t end_;
  bool ok_ = true;
};

struct Cie {
  uint64_t code_align = 1;
  int64_t data_align = -8;
  uint64_t ra_reg = 16;
  uint8_t fde_encoding = 0;  // absptr
  bool augmented = false;    // 'z': FDEs carry an augmentation length
  uintptr_t instructions = 0;
  uintptr_t end = 0;
};

bool ParseCie(const Module& module, uintptr_t at, Cie* cie) {
  Reader r(module, at, at + 12);
  bool wide = false;
  const uint64_t length = r.Length(&wide);
  if (length == 0) return false;
  cie->end = r.pos() + length;
  r = Reader(module, r.pos(), cie->end);
  const uint64_t id = wide ? r.Fixed<uint64_t>() : r.Fixed<uint32_t>();
  const uint8_t version = r.U8();
  if (!r.ok() || id != 0 || (version != 1 && version != 3 && version != 4)) return false;
  char augmentation[8] = {};
  for (size_t i = 0;; ++i) {
    const char c = static_cast<char>(r.U8());
    if (!r.ok() || i == sizeof(augmentation)) return false;
    augmentation[i] = c;
    if (c == '\0') break;
  }
  if (version == 4) r.Skip(2);  // address size, segment selector size
  cie->code_align = r.Uleb();
  cie->data_align = r.Sleb();
  cie->ra_reg = version == 1 ? r.U8() : r.Uleb();
  if (augmentation[0] == 'z') {
    cie->augmented = true;
    const uint64_t size = r.Uleb();
    const uintptr_t data_end = r.pos() + size;
    for (const char* c = augmentation + 1; *c != '\0' && r.ok(); ++c) {
      if (*c == 'R') {
        cie->fde_encoding = r.U8();
      } else if (*c == 'P') {
        const uint8_t enc = r.U8();
        r.Encoded(static_cast<uint8_t>(enc & 0x7f), 0);  // the personality routine: not needed
      } else if (*c == 'L') {
        r.U8();  // LSDA encoding
      } else if (*c != 'B' && *c != 'G') {
        // 'S', a signal frame: every register is restored from a context.
        // Anything unknown: its data could be skipped (it ends at data_end),
        // but not what it means for the FDEs. Either way the CIE is not used.
        return false;
      }
    }
    if (!r.ok() || data_end < r.pos()) return false;
    r.Skip(data_end - r.pos());
  } else if (augmentation[0] != '\0') {
    return false;  // e.g. GCC 2's "eh": its layout is not known
  }
  cie->instructions = r.pos();
  return r.ok() && cie->code_align != 0;
}

// How one register is recovered in the caller.
struct RegRule {
  enum Kind : uint8_t { kSame, kOffset, kUndefined, kOther };
  Kind kind = kSame;
  int64_t offset = 0;  // kOffset: saved at CFA + offset
};

struct Row {
  uint64_t cfa_reg = kRegRsp;
  int64_t cfa_offset = 8;
  bool cfa_expression = false;
  RegRule rbp;
  RegRule ra;
};

// value * factor, wrapping: the tables are not trusted, and an absurd offset
// is refused later (RuleOf) rather than overflowing here.
int64_t Scale(uint64_t value, int64_t factor) {
  return static_cast<int64_t>(value * static_cast<uint64_t>(factor));
}

// Runs call frame instructions from `r` until the row that covers `pc`.
// `loc` is the address of the row being built; `initial` is the row after
// the CIE's instructions (for DW_CFA_restore). Returns false on anything not
// understood.
bool Execute(Reader r, const Cie& cie, uintptr_t pc, uintptr_t* loc, Row* row, const Row& initial) {
  Row stack[kMaxRememberedStates];
  int depth = 0;
  auto set = [&](uint64_t reg, RegRule rule) {
    if (reg == kRegRbp) row->rbp = rule;
    if (reg == cie.ra_reg) row->ra = rule;
  };
  auto restore = [&](uint64_t reg) {
    if (reg == kRegRbp) row->rbp = initial.rbp;
    if (reg == cie.ra_reg) row->ra = initial.ra;
  };
  auto offset = [&](uint64_t reg, int64_t off) { set(reg, {RegRule::kOffset, off}); };
  auto advance = [&](uint64_t delta) {
    *loc += delta * cie.code_align;
    return *loc > pc;
  };
  const auto data_align = cie.data_align;
  while (!r.AtEnd()) {
    const uint8_t op = r.U8();
    const uint8_t low = op & 0x3f;
    switch (op & 0xc0) {
      case 0x40:  // DW_CFA_advance_loc
        if (advance(low)) return true;
        continue;
      case 0x80:  // DW_CFA_offset
        offset(low, Scale(r.Uleb(), data_align));
        continue;
      case 0xc0:  // DW_CFA_restore
        restore(low);
        continue;
      default:
        break;
    }
    switch (op) {
      case 0x00:  // nop
        break;
      case 0x01:  // set_loc
        *loc = r.Encoded(cie.fde_encoding, 0);
        if (*loc > pc) return r.ok();
        break;
      case 0x02:
        if (advance(r.U8())) return r.ok();
        break;
      case 0x03:
        if (advance(r.Fixed<uint16_t>())) return r.ok();
        break;
      case 0x04:
        if (advance(r.Fixed<uint32_t>())) return r.ok();
        break;
      case 0x05: {  // offset_extended
        const uint64_t reg = r.Uleb();
        offset(reg, Scale(r.Uleb(), data_align));
        break;
      }
      case 0x06:  // restore_extended
        restore(r.Uleb());
        break;
      case 0x07:  // undefined
        set(r.Uleb(), {RegRule::kUndefined, 0});
        break;
      case 0x08:  // same_value
        set(r.Uleb(), {RegRule::kSame, 0});
        break;
      case 0x09: {  // register
        const uint64_t reg = r.Uleb();
        r.Uleb();
        set(reg, {RegRule::kOther, 0});
        break;
      }
      case 0x0a:  // remember_state
        if (depth == kMaxRememberedStates) return false;
        stack[depth++] = *row;
        break;
      case 0x0b:  // restore_state
        if (depth == 0) return false;
        *row = stack[--depth];
        break;
      case 0x0c:  // def_cfa
        row->cfa_reg = r.Uleb();
        row->cfa_offset = static_cast<int64_t>(r.Uleb());
        row->cfa_expression = false;
        break;
      case 0x0d:  // def_cfa_register
        row->cfa_reg = r.Uleb();
        row->cfa_expression = false;
        break;
      case 0x0e:  // def_cfa_offset
        row->cfa_offset = static_cast<int64_t>(r.Uleb());
        break;
      case 0x0f:  // def_cfa_expression
        r.Skip(r.Uleb());
        row->cfa_expression = true;
        break;
      case 0x10:    // expression
      case 0x16: {  // val_expression
        const uint64_t reg = r.Uleb();
        r.Skip(r.Uleb());
        set(reg, {RegRule::kOther, 0});
        break;
      }
      case 0x11: {  // offset_extended_sf
        const uint64_t reg = r.Uleb();
        offset(reg, Scale(static_cast<uint64_t>(r.Sleb()), data_align));
        break;
      }
      case 0x12:  // def_cfa_sf
        row->cfa_reg = r.Uleb();
        row->cfa_offset = Scale(static_cast<uint64_t>(r.Sleb()), data_align);
        row->cfa_expression = false;
        break;
      case 0x13:  // def_cfa_offset_sf
        row->cfa_offset = Scale(static_cast<uint64_t>(r.Sleb()), data_align);
        break;
      case 0x14:    // val_offset
      case 0x15: {  // val_offset_sf
        const uint64_t reg = r.Uleb();
        if (op == 0x14) {
          r.Uleb();
        } else {
          r.Sleb();
        }
        set(reg, {RegRule::kOther, 0});
        break;
      }
      case 0x2e:  // GNU_args_size
        r.Uleb();
        break;
      case 0x2f: {  // GNU_negative_offset_extended
        const uint64_t reg = r.Uleb();
        offset(reg, Scale(0 - r.Uleb(), data_align));
        break;
      }
      default:
        return false;
    }
  }
  return r.ok();
}

bool FitsIn(int64_t value, int bits) {
  const int64_t limit = int64_t{1} << (bits - 1);
  return value >= -limit && value < limit;
}

CfiRule RuleOf(const Row& row) {
  CfiRule rule;
  if (row.cfa_expression || (row.cfa_reg != kRegRsp && row.cfa_reg != kRegRbp)) return rule;
  if (row.ra.kind == RegRule::kUndefined) {
    rule.ok = true;
    rule.outermost = true;
    return rule;
  }
  if (row.ra.kind != RegRule::kOffset || !FitsIn(row.ra.offset, 12)) return rule;
  if (row.rbp.kind == RegRule::kOffset) {
    if (!FitsIn(row.rbp.offset, 12)) return rule;
    rule.rbp_saved = true;
    rule.rbp_offset = static_cast<int32_t>(row.rbp.offset);
  } else if (row.rbp.kind != RegRule::kSame) {
    return rule;
  }
  if (!FitsIn(row.cfa_offset, 32)) return rule;
  rule.ok = true;
  rule.cfa_from_rbp = row.cfa_reg == kRegRbp;
  rule.cfa_offset = static_cast<int32_t>(row.cfa_offset);
  rule.ra_offset = static_cast<int32_t>(row.ra.offset);
  return rule;
}

// The FDE whose range holds `pc`, by binary search of .eh_frame_hdr's table;
// 0 when there is none or the table is not in the usual form.
uintptr_t FindFde(const Module& module, uintptr_t pc) {
  const uintptr_t hdr = module.eh_frame_hdr;
  Reader r(module, hdr, hdr + 64);
  const uint8_t version = r.U8();
  const uint8_t frame_ptr_enc = r.U8();
  const uint8_t count_enc = r.U8();
  const uint8_t table_enc = r.U8();
  if (!r.ok() || version != 1 || count_enc == 0xff) return 0;
  r.Encoded(frame_ptr_enc, hdr);
  const uint64_t count = r.Encoded(count_enc, hdr);
  // DW_EH_PE_datarel | DW_EH_PE_sdata4: what every linker writes.
  if (!r.ok() || table_enc != 0x3b || count == 0 || count > kMaxEntryBytes) return 0;
  const uintptr_t table = r.pos();
  if (!module.Contains(table, count * 8)) return 0;
  auto entry = [&](uint64_t i, int field) {
    int32_t value = 0;
    const uintptr_t at = table + i * 8 + static_cast<uint64_t>(field) * 4;
    std::memcpy(&value, reinterpret_cast<const void*>(at), 4);  // NOLINT(performance-no-int-to-ptr)
    return hdr + static_cast<intptr_t>(value);
  };
  if (pc < entry(0, 0)) return 0;
  uint64_t lo = 0;
  uint64_t hi = count;  // the answer is in [lo, hi)
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (entry(mid, 0) <= pc) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return entry(lo, 1);
}

CfiRule RuleFromModule(const Module& module, uintptr_t pc) {
  const uintptr_t fde = FindFde(module, pc);
  if (fde == 0) return {};
  Reader r(module, fde, fde + 12);
  bool wide = false;
  const uint64_t length = r.Length(&wide);
  if (length == 0) return {};
  const uintptr_t end = r.pos() + length;
  r = Reader(module, r.pos(), end);
  const uintptr_t cie_field = r.pos();
  const uint64_t cie_offset = wide ? r.Fixed<uint64_t>() : r.Fixed<uint32_t>();
  Cie cie;
  if (!r.ok() || cie_offset == 0 || cie_offset > cie_field ||
      !ParseCie(module, cie_field - cie_offset, &cie)) {
    return {};
  }
  const uintptr_t begin = r.Encoded(cie.fde_encoding, 0);
  const uintptr_t range = r.Encoded(cie.fde_encoding & 0x0f, 0);
  if (!r.ok() || pc < begin || pc - begin >= range) return {};
  if (cie.augmented) r.Skip(r.Uleb());
  if (!r.ok()) return {};
  Row row;
  uintptr_t loc = begin;
  if (!Execute(Reader(module, cie.instructions, cie.end), cie, pc, &loc, &row, row)) return {};
  const Row initial = row;
  loc = begin;
  if (!Execute(Reader(module, r.pos(), end), cie, pc, &loc, &row, initial)) return {};
  return RuleOf(row);
}

struct FindModuleArg {
  uintptr_t pc;
  Module* module;
  bool found;
  unsigned long long subs;
};

int FindModule(dl_phdr_info* info, size_t size, void* data) {
  auto* arg = static_cast<FindModuleArg*>(data);
  if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
    arg->subs = info->dlpi_subs;
  }
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum && !holds; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    holds = ph.p_type == PT_LOAD && arg->pc >= start && arg->pc - start < ph.p_memsz;
  }
  if (!holds) return 0;
  Module* m = arg->module;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_GNU_EH_FRAME) m->eh_frame_hdr = start;
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_R) != 0 && m->count < kMaxModuleRanges) {
      m->begin[m->count] = start;
      m->end[m->count] = start + ph.p_filesz;  // what the file maps; the rest is zeroed memory
      ++m->count;
    }
  }
  arg->found = true;
  return 1;
}

// The loader's unload count when the table was last checked against it.
constinit std::atomic<unsigned long long> g_subs_seen{0};

CfiRule ComputeAndNoteUnloads(uintptr_t pc) {
  Module module;
  FindModuleArg arg{pc, &module, false, 0};
  dl_iterate_phdr(&FindModule, &arg);
  if (g_subs_seen.exchange(arg.subs, std::memory_order_relaxed) != arg.subs) FlushCfiRules();
  if (!arg.found || module.eh_frame_hdr == 0) return {};
  return RuleFromModule(module, pc);
}

// ---- The table of rules, by pc ----------------------------------------------
//
// A rule packed in one word: flags in bits 0-7, the return address's offset
// from the CFA in bits 8-19 and rbp's in 20-31 (signed), the CFA's offset in
// bits 32-63. kComputed keeps every stored rule non-zero (0: being written).
constexpr uint64_t kComputed = 1;
constexpr uint64_t kOk = 2;
constexpr uint64_t kOutermost = 4;
constexpr uint64_t kCfaFromRbp = 8;
constexpr uint64_t kRbpSaved = 16;

uint64_t Pack(const CfiRule& rule) {
  uint64_t packed = kComputed;
  if (!rule.ok) return packed;
  packed |= kOk | (rule.outermost ? kOutermost : 0) | (rule.cfa_from_rbp ? kCfaFromRbp : 0) |
            (rule.rbp_saved ? kRbpSaved : 0);
  packed |= (static_cast<uint64_t>(rule.ra_offset) & 0xfff) << 8;
  packed |= (static_cast<uint64_t>(rule.rbp_offset) & 0xfff) << 20;
  packed |= static_cast<uint64_t>(static_cast<uint32_t>(rule.cfa_offset)) << 32;
  return packed;
}

inline int64_t RaOffset(uint64_t packed) { return static_cast<int64_t>(packed << 44) >> 52; }
inline int64_t RbpOffset(uint64_t packed) { return static_cast<int64_t>(packed << 32) >> 52; }
inline int64_t CfaOffset(uint64_t packed) { return static_cast<int32_t>(packed >> 32); }

// 32,768 slots of 16 bytes (512 KiB of zero pages until used): a process's
// distinct return addresses, which are a few thousand even in PyTorch.
constexpr int kSlotBits = 15;
constexpr uint64_t kSlots = uint64_t{1} << kSlotBits;
constexpr uint64_t kMaxProbe = 16;
struct Slot {
  std::atomic<uintptr_t> pc{0};
  std::atomic<uint64_t> rule{0};
};
constinit Slot g_slots[kSlots];
constinit std::atomic<int> g_cached{0};
// Moves on each flush, so that threads drop their last walk (see Record).
constinit std::atomic<uint64_t> g_generation{1};

inline uint64_t SlotOf(uintptr_t pc) { return (pc * 0x9e3779b97f4a7c15ULL) >> (64 - kSlotBits); }

// The packed rule for `pc`: from the table, or computed and added to it.
uint64_t RuleFor(uintptr_t pc) {
  const uint64_t home = SlotOf(pc);
  for (uint64_t i = 0; i < kMaxProbe; ++i) {
    Slot& slot = g_slots[(home + i) & (kSlots - 1)];
    const uintptr_t key = slot.pc.load(std::memory_order_acquire);
    if (key == 0) break;
    if (key != pc) continue;
    const uint64_t rule = slot.rule.load(std::memory_order_acquire);
    // 0: another thread is still computing it. A flush may have reused the
    // slot for another pc between the two loads: look again.
    if (rule != 0 && slot.pc.load(std::memory_order_relaxed) == pc) return rule;
    break;
  }
  const uint64_t rule = Pack(ComputeAndNoteUnloads(pc));
  for (uint64_t i = 0; i < kMaxProbe; ++i) {
    Slot& slot = g_slots[(home + i) & (kSlots - 1)];
    uintptr_t key = slot.pc.load(std::memory_order_acquire);
    if (key == 0 && slot.pc.compare_exchange_strong(key, pc, std::memory_order_acq_rel)) {
      slot.rule.store(rule, std::memory_order_release);
      g_cached.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    if (key == pc) break;  // another thread added it meanwhile
  }
  return rule;
}

// The calling thread's stack, [lo, hi). hi == 1: glibc could not say.
struct StackBounds {
  uintptr_t lo = 0;
  uintptr_t hi = 0;
};
thread_local StackBounds t_stack __attribute__((tls_model("initial-exec")));

StackBounds BoundsOf(pthread_t thread) {
  StackBounds bounds{0, 1};
  pthread_attr_t attr;
  if (pthread_getattr_np(thread, &attr) != 0) return bounds;
  void* addr = nullptr;
  size_t size = 0;
  if (pthread_attr_getstack(&attr, &addr, &size) == 0 && size != 0) {
    bounds.lo = reinterpret_cast<uintptr_t>(addr);
    bounds.hi = bounds.lo + size;
  }
  pthread_attr_destroy(&attr);
  return bounds;
}

// One thread's bounds found ahead of its first walk (PrimeStackBounds):
// published with a release store of `ready`.
struct PrimedBounds {
  pthread_t thread{};
  StackBounds bounds;
  std::atomic<bool> ready{false};
};
PrimedBounds g_primed;
std::atomic<bool> g_priming{false};

const StackBounds& ThreadStack() {
  if (t_stack.hi != 0) return t_stack;
  if (g_primed.ready.load(std::memory_order_acquire) &&
      pthread_equal(g_primed.thread, pthread_self()) != 0) {
    t_stack = g_primed.bounds;
    return t_stack;
  }
  t_stack = BoundsOf(pthread_self());
  return t_stack;
}

// A word of the stack, read without sanitizer checks: these are return
// addresses and saved registers, which ASan does not poison, but the walker
// must not be reported for reading the frames of other functions.
__attribute__((no_sanitize("address", "hwaddress", "thread"))) inline uintptr_t LoadWord(
    uintptr_t at) {
  uintptr_t value = 0;
  __builtin_memcpy(&value, reinterpret_cast<const void*>(at),  // NOLINT(performance-no-int-to-ptr)
                   sizeof(value));
  return value;
}

// One frame's registers, as the walk recovers them. (No initialisers: the
// walk's scratch arrays are not worth zeroing on every capture.)
struct Regs {
  uintptr_t ip;
  uintptr_t sp;
  uintptr_t bp;
};

// How a frame led to its caller: where the caller's ip and rbp were read
// (bp_at 0: rbp unchanged), and whether the CFA was rbp's value plus an offset.
struct Transition {
  uintptr_t ra_at;
  uintptr_t bp_at;
  bool from_rbp;
};

enum class Step { kCaller, kEnd, kDecline };

// Moves `r` from a frame to its caller by the frame's rule. Every read is
// checked against the thread's stack: [sp, hi).
__attribute__((no_sanitize("address", "hwaddress", "thread"))) inline Step StepByRule(
    const StackBounds& stack, bool innermost, Regs* r, Transition* t) {
  // A caller's ip is a return address: the call before it has the frame's row.
  const uint64_t rule = RuleFor(innermost ? r->ip : r->ip - 1);
  if ((rule & kOk) == 0) return Step::kDecline;
  if ((rule & kOutermost) != 0) return Step::kEnd;
  t->from_rbp = (rule & kCfaFromRbp) != 0;
  const uintptr_t cfa = (t->from_rbp ? r->bp : r->sp) + CfaOffset(rule);
  t->ra_at = cfa + RaOffset(rule);
  // Each frame's CFA lies above the last one, and what is read lies in between.
  const uintptr_t last_word = stack.hi - sizeof(uintptr_t);
  if (cfa <= r->sp || cfa > stack.hi || t->ra_at < r->sp || t->ra_at > last_word) {
    return Step::kDecline;
  }
  t->bp_at = 0;
  if ((rule & kRbpSaved) != 0) {
    t->bp_at = cfa + RbpOffset(rule);
    if (t->bp_at < r->sp || t->bp_at > last_word) return Step::kDecline;
    r->bp = LoadWord(t->bp_at);
  }
  r->ip = LoadWord(t->ra_at);
  r->sp = cfa;
  return r->ip == 0 ? Step::kEnd : Step::kCaller;  // a zero return address ends the chain
}

// ---- The last walk of each thread ------------------------------------------
//
// Successive captures on a thread share most of their frames: the training
// loop, the model's layers, main. Walking a frame by its rule is a chain of
// dependent loads (the return address, its rule, the next CFA), about 7 ns a
// frame however few instructions it takes. So each thread keeps the frames
// of its last walk: each frame's registers and how it led to its caller.
// When the walk reaches a frame with the same ip and sp as a recorded one,
// the recorded frames below it are still this stack's as long as the return
// addresses they were read from hold the same values, and rbp is the same
// wherever a frame's CFA was computed from it (rbp often holds data, so it
// is followed, not compared). Those are independent loads: checking a frame
// costs about a nanosecond. The first difference ends the check, and the
// walk goes on by rules from the last frame that matched.
constexpr int kRemembered = 64;  // frames kept per thread
constexpr int kFresh = 24;       // frames walked by rule looking for a recorded one

struct Record {
  uint64_t generation = 0;  // g_generation when recorded; the rules may have changed since
  uint64_t reused = 0;      // frames taken from the record so far (tests)
  int count = 0;            // frames recorded, innermost first
  Regs regs[kRemembered];
  Transition next[kRemembered];  // frame i to its caller (valid for i < count - 1)
};
// 3 KiB a thread, mapped on the thread's first capture and unmapped when it
// exits. Not a thread_local: a library dlopen'ed with initial-exec TLS
// (CUDA_INJECTION64_PATH) must fit all its TLS in glibc's small static
// surplus, so only a pointer lives there.
thread_local Record* t_record __attribute__((tls_model("initial-exec"))) = nullptr;
constexpr uintptr_t kRecordGone = 1;  // t_record after the thread's key destructor ran

constinit pthread_key_t g_record_key{};
constinit std::once_flag g_record_key_once;
constinit std::atomic<bool> g_record_key_ok{false};

void UnmapRecord(void* record) {
  munmap(record, sizeof(Record));
  // A capture from a later TLS destructor of this thread walks without one.
  t_record = reinterpret_cast<Record*>(kRecordGone);  // NOLINT(performance-no-int-to-ptr)
}

// The calling thread's record, or null when it has none (no memory, or the
// thread is exiting).
Record* ThreadRecord() {
  Record* rec = t_record;
  if (rec != nullptr) return reinterpret_cast<uintptr_t>(rec) == kRecordGone ? nullptr : rec;
  std::call_once(g_record_key_once, [] {
    g_record_key_ok.store(pthread_key_create(&g_record_key, &UnmapRecord) == 0);
  });
  void* memory =
      mmap(nullptr, sizeof(Record), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    t_record = reinterpret_cast<Record*>(kRecordGone);  // NOLINT(performance-no-int-to-ptr)
    return nullptr;
  }
  rec = new (memory) Record;
  // Without the key the record stays mapped after the thread exits.
  if (g_record_key_ok.load()) pthread_setspecific(g_record_key, rec);
  t_record = rec;
  return rec;
}

// Moves the recorded frames [from, count) to start at `to` (at most kRemembered kept).
void Shift(Record* rec, int from, int to) {
  if (from == to) return;
  const int moved = std::min(rec->count - from, kRemembered - to);
  const auto bytes = static_cast<size_t>(moved);
  std::memmove(rec->regs + to, rec->regs + from, bytes * sizeof(Regs));
  std::memmove(rec->next + to, rec->next + from, bytes * sizeof(Transition));
  rec->count = to + moved;
}

// Frames walked by rule before the walk joined the record (or gave up looking).
struct FreshFrames {
  Regs regs[kFresh];
  Transition next[kFresh];
};

// Copies fresh[0, count) to the record's frames [at, at + count).
void Adopt(Record* rec, int at, const FreshFrames& fresh, int count) {
  if (count == 0) return;
  const auto bytes = static_cast<size_t>(count);
  std::memcpy(rec->regs + at, fresh.regs, bytes * sizeof(Regs));
  std::memcpy(rec->next + at, fresh.next, bytes * sizeof(Transition));
}

}  // namespace

CfiRule ComputeCfiRule(uintptr_t pc) { return ComputeAndNoteUnloads(pc); }

CfiRule CfiRuleFromTables(const void* begin, size_t size, size_t hdr_offset, uintptr_t pc) {
  Module module;
  module.count = 1;
  module.begin[0] = reinterpret_cast<uintptr_t>(begin);
  module.end[0] = module.begin[0] + size;
  if (hdr_offset >= size) return {};
  module.eh_frame_hdr = module.begin[0] + hdr_offset;
  return RuleFromModule(module, pc);
}

int CfiRulesCached() { return g_cached.load(std::memory_order_relaxed); }

uint64_t CfiFramesReused() {
  const Record* rec = ThreadRecord();
  return rec != nullptr ? rec->reused : 0;
}

}  // namespace internal

void FlushCfiRules() {
  for (internal::Slot& slot : internal::g_slots) {
    slot.rule.store(0, std::memory_order_relaxed);
    slot.pc.store(0, std::memory_order_release);
  }
  internal::g_cached.store(0, std::memory_order_relaxed);
  internal::g_generation.fetch_add(1, std::memory_order_release);
}

__attribute__((noinline, no_sanitize("address", "hwaddress", "thread"))) int CfiBacktrace(
    uintptr_t* buffer, int size) {
#if defined(__x86_64__)
  using namespace internal;  // NOLINT(google-build-using-namespace): the walker's own helpers
  if (size <= 0) return 0;
  Regs r{};
  // The registers at one instruction: its own rule describes them.
  asm volatile("leaq 0(%%rip), %0\n\tmovq %%rsp, %1\n\tmovq %%rbp, %2"
               : "=r"(r.ip), "=r"(r.sp), "=r"(r.bp));
  const StackBounds& stack = ThreadStack();
  if (r.sp < stack.lo || r.sp >= stack.hi) return -1;  // not on the thread's stack, or no bounds
  Record* record = ThreadRecord();
  if (record == nullptr) return -1;
  Record& rec = *record;
  const uint64_t generation = g_generation.load(std::memory_order_acquire);
  if (rec.generation != generation) {
    rec.generation = generation;
    rec.count = 0;
  }
  // This walk's frames so far: rec.regs[0, f) (final), then fresh[0, m),
  // walked by rule since the last join. r is frame f + m, stored nowhere yet.
  // The last walk's frames not passed yet are rec.regs[j, rec.count): their
  // sps rise with depth, as this walk's do, so one cursor finds a join.
  FreshFrames fresh;
  int n = 0;  // pcs written; buffer[i - 1] is frame i's ip
  int f = 0;
  int m = 0;
  int j = 0;
  bool joining = true;
  for (;;) {
    if (joining) {
      while (j < rec.count && rec.regs[j].sp < r.sp) ++j;
      if (j < rec.count && rec.regs[j].sp == r.sp && rec.regs[j].ip == r.ip &&
          f + m < kRemembered) {
        // The last walk's frames from j on are this walk's from k on, while
        // their return addresses are in place and rbp is the same where a
        // CFA was computed from it. (A recorded rbp that no CFA depends on
        // may differ from this walk's: it is never used.)
        int k = f + m;
        Shift(&rec, j, k);
        Adopt(&rec, f, fresh, m);
        const int joined_at = k;
        uintptr_t bp = r.bp;  // this walk's rbp in frame k
        // The addresses were checked against this thread's stack when they
        // were recorded, for a frame with this same sp: no need again.
        const int last = std::min(rec.count - 1, k + (size - n));
        for (; k < last; ++k) {
          const Transition& t = rec.next[k];
          if (t.from_rbp && bp != rec.regs[k].bp) break;
          const uintptr_t ip = rec.regs[k + 1].ip;
          if (LoadWord(t.ra_at) != ip) break;
          if (t.bp_at != 0) bp = LoadWord(t.bp_at);
          buffer[n++] = ip;
        }
        rec.reused += static_cast<uint64_t>(k - joined_at);
        if (n == size) return n;  // the frames beyond stay recorded: still the last walk's
        // Frame k is this walk's; its caller is found by rule, below. The
        // last walk's frames after k are still candidates.
        rec.regs[k].bp = bp;
        r = rec.regs[k];
        Transition t{};
        const Step step = StepByRule(stack, k == 0, &r, &t);
        rec.next[k] = t;
        if (step == Step::kDecline) {
          rec.count = 0;
          return -1;
        }
        if (step == Step::kEnd) {
          rec.count = k + 1;
          return n;
        }
        buffer[n++] = r.ip;
        if (n == size) {
          rec.count = k + 1;
          return n;
        }
        f = k + 1;
        m = 0;
        j = k + 1;
        continue;
      }
      if (m == kFresh || f + m == kRemembered) {
        // No join in sight: keep what was walked and go on by rules alone.
        Adopt(&rec, f, fresh, m);
        f += m;
        m = 0;
        rec.count = f;
        joining = false;
      }
    }
    // One frame by its rule.
    const Regs frame = r;
    Transition t{};
    const Step step = StepByRule(stack, f + m == 0, &r, &t);
    if (step == Step::kDecline) {
      rec.count = 0;
      return -1;
    }
    if (joining) {
      fresh.regs[m] = frame;
      fresh.next[m] = t;
      ++m;
    } else {
      if (f < kRemembered) {
        rec.regs[f] = frame;
        rec.next[f] = t;
        rec.count = f + 1;
      }
      ++f;
    }
    if (step == Step::kCaller) buffer[n++] = r.ip;
    if (step == Step::kEnd || n == size) {
      if (joining) {
        Adopt(&rec, f, fresh, m);
        rec.count = f + m;
      }
      return n;
    }
  }
#else
  (void)buffer;
  (void)size;
  return -1;
#endif
}

void PrimeStackBounds(pthread_t thread) {
  using internal::g_primed;
  if (internal::g_priming.exchange(true)) return;  // one thread only: written once
  g_primed.thread = thread;
  g_primed.bounds = internal::BoundsOf(thread);
  g_primed.ready.store(true, std::memory_order_release);
}

}  // namespace gpuwatch
