// UTF-8 encoding into a fixed buffer, for code that may not allocate (NVTX's
// wide range names, Python's str objects read from memory).
#ifndef GPUWATCH_LIBGPUWATCH_BASE_UTF8_H_
#define GPUWATCH_LIBGPUWATCH_BASE_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gpuwatch {

// Appends code point `cp` to out[at..cap) as UTF-8 when all of it fits;
// returns the new end (`at` when it does not fit).
inline size_t PutUtf8(uint32_t cp, char* out, size_t at, size_t cap) {
  char buf[4];
  size_t n = 0;
  if (cp < 0x80) {
    buf[n++] = static_cast<char>(cp);
  } else if (cp < 0x800) {
    buf[n++] = static_cast<char>(0xC0 | (cp >> 6));
    buf[n++] = static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    buf[n++] = static_cast<char>(0xE0 | (cp >> 12));
    buf[n++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    buf[n++] = static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    buf[n++] = static_cast<char>(0xF0 | ((cp >> 18) & 0x07));
    buf[n++] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    buf[n++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    buf[n++] = static_cast<char>(0x80 | (cp & 0x3F));
  }
  if (at + n > cap) return at;
  std::memcpy(out + at, buf, n);
  return at + n;
}

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_UTF8_H_
