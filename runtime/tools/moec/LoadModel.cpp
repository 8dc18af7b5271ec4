//===- LoadModel.cpp - a model named on the command line ------------------===//

#include "Commands.h"
#include "moec/Error.h"

#include <sys/stat.h>

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

namespace {

bool isFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

} // namespace

/// The data section with each file that is not where the bundle recorded it
/// looked for beside the bundle (bundles move between machines with their
/// data next to them).
static DataSpec dataFilesFor(const Bundle &bundle, const std::string &path) {
  DataSpec spec = bundle.data();
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  for (std::string &file : spec.paths) {
    if (isFile(file))
      continue;
    std::string beside = dir + "/" + file.substr(file.rfind('/') + 1);
    if (isFile(beside))
      file = beside;
  }
  return spec;
}

ModelData openModelData(const Bundle &bundle, const std::string &modelPath,
                        uint64_t seed, Split split) {
  const ModelInfo &model = bundle.model();
  ModelData data;
  DataTarget target;
  target.vocab = model.vocab;
  target.kind = model.kind;
  target.objective = model.objective;
  target.classes = model.classes;
  target.segments = model.segments;
  target.mlm = model.mlm;
  if (model.objective != "lm") {
    data.tokenizer = openTokenizer(bundle, modelPath);
    target.tokenizer = data.tokenizer.get();
  }
  data.source = openDataSource(dataFilesFor(bundle, modelPath), target, seed,
                               split);
  return data;
}

} // namespace moec::driver
