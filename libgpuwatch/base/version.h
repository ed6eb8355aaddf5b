// The library version, kept in step with project(VERSION) in CMakeLists.txt.
#ifndef GPUWATCH_LIBGPUWATCH_BASE_VERSION_H_
#define GPUWATCH_LIBGPUWATCH_BASE_VERSION_H_

namespace gpuwatch {
inline constexpr const char kGpuwatchVersion[] = GPUWATCH_VERSION_STRING;
}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_VERSION_H_
