//===- BundleFuzzer.cpp - the bundle reader on any bytes ------------------===//
//
// The input is a bundle's JSON text. A moec::Error is the expected outcome
// for a bad one; a bundle that reads must also read again from its own
// json(). Anything else (a crash, a sanitizer report, another exception) is
// a finding.
//
//===----------------------------------------------------------------------===//

#include "moec/Bundle.h"
#include "moec/Error.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  std::optional<moec::Bundle> bundle;
  try {
    bundle = moec::Bundle::parse(text, "fuzz.bundle.json");
  } catch (const moec::Error &) {
    return 0;
  }
  for (const std::string &name : bundle->programs()) {
    (void)bundle->programInputs(name);
    (void)bundle->programOutputs(name);
  }
  try {
    (void)moec::Bundle::parse(bundle->json(), "fuzz.bundle.json (saved)");
  } catch (const moec::Error &e) {
    std::fprintf(stderr, "a bundle that read does not read back: %s\n",
                 e.what());
    std::abort();
  }
  return 0;
}
