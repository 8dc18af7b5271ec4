//===- LoadModel.cpp - a model named on the command line ------------------===//

#include "Commands.h"
#include "moec/Error.h"

namespace moec::driver {

Bundle loadModel(const std::string &path, const std::string &dtype,
                 const std::string &arch) {
  // A .moe file is a spec; anything else must be a bundle.
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".moe") == 0)
    return compileSpec(path, dtype, arch);
  if (!dtype.empty())
    throw Error(path + ": --dtype applies to .moe specs, not to compiled "
                       "bundles");
  return Bundle::load(path);
}

} // namespace moec::driver
