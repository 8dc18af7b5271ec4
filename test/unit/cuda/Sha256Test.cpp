//===- Sha256Test.cpp - SHA-256 against the FIPS 180-4 vectors ------------===//

#include "Sha256.h"
#include "moec/support/DeviceLibrary.h"

#include <gtest/gtest.h>
#include <random>

using namespace moec::detail;

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256Hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(
      sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(
      sha256Hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, MillionAsInUnevenPieces) {
  Sha256 hash;
  std::string chunk(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    size_t n = std::min(left, chunk.size());
    hash.update(chunk.data(), n);
    left -= n;
  }
  EXPECT_EQ(hexDigest(hash.digest()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingBoundaries) {
  // Lengths around the 56-byte padding limit, hashed whole and byte by byte.
  for (size_t length : {55, 56, 57, 63, 64, 65, 119, 120}) {
    std::string text(length, 'x');
    Sha256 pieces;
    for (char c : text)
      pieces.update(&c, 1);
    EXPECT_EQ(hexDigest(pieces.digest()), sha256Hex(text)) << length;
  }
}

TEST(Sha256, MatchesTheDeviceLibraryHashFromCMake) {
  EXPECT_EQ(sha256Hex(moec::deviceLibrarySource()), moec::deviceLibraryHash());
}

// The SHA extensions' rounds against the portable ones: every length up to
// four blocks and a few megabytes fed in uneven pieces, on random bytes.
TEST(Sha256, ShaExtensionsMatchThePortableRounds) {
  if (!Sha256::hasShaExtensions())
    GTEST_SKIP() << "this CPU has no SHA extensions";
  std::mt19937 rng(7);
  std::string bytes(3 << 20, '\0');
  for (char &c : bytes)
    c = static_cast<char>(rng());
  auto both = [&](std::string_view text, size_t piece) {
    std::string digests[2];
    for (bool hardware : {false, true}) {
      bool before = Sha256::allowShaExtensions(hardware);
      Sha256 hash;
      for (size_t at = 0; at < text.size(); at += piece)
        hash.update(text.substr(at, piece));
      digests[hardware] = hexDigest(hash.digest());
      Sha256::allowShaExtensions(before);
    }
    EXPECT_EQ(digests[1], digests[0]) << text.size() << " bytes";
  };
  for (size_t length = 0; length <= 256; ++length)
    both(std::string_view(bytes).substr(length, length), 1000);
  both(bytes, 1000003);
  both(std::string_view(bytes).substr(1, 999999), 777);
}
