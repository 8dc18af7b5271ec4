//===- GpuArch.h - GPU architecture names -----------------------*- C++ -*-===//
//
// What moec accepts as a GPU architecture, and which tiles it uses for it:
// one rule for the compiler (tiling) and the runtime (NVRTC, precompile).
// Non-throwing, so that the exception-free compiler libraries can use it.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_SUPPORT_GPUARCH_H
#define MOEC_SUPPORT_GPUARCH_H

#include <optional>
#include <string>
#include <string_view>

namespace moec::support {

/// The oldest architecture moec generates kernels for (Ampere).
constexpr int kOldestArch = 80;

/// The number of "sm_XY" or "sm_XYa" (one lowercase letter): 80, 90, ...;
/// nullopt for anything else.
std::optional<int> archNumber(std::string_view arch);

/// The tile family of `arch`: "sm_80" for sm_80 up to sm_89, "sm_90" for
/// sm_90 and newer; nullopt for names archNumber rejects and for
/// architectures older than sm_80.
std::optional<std::string> tileFamily(std::string_view arch);

/// Why tileFamily rejected `arch`, as one sentence.
std::string unsupportedArchMessage(std::string_view arch);

} // namespace moec::support

#endif // MOEC_SUPPORT_GPUARCH_H
