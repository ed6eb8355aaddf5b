// CUDA arrays and mipmapped arrays (cuArrayCreate & co.).
//
// An array is an opaque handle: a CUarray_st the simulator allocates, never an address. Its
// storage is real host memory laid out row-major without padding (row = width x element size,
// slice = row x height, height and depth 0 counting as 1), recorded in the MemoryTable as
// Origin::kArray and charged against the device capacity like device memory. A mipmapped array
// holds all its levels in one allocation, each level starting at a 512-byte boundary; its levels
// are CUarray_st objects that point into it.
#ifndef GWSIM_DRIVER_ARRAY_H_
#define GWSIM_DRIVER_ARRAY_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "driver/cuda_headers.h"
#include "driver/state.h"

struct CUmipmappedArray_st;

struct CUarray_st {
  CUDA_ARRAY3D_DESCRIPTOR desc{};  // as created (Height/Depth 0 where the array has no such axis)
  size_t element_size = 0;
  uintptr_t storage = 0;                 // first byte of this array's storage
  uintptr_t base = 0;                    // base of the MemoryTable allocation holding it
  uint64_t buffer_id = 0;                // of that allocation: tells a live array from a freed one
  CUmipmappedArray_st* owner = nullptr;  // the mipmapped array of a level, else null
};

struct CUmipmappedArray_st {
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  unsigned levels = 0;
  std::vector<CUarray_st*> level_arrays;
  uintptr_t base = 0;
  uint64_t buffer_id = 0;
};

namespace gwsim::drv {

// What a copy needs to know of a live array.
struct ArrayView {
  uintptr_t storage = 0;
  size_t element_size = 0;
  size_t row_bytes = 0;  // width x element size: the pitch of its rows
  size_t height = 1;     // rows (>= 1)
  size_t depth = 1;      // slices or layers (>= 1)
  bool one_dimensional = false;
};

// The array's layout, or CUDA_ERROR_INVALID_VALUE for anything that is not a live array (the
// error the copy functions document).
CUresult ViewArray(CUarray array, ArrayView* out);

CUresult ArrayCreate(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc);
CUresult ArrayDestroy(CUarray array);
CUresult ArrayDescriptor(CUarray array, CUDA_ARRAY3D_DESCRIPTOR* out);
CUresult MipmappedArrayCreate(CUmipmappedArray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                              unsigned levels);
CUresult MipmappedArrayLevel(CUarray* level_array, CUmipmappedArray mipmap, unsigned level);
CUresult MipmappedArrayDestroy(CUmipmappedArray mipmap);

}  // namespace gwsim::drv

#endif  // GWSIM_DRIVER_ARRAY_H_
