//===- variables.h - emu prelude: built-in variables ------------*- C++ -*-===//
//
// One part of the emu prelude (see prelude.h): runtime/CMakeLists.txt
// joins the parts, in the order it lists them, into the one header that
// kernels are built with.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Built-in variables (per fiber)
//===----------------------------------------------------------------------===//

namespace moec_emu {
namespace detail {
inline const uint3 &currentThreadIdx() { return tls.thread->idx; }
inline const uint3 &currentBlockIdx();
inline const dim3 &currentBlockDim();
inline const dim3 &currentGridDim();
} // namespace detail
} // namespace moec_emu

#define threadIdx (::moec_emu::detail::currentThreadIdx())
#define blockIdx (::moec_emu::detail::currentBlockIdx())
#define blockDim (::moec_emu::detail::currentBlockDim())
#define gridDim (::moec_emu::detail::currentGridDim())
