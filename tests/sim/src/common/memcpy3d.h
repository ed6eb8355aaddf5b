// Converting between the driver's two 3D copy descriptors.
#ifndef GWSIM_COMMON_MEMCPY3D_H_
#define GWSIM_COMMON_MEMCPY3D_H_

namespace gwsim {

// Copies the members CUDA_MEMCPY3D and CUDA_MEMCPY3D_PEER share, from either to either: all
// but the contexts of the peer form (reserved pointers in the other), which the caller sets.
template <typename From, typename To>
void CopySharedMemcpy3DMembers(const From& f, To* t) {
  t->srcXInBytes = f.srcXInBytes;
  t->srcY = f.srcY;
  t->srcZ = f.srcZ;
  t->srcLOD = f.srcLOD;
  t->srcMemoryType = f.srcMemoryType;
  t->srcHost = f.srcHost;
  t->srcDevice = f.srcDevice;
  t->srcArray = f.srcArray;
  t->srcPitch = f.srcPitch;
  t->srcHeight = f.srcHeight;
  t->dstXInBytes = f.dstXInBytes;
  t->dstY = f.dstY;
  t->dstZ = f.dstZ;
  t->dstLOD = f.dstLOD;
  t->dstMemoryType = f.dstMemoryType;
  t->dstHost = f.dstHost;
  t->dstDevice = f.dstDevice;
  t->dstArray = f.dstArray;
  t->dstPitch = f.dstPitch;
  t->dstHeight = f.dstHeight;
  t->WidthInBytes = f.WidthInBytes;
  t->Height = f.Height;
  t->Depth = f.Depth;
}

}  // namespace gwsim

#endif  // GWSIM_COMMON_MEMCPY3D_H_
