//===- Sha256.h - SHA-256 digests for cache keys and checksums --*- C++ -*-===//
//
// FIPS 180-4 SHA-256, small and dependency-free. The kernel cache names its
// entries by the digest of their key and checks each payload with it. On
// x86 CPUs with the SHA extensions the rounds run on them (a warm start
// checks megabytes of cached modules), elsewhere in portable C++.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_SHA256_H
#define MOEC_RUNTIME_SHA256_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace moec::detail {

/// An incremental SHA-256: update() any number of times, then digest().
class Sha256 {
public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  void update(const void *data, size_t size);
  void update(std::string_view text) { update(text.data(), text.size()); }
  /// The digest of everything passed to update(); the object is spent.
  Digest digest();

  /// Whether this CPU has the SHA extensions that compute the rounds.
  static bool hasShaExtensions();
  /// For tests: lets (or stops) every Sha256 use the SHA extensions where
  /// the CPU has them (they are used by default); returns the old setting.
  static bool allowShaExtensions(bool allow);

private:
  void compress(const uint8_t *blocks, size_t count);

  uint32_t state[8];
  uint8_t buffer[64];
  size_t buffered = 0;
  uint64_t totalBytes = 0;
};

/// The digest as 64 lowercase hex digits.
std::string hexDigest(const Sha256::Digest &digest);
/// SHA-256 of `text`, in hex.
std::string sha256Hex(std::string_view text);

} // namespace moec::detail

#endif // MOEC_RUNTIME_SHA256_H
