//===- KernelSource.cpp - the text a generated kernel compiles from -------===//

#include "KernelSource.h"
#include "moec/support/DeviceLibrary.h"
#include "moec/Error.h"
#include "moec/Version.h"

#include <fmt/format.h>

namespace moec::detail {

std::string kernelTextAfterLibrary(const KernelDesc &kernel) {
  return '\n' + kernel.source;
}

std::string kernelTranslationUnit(const KernelDesc &kernel) {
  std::string_view library = deviceLibrarySource();
  std::string unit;
  unit.reserve(library.size() + 1 + kernel.source.size());
  unit.append(library);
  unit += kernelTextAfterLibrary(kernel);
  return unit;
}

void checkDeviceLibrary(const BundleData &bundle) {
  if (bundle.kernels.empty() || bundle.deviceLibraryHash == deviceLibraryHash())
    return;
  throw Error(fmt::format(
      "{}: the bundle's CUDA kernels were generated against another device "
      "library (hash {}, this moec {} has {}); recompile the model with this "
      "moec",
      bundle.origin,
      bundle.deviceLibraryHash.empty() ? "missing"
                                       : bundle.deviceLibraryHash.substr(0, 16),
      kVersion, deviceLibraryHash().substr(0, 16)));
}

} // namespace moec::detail
