//===- Examples.h - the specs the kernel checks run -------------*- C++ -*-===//

#ifndef MOEC_TEST_CHECK_EXAMPLES_H
#define MOEC_TEST_CHECK_EXAMPLES_H

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace moec::test {

/// A spec by name (its file name without .moe) and path.
struct SpecFile {
  std::string name;
  std::string path;
};

/// Every spec in `dir`, sorted by name, so that a new one is tested without
/// a test naming it.
inline std::vector<SpecFile> specsIn(const std::string &dir) {
  std::vector<SpecFile> specs;
  for (const auto &entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".moe")
      specs.push_back({entry.path().stem().string(), entry.path().string()});
  std::sort(
      specs.begin(), specs.end(),
      [](const SpecFile &a, const SpecFile &b) { return a.name < b.name; });
  return specs;
}

/// The names (without .moe) of every spec in examples/, sorted.
inline std::vector<std::string> exampleSpecs() {
  std::vector<std::string> names;
  for (const SpecFile &spec : specsIn(MOEC_SOURCE_DIR "/examples"))
    names.push_back(spec.name);
  return names;
}

/// What the kernel checks run: every example, then the specs in
/// test/unit/check/specs, which cover what no example uses.
inline std::vector<SpecFile> checkedSpecs() {
  std::vector<SpecFile> specs = specsIn(MOEC_SOURCE_DIR "/examples");
  for (SpecFile &spec : specsIn(MOEC_SOURCE_DIR "/test/unit/check/specs"))
    specs.push_back(std::move(spec));
  return specs;
}

} // namespace moec::test

#endif // MOEC_TEST_CHECK_EXAMPLES_H
