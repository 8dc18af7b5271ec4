//===- Sha256Test.cpp - SHA-256 against the FIPS 180-4 vectors ------------===//

#include "Sha256.h"
#include "moec/support/DeviceLibrary.h"

#include <gtest/gtest.h>

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
