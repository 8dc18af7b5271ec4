//===- CacheEntry.cpp - the on-disk format of a cached kernel -------------===//
//
// Layout (integers little-endian):
//
//   0   char[8]  "MOECKERN"
//   8   u32      format version
//   12  u32      zero
//   16  u64[5]   sizes of key, cubin, ptx, log, module
//   56  u8[32]   SHA-256 of the five sections, in order
//   88           key, cubin, ptx, log, module
//
//===----------------------------------------------------------------------===//

#include "CacheEntry.h"
#include "Sha256.h"

#include <cstring>
#include <fmt/format.h>

namespace moec::detail::cuda {

namespace {

constexpr char kMagic[8] = {'M', 'O', 'E', 'C', 'K', 'E', 'R', 'N'};
constexpr int kSections = 5;
constexpr size_t kDigestAt = 16 + 8 * kSections;
constexpr size_t kHeaderBytes = kDigestAt + 32;

void putLittleEndian(std::string &out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t getLittleEndian(const std::string &in, size_t at, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value |= uint64_t(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return value;
}

Sha256::Digest checksum(const std::string *const (&sections)[kSections]) {
  Sha256 hash;
  for (const std::string *section : sections)
    hash.update(*section);
  return hash.digest();
}

} // namespace

std::string encodeCacheEntry(const CacheEntry &entry) {
  const std::string *const sections[kSections] = {
      &entry.key, &entry.cubin, &entry.ptx, &entry.log, &entry.module};
  std::string out(kMagic, sizeof(kMagic));
  putLittleEndian(out, kCacheEntryFormat, 4);
  putLittleEndian(out, 0, 4);
  size_t total = kHeaderBytes;
  for (const std::string *s : sections) {
    putLittleEndian(out, s->size(), 8);
    total += s->size();
  }
  Sha256::Digest digest = checksum(sections);
  out.append(reinterpret_cast<const char *>(digest.data()), digest.size());
  out.reserve(total);
  for (const std::string *s : sections)
    out += *s;
  return out;
}

std::optional<CacheEntry> decodeCacheEntry(const std::string &bytes,
                                           std::string &why) {
  if (bytes.size() < kHeaderBytes) {
    why = fmt::format("truncated: {} bytes, shorter than the header",
                      bytes.size());
    return std::nullopt;
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    why = "not a moec kernel cache entry (bad magic)";
    return std::nullopt;
  }
  uint64_t format = getLittleEndian(bytes, 8, 4);
  if (format != kCacheEntryFormat) {
    why = fmt::format("format version {}, this moec reads {}", format,
                      kCacheEntryFormat);
    return std::nullopt;
  }
  if (getLittleEndian(bytes, 12, 4) != 0) {
    why = "a reserved header field is not zero";
    return std::nullopt;
  }
  uint64_t sizes[kSections];
  uint64_t expected = kHeaderBytes;
  for (int i = 0; i < kSections; ++i) {
    sizes[i] = getLittleEndian(bytes, 16 + 8 * i, 8);
    if (sizes[i] > bytes.size() || expected + sizes[i] > bytes.size()) {
      why = fmt::format("truncated: {} bytes, the header promises more",
                        bytes.size());
      return std::nullopt;
    }
    expected += sizes[i];
  }
  if (expected != bytes.size()) {
    why =
        fmt::format("{} bytes, the header promises {}", bytes.size(), expected);
    return std::nullopt;
  }
  CacheEntry entry;
  std::string *const sections[kSections] = {
      &entry.key, &entry.cubin, &entry.ptx, &entry.log, &entry.module};
  size_t at = kHeaderBytes;
  for (int i = 0; i < kSections; ++i) {
    sections[i]->assign(bytes, at, sizes[i]);
    at += sizes[i];
  }
  const std::string *const constSections[kSections] = {
      sections[0], sections[1], sections[2], sections[3], sections[4]};
  Sha256::Digest digest = checksum(constSections);
  if (std::memcmp(digest.data(), bytes.data() + kDigestAt, digest.size()) !=
      0) {
    why = "checksum mismatch";
    return std::nullopt;
  }
  return entry;
}

} // namespace moec::detail::cuda
