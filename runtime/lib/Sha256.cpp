//===- Sha256.cpp - SHA-256 digests for cache keys and checksums ----------===//

#include "Sha256.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define MOEC_SHA256_X86 1
#endif

namespace moec::detail {

namespace {

/// The first 32 bits of the fractional parts of the cube roots of the first
/// 64 primes (FIPS 180-4, section 4.2.2).
constexpr uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/// One block's 64 rounds in portable C++.
void compressPortable(uint32_t state[8], const uint8_t *block) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = uint32_t(block[4 * i]) << 24 | uint32_t(block[4 * i + 1]) << 16 |
           uint32_t(block[4 * i + 2]) << 8 | uint32_t(block[4 * i + 3]);
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
    uint32_t choose = (e & f) ^ (~e & g);
    uint32_t t1 = h + s1 + choose + kRoundConstants[i] + w[i];
    uint32_t s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
    uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
    uint32_t t2 = s0 + majority;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state[0] += a;
  state[1] += b;
  state[2] += c;
  state[3] += d;
  state[4] += e;
  state[5] += f;
  state[6] += g;
  state[7] += h;
}

#ifdef MOEC_SHA256_X86
bool cpuHasShaExtensions() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
    return false;
  bool ssse3 = ecx & (1u << 9), sse41 = ecx & (1u << 19);
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
    return false;
  return ssse3 && sse41 && (ebx & (1u << 29));
}

/// `count` blocks on the SHA extensions. They keep the state as the
/// register pairs ABEF and CDGH; each sha256rnds2 does two rounds, and
/// sha256msg1 / sha256msg2 extend the message schedule four words at a
/// time.
__attribute__((target("sha,sse4.1,ssse3"))) void
compressShaExtensions(uint32_t state[8], const uint8_t *blocks, size_t count) {
  const __m128i byteSwap =
      _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i dcba = _mm_loadu_si128(reinterpret_cast<const __m128i *>(state));
  __m128i hgfe = _mm_loadu_si128(reinterpret_cast<const __m128i *>(state + 4));
  __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
  __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
  __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
  __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
  for (size_t b = 0; b < count; ++b, blocks += 64) {
    const __m128i abefBefore = abef, cdghBefore = cdgh;
    __m128i words[4]; // the schedule's last 16 words, four a register
    for (int i = 0; i < 16; ++i) {
      __m128i w;
      if (i < 4) {
        w = _mm_shuffle_epi8(
            _mm_loadu_si128(reinterpret_cast<const __m128i *>(blocks) + i),
            byteSwap);
      } else {
        w = _mm_sha256msg1_epu32(words[i & 3], words[(i + 1) & 3]);
        w = _mm_add_epi32(
            w, _mm_alignr_epi8(words[(i + 3) & 3], words[(i + 2) & 3], 4));
        w = _mm_sha256msg2_epu32(w, words[(i + 3) & 3]);
      }
      words[i & 3] = w;
      __m128i k =
          _mm_add_epi32(w, _mm_loadu_si128(reinterpret_cast<const __m128i *>(
                               kRoundConstants + 4 * i)));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, k);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(k, 0x0E));
    }
    abef = _mm_add_epi32(abef, abefBefore);
    cdgh = _mm_add_epi32(cdgh, cdghBefore);
  }
  __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
  __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  _mm_storeu_si128(reinterpret_cast<__m128i *>(state),
                   _mm_blend_epi16(feba, dchg, 0xF0));
  _mm_storeu_si128(reinterpret_cast<__m128i *>(state + 4),
                   _mm_alignr_epi8(dchg, feba, 8));
}
#else
bool cpuHasShaExtensions() { return false; }
#endif

std::atomic<bool> shaExtensionsAllowed{true};

} // namespace

bool Sha256::hasShaExtensions() {
  static const bool has = cpuHasShaExtensions();
  return has;
}

bool Sha256::allowShaExtensions(bool allow) {
  return shaExtensionsAllowed.exchange(allow);
}

Sha256::Sha256()
    : state{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
            0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

void Sha256::compress(const uint8_t *blocks, size_t count) {
#ifdef MOEC_SHA256_X86
  if (hasShaExtensions() && shaExtensionsAllowed.load()) {
    compressShaExtensions(state, blocks, count);
    return;
  }
#endif
  for (size_t b = 0; b < count; ++b)
    compressPortable(state, blocks + 64 * b);
}

void Sha256::update(const void *data, size_t size) {
  const uint8_t *p = static_cast<const uint8_t *>(data);
  totalBytes += size;
  if (buffered > 0) {
    size_t take = std::min(size, sizeof(buffer) - buffered);
    std::memcpy(buffer + buffered, p, take);
    buffered += take;
    p += take;
    size -= take;
    if (buffered < sizeof(buffer))
      return;
    compress(buffer, 1);
    buffered = 0;
  }
  size_t blocks = size / 64;
  compress(p, blocks);
  p += 64 * blocks;
  size -= 64 * blocks;
  std::memcpy(buffer, p, size);
  buffered = size;
}

Sha256::Digest Sha256::digest() {
  // Padding: a one bit, zeros up to 56 mod 64, the length in bits.
  uint64_t bits = totalBytes * 8;
  uint8_t pad[72] = {0x80};
  size_t padBytes = (buffered < 56 ? 56 : 120) - buffered;
  for (int i = 0; i < 8; ++i)
    pad[padBytes + i] = uint8_t(bits >> (56 - 8 * i));
  update(pad, padBytes + 8);
  Digest out;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j)
      out[4 * i + j] = uint8_t(state[i] >> (24 - 8 * j));
  return out;
}

std::string hexDigest(const Sha256::Digest &digest) {
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(64);
  for (uint8_t byte : digest) {
    hex.push_back(digits[byte >> 4]);
    hex.push_back(digits[byte & 15]);
  }
  return hex;
}

std::string sha256Hex(std::string_view text) {
  Sha256 hash;
  hash.update(text);
  return hexDigest(hash.digest());
}

} // namespace moec::detail
