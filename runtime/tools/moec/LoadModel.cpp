//===- LoadModel.cpp - a model named on the command line ------------------===//

#include "Commands.h"
#include "moec/Error.h"

namespace moec::driver {

Bundle loadModel(const std::string &path, const std::string &dtype,
                 const std::string &arch, const std::string &f32Matmul) {
  // A .moe file is a spec; anything else must be a bundle.
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".moe") == 0)
    return compileSpec(path, dtype, arch, f32Matmul);
  if (!dtype.empty())
    throw Error(path + ": --dtype applies to .moe specs, not to compiled "
                       "bundles");
  if (!f32Matmul.empty())
    throw Error(path + ": --f32-matmul applies to .moe specs, not to "
                       "compiled bundles (their kernels are generated)");
  return Bundle::load(path);
}

} // namespace moec::driver
