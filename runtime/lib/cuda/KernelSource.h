//===- KernelSource.h - the text a kernel compiles from ---------*- C++ -*-===//
//
// A bundle carries only each kernel's own source; the device library it was
// generated against is embedded in the runtime. The cuda device, the
// precompile command and the emu device all build a kernel's translation
// unit here, so that they compile exactly the same text.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_KERNELSOURCE_H
#define MOEC_RUNTIME_CUDA_KERNELSOURCE_H

#include "BundleData.h"

#include <string>

namespace moec::detail {

/// What follows the device library in a kernel's translation unit: a
/// newline, then the kernel's own source (what the kernel cache keys on a
/// warm start, see KernelCache::requestAfterLibrary).
std::string kernelTextAfterLibrary(const KernelDesc &kernel);

/// The device library, then kernelTextAfterLibrary.
std::string kernelTranslationUnit(const KernelDesc &kernel);

/// Throws moec::Error unless the bundle's kernels were generated against
/// this runtime's device library (deviceLibraryHash()). A bundle without
/// kernels passes.
void checkDeviceLibrary(const BundleData &bundle);

} // namespace moec::detail

#endif // MOEC_RUNTIME_CUDA_KERNELSOURCE_H
