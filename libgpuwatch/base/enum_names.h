// Names of enumerators, from one table per enum in enumerator order (values
// 0..N-1): the table is the enum's spelling in reports and logs.
#ifndef GPUWATCH_LIBGPUWATCH_BASE_ENUM_NAMES_H_
#define GPUWATCH_LIBGPUWATCH_BASE_ENUM_NAMES_H_

#include <cstddef>

namespace gpuwatch {

// names[value], or `fallback` for a value outside the table.
template <typename Enum, size_t N>
constexpr const char* EnumName(Enum value, const char* const (&names)[N], const char* fallback) {
  const auto i = static_cast<size_t>(value);
  return i < N ? names[i] : fallback;
}

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_ENUM_NAMES_H_
