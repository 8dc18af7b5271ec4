//===- Examples.h - the specs in examples/ ----------------------*- C++ -*-===//

#ifndef MOEC_TEST_CHECK_EXAMPLES_H
#define MOEC_TEST_CHECK_EXAMPLES_H

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace moec::test {

/// The names (without .moe) of every spec in examples/, sorted, so that a
/// new example is tested without a test naming it.
inline std::vector<std::string> exampleSpecs() {
  std::vector<std::string> specs;
  for (const auto &entry :
       std::filesystem::directory_iterator(MOEC_SOURCE_DIR "/examples"))
    if (entry.path().extension() == ".moe")
      specs.push_back(entry.path().stem().string());
  std::sort(specs.begin(), specs.end());
  return specs;
}

} // namespace moec::test

#endif // MOEC_TEST_CHECK_EXAMPLES_H
