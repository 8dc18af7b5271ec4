//===- GpuArch.cpp - GPU architecture names -------------------------------===//

#include "moec/support/GpuArch.h"

#include <cctype>

namespace moec::support {

std::optional<int> archNumber(std::string_view arch) {
  if (arch.substr(0, 3) != "sm_")
    return std::nullopt;
  size_t end = 3;
  int number = 0;
  while (end < arch.size() && end < 7 &&
         std::isdigit(static_cast<unsigned char>(arch[end])))
    number = number * 10 + (arch[end++] - '0');
  bool suffixOk =
      end == arch.size() ||
      (end + 1 == arch.size() &&
       std::islower(static_cast<unsigned char>(arch[end])));
  if (end == 3 || !suffixOk)
    return std::nullopt;
  return number;
}

std::optional<std::string> tileFamily(std::string_view arch) {
  std::optional<int> number = archNumber(arch);
  if (!number || *number < kOldestArch)
    return std::nullopt;
  return std::string(*number >= 90 ? "sm_90" : "sm_80");
}

std::string unsupportedArchMessage(std::string_view arch) {
  return "unsupported GPU architecture '" + std::string(arch) +
         "': moec generates kernels for sm_80 (Ampere) and newer, e.g. "
         "sm_80, sm_86, sm_89, sm_90";
}

} // namespace moec::support
