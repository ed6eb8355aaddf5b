// What the report model's tests share: counts set to distinct values, and
// two structs' counts and sites compared field by field.
#ifndef GPUWATCH_TESTS_UNIT_REPORT_MODEL_CHECKS_H_
#define GPUWATCH_TESTS_UNIT_REPORT_MODEL_CHECKS_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "libgpuwatch/report/report_model.h"

namespace gpuwatch {

// Every count of T set to a distinct value: base, base + 1, ...
template <typename T>
void Number(T* out, uint64_t base) {
  for (const CountField<T>& f : T::Counts()) out->*f.member = base++;
}

template <typename T>
void ExpectSameCounts(const T& a, const T& b, const std::string& what) {
  for (const CountField<T>& f : T::Counts()) {
    EXPECT_EQ(a.*f.member, b.*f.member) << what << "." << f.key;
  }
}

inline void ExpectSameSite(const ReportSite& a, const ReportSite& b, const std::string& what) {
  EXPECT_EQ(a.site, b.site) << what;
  EXPECT_EQ(a.location, b.location) << what;
  EXPECT_EQ(a.stack, b.stack) << what;
  EXPECT_EQ(a.category, b.category) << what;
  EXPECT_EQ(a.suppressed, b.suppressed) << what;
  EXPECT_EQ(a.processes, b.processes) << what;
}

}  // namespace gpuwatch

#endif  // GPUWATCH_TESTS_UNIT_REPORT_MODEL_CHECKS_H_
