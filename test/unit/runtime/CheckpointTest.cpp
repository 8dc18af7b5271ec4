//===- CheckpointTest.cpp - safetensors reading, writing and checking -----===//

#include "moec/Checkpoint.h"
#include "moec/Error.h"

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace moec;
namespace fs = std::filesystem;

namespace {

/// A fresh directory per test, removed afterwards.
class CheckpointTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "moec-ckpt-XXXXXX");
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir = pattern;
  }
  void TearDown() override {
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add);
    fs::remove_all(dir);
  }

  std::string file(const std::string &name) const { return dir / name; }

  static void writeBytes(const std::string &path, const std::string &bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  static std::string readBytes(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  /// Names in `dir`, to check that no temporary was left behind.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto &entry : fs::directory_iterator(dir))
      names.push_back(entry.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  /// Loads `bytes` from a file and returns the error message ("" if none).
  std::string loadError(const std::string &bytes) {
    std::string path = file("model.ckpt");
    writeBytes(path, bytes);
    try {
      loadCheckpoint(path);
    } catch (const Error &e) {
      std::string message = e.what();
      EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
      return message.substr(path.size() + 2);
    }
    return "";
  }

  fs::path dir;
};

/// A safetensors file: the header length, the header, the data.
std::string safetensors(const std::string &header, const std::string &data) {
  uint64_t n = header.size();
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return bytes + header + data;
}

/// A file with one F32 [2] tensor 'a' and one F32 [2] tensor 'b'.
std::string twoTensorFile() {
  return safetensors(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
      std::string(16, '\1'));
}

template <typename T>
Tensor tensorOf(DType dtype, Shape shape, std::vector<T> values) {
  Tensor t(dtype, std::move(shape));
  EXPECT_EQ(t.nbytes(), values.size() * sizeof(T));
  std::memcpy(t.raw(), values.data(), t.nbytes());
  return t;
}

bool sameTensor(const Tensor &a, const Tensor &b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

} // namespace

//===----------------------------------------------------------------------===//
// Round trips and the format
//===----------------------------------------------------------------------===//

TEST_F(CheckpointTest, RoundTripsEveryDTypeAndMetadata) {
  std::map<std::string, Tensor> tensors;
  tensors["f32"] = Tensor::of<float>({2, 3}, {1.5f, -2, 3, 4, 5, 6e-30f});
  tensors["f64"] = Tensor::of<double>({3}, {1e300, -0.0, 3.25});
  tensors["bf16"] = tensorOf<uint16_t>(DType::BF16, {2}, {0x3f80, 0xc000});
  tensors["f16"] = tensorOf<uint16_t>(DType::F16, {1, 2}, {0x3c00, 0x7bff});
  tensors["i32"] = Tensor::of<int32_t>({2, 2}, {1, -2, INT32_MAX, INT32_MIN});
  tensors["i64"] = Tensor::of<int64_t>({1}, {INT64_MIN});
  tensors["scalar"] = Tensor::of<float>({}, {42});
  tensors["empty"] = Tensor(DType::F32, {0, 4});
  std::map<std::string, std::string> metadata = {{"step", "100"},
                                                 {"format", "pt"}};
  std::string path = file("model.ckpt");
  saveCheckpoint(path, tensors, metadata);

  CheckpointContents loaded = loadCheckpoint(path);
  EXPECT_EQ(loaded.metadata, metadata);
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  for (const auto &[name, tensor] : tensors) {
    ASSERT_TRUE(loaded.tensors.count(name)) << name;
    EXPECT_TRUE(sameTensor(loaded.tensors.at(name), tensor)) << name;
  }
  EXPECT_EQ(listing(), std::vector<std::string>{"model.ckpt"});
}

TEST_F(CheckpointTest, WritesTheSafetensorsLayout) {
  std::map<std::string, Tensor> tensors;
  tensors["b"] = Tensor::of<float>({2}, {1, 2});
  tensors["a"] = Tensor::of<int64_t>({1}, {7});
  std::string path = file("model.ckpt");
  saveCheckpoint(path, tensors, {{"k", "v"}});

  std::string bytes = readBytes(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u) << "the data section must start 8-byte aligned";
  ASSERT_EQ(bytes.size(), 8 + n + 16);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  // Sorted by name and contiguous: 'a' first.
  EXPECT_EQ(header["a"]["dtype"], "I64");
  EXPECT_EQ(header["a"]["shape"], nlohmann::json::array({1}));
  EXPECT_EQ(header["a"]["data_offsets"], nlohmann::json::array({0, 8}));
  EXPECT_EQ(header["b"]["dtype"], "F32");
  EXPECT_EQ(header["b"]["data_offsets"], nlohmann::json::array({8, 16}));
  // The metadata given, and the CRC-32 of the data section.
  EXPECT_EQ(header["__metadata__"]["k"], "v");
  EXPECT_EQ(header["__metadata__"].size(), 2u);
  std::string crc = header["__metadata__"]["data_crc32"];
  EXPECT_EQ(crc.size(), 8u);
  EXPECT_EQ(crc.find_first_not_of("0123456789abcdef"), std::string::npos);
  int64_t seven;
  std::memcpy(&seven, bytes.data() + 8 + n, 8);
  EXPECT_EQ(seven, 7);
  float two;
  std::memcpy(&two, bytes.data() + 8 + n + 12, 4);
  EXPECT_EQ(two, 2.0f);
}

// Written byte by byte as the Python safetensors package does: metadata
// first, fields in its order, space padding; the values are little-endian.
TEST_F(CheckpointTest, LoadsAHandWrittenFile) {
  std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("bias":{"dtype":"BF16","shape":[2],"data_offsets":[16,20]},)"
      R"("step":{"dtype":"I64","shape":[],"data_offsets":[20,28]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  const unsigned char data[] = {0x00, 0x00, 0x80, 0x3f, // 1.0f
                                0x00, 0x00, 0x00, 0xc0, // -2.0f
                                0x00, 0x00, 0x40, 0x40, // 3.0f
                                0x00, 0x00, 0x80, 0x40, // 4.0f
                                0x80, 0x3f,             // bf16 1.0
                                0x40, 0xc0,             // bf16 -3.0
                                0x2a, 0,    0,    0,    0, 0, 0, 0};
  std::string path = file("model.ckpt");
  writeBytes(path, safetensors(header, std::string(data, data + sizeof(data))));

  CheckpointContents c = loadCheckpoint(path);
  EXPECT_EQ(c.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  ASSERT_EQ(c.tensors.size(), 3u);
  const Tensor &weight = c.tensors.at("weight");
  EXPECT_EQ(weight.dtype(), DType::F32);
  EXPECT_EQ(weight.shape(), (Shape{2, 2}));
  EXPECT_EQ(weight.at(0), 1.0);
  EXPECT_EQ(weight.at(1), -2.0);
  EXPECT_EQ(weight.at(3), 4.0);
  const Tensor &bias = c.tensors.at("bias");
  EXPECT_EQ(bias.dtype(), DType::BF16);
  EXPECT_EQ(bias.at(0), 1.0);
  EXPECT_EQ(bias.at(1), -3.0);
  const Tensor &step = c.tensors.at("step");
  EXPECT_EQ(step.dtype(), DType::I64);
  EXPECT_EQ(step.shape(), Shape{});
  EXPECT_EQ(step.at(0), 42.0);
}

// The safetensors format requires the tensors to cover the data section
// exactly; anything else means the offsets or the header length are wrong.
TEST_F(CheckpointTest, RejectsHolesAndTrailingBytes) {
  std::string gap =
      R"({"a":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}})";
  EXPECT_EQ(loadError(safetensors(gap, std::string(8, '\0'))),
            "bytes [0, 4) of the data section belong to no tensor (before "
            "'a'); the header length or offsets are wrong");
  std::string tail =
      R"({"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})";
  EXPECT_EQ(loadError(safetensors(tail, std::string(5, '\0'))),
            "the tensors cover 4 bytes of the data section but it holds 5; "
            "the header length or offsets are wrong, or bytes were appended");
}

// A header length one short still parses (the last byte is padding) but
// would load every weight a byte early.
TEST_F(CheckpointTest, RejectsAHeaderLengthOneShort) {
  std::string header =
      R"({"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}   )";
  std::string bytes = safetensors(header, std::string(4, '\1'));
  bytes[0] = static_cast<char>(header.size() - 1);
  EXPECT_EQ(loadError(bytes),
            "the tensors cover 4 bytes of the data section but it holds 5; "
            "the header length or offsets are wrong, or bytes were appended");
}

TEST_F(CheckpointTest, RejectsDataThatDoesNotMatchItsChecksum) {
  std::string path = file("model.ckpt");
  saveCheckpoint(path, {{"w", Tensor::of<float>({3}, {1, 2, 3})}}, {});
  std::string bytes = readBytes(path);
  bytes[bytes.size() - 2] ^= 0x10;
  std::string message = loadError(bytes);
  EXPECT_NE(message.find("the data section does not match the checksum in "
                         "its metadata"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("the file is damaged"), std::string::npos);
}

TEST_F(CheckpointTest, OverwritesAnExistingFile) {
  std::string path = file("model.ckpt");
  saveCheckpoint(path, {{"x", Tensor::of<float>({1}, {1})}}, {});
  saveCheckpoint(path, {{"y", Tensor::of<float>({1}, {2})}}, {});
  CheckpointContents c = loadCheckpoint(path);
  ASSERT_EQ(c.tensors.size(), 1u);
  EXPECT_EQ(c.tensors.at("y").at(0), 2.0);
  EXPECT_EQ(listing(), std::vector<std::string>{"model.ckpt"});
}

//===----------------------------------------------------------------------===//
// Atomic writes
//===----------------------------------------------------------------------===//

TEST_F(CheckpointTest, RefusesToReplaceADirectory) {
  std::string path = file("model.ckpt");
  fs::create_directory(path);
  writeBytes(path + "/inside", "keep");
  try {
    saveCheckpoint(path, {{"x", Tensor::of<float>({1}, {1})}}, {});
    FAIL() << "saving over a directory succeeded";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find(
                  path + ": refusing to replace it: it is a directory"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(fs::is_directory(path));
  EXPECT_EQ(readBytes(path + "/inside"), "keep");
  EXPECT_EQ(listing(), std::vector<std::string>{"model.ckpt"});
}

TEST_F(CheckpointTest, FailedWriteLeavesOldFileIntact) {
  std::string path = file("model.ckpt");
  saveCheckpoint(path, {{"old", Tensor::of<float>({1}, {1})}}, {});
  std::string before = readBytes(path);

  // A file size limit makes the write fail halfway, even for root.
  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct rlimit limited = saved;
  limited.rlim_cur = 4096;
  auto savedHandler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  std::string message;
  try {
    saveCheckpoint(path, {{"new", Tensor(DType::F32, {10000})}}, {});
  } catch (const Error &e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, savedHandler);

  EXPECT_NE(message.find("write failed: File too large"), std::string::npos)
      << message;
  EXPECT_EQ(readBytes(path), before);
  EXPECT_EQ(listing(), std::vector<std::string>{"model.ckpt"});
}

TEST_F(CheckpointTest, UnwritableDirectoryLeavesOldFileIntact) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root ignores directory permissions";
  std::string path = file("model.ckpt");
  saveCheckpoint(path, {{"old", Tensor::of<float>({1}, {1})}}, {});
  std::string before = readBytes(path);
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  std::string message;
  try {
    saveCheckpoint(path, {{"new", Tensor::of<float>({1}, {2})}}, {});
  } catch (const Error &e) {
    message = e.what();
  }
  fs::permissions(dir, fs::perms::owner_all);
  EXPECT_NE(message.find("cannot create the temporary file"), std::string::npos)
      << message;
  EXPECT_EQ(readBytes(path), before);
  EXPECT_EQ(listing(), std::vector<std::string>{"model.ckpt"});
}

TEST_F(CheckpointTest, SaveRejectsReservedAndEmptyTensors) {
  std::string path = file("model.ckpt");
  EXPECT_THROW(
      saveCheckpoint(path, {{"__metadata__", Tensor::of<float>({1}, {1})}}, {}),
      Error);
  EXPECT_THROW(saveCheckpoint(path, {{"x", Tensor()}}, {}), Error);
  EXPECT_TRUE(listing().empty());
}

//===----------------------------------------------------------------------===//
// Malformed files
//===----------------------------------------------------------------------===//

TEST_F(CheckpointTest, MissingFile) {
  std::string path = file("nope.ckpt");
  try {
    loadCheckpoint(path);
    FAIL();
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()),
              path + ": cannot open the checkpoint: No such file or directory");
  }
}

TEST_F(CheckpointTest, TruncatedBeforeTheHeaderLength) {
  EXPECT_EQ(loadError(""), "truncated: the file holds 0 bytes, fewer than the "
                           "8-byte header length that starts a safetensors "
                           "file");
  EXPECT_EQ(loadError(twoTensorFile().substr(0, 5)),
            "truncated: the file holds 5 bytes, fewer than the 8-byte header "
            "length that starts a safetensors file");
}

TEST_F(CheckpointTest, TruncatedInsideTheHeader) {
  std::string full = twoTensorFile();
  EXPECT_EQ(loadError(full.substr(0, 8)),
            "truncated: the header needs 108 bytes but the file holds only 0 "
            "after the 8-byte length");
  EXPECT_EQ(loadError(full.substr(0, 60)),
            "truncated: the header needs 108 bytes but the file holds only 52 "
            "after the 8-byte length");
}

TEST_F(CheckpointTest, TruncatedInsideTheData) {
  std::string full = twoTensorFile();
  EXPECT_EQ(loadError(full.substr(0, full.size() - 3)),
            "truncated: tensor 'b' needs bytes [8, 16) of the data section "
            "but it holds only 13 bytes");
  EXPECT_EQ(loadError(full.substr(0, full.size() - 16)),
            "truncated: tensor 'a' needs bytes [0, 8) of the data section "
            "but it holds only 0 bytes");
}

TEST_F(CheckpointTest, HeaderLengthTooLarge) {
  std::string bytes = twoTensorFile();
  bytes[5] = 1; // 2^40 + 108
  EXPECT_EQ(loadError(bytes),
            "the header length is 1099511627884 bytes, more than the 100 MB "
            "limit; the file is damaged or not a safetensors file");
}

TEST_F(CheckpointTest, HeaderIsNotJson) {
  EXPECT_EQ(loadError(safetensors(R"({"a": {"dtype": )", "")),
            "the header is not valid JSON: parse error at line 1, column 17: "
            "syntax error while parsing value - unexpected end of input; "
            "expected '[', '{', or a literal");
  EXPECT_EQ(loadError(safetensors("[1, 2]", "")),
            "the header is a JSON array, expected an object");
}

TEST_F(CheckpointTest, MalformedEntries) {
  auto entry = [&](const std::string &fields) {
    return loadError(safetensors(R"({"a":)" + fields + "}", std::string(8, 0)));
  };
  EXPECT_EQ(entry("5"), "tensor 'a' is described by 5, expected an object "
                        "with dtype, shape and data_offsets");
  EXPECT_EQ(entry(R"({"shape":[2],"data_offsets":[0,8]})"),
            "tensor 'a' has no 'dtype' field");
  EXPECT_EQ(entry(R"({"dtype":"F32","data_offsets":[0,8]})"),
            "tensor 'a' has no 'shape' field (expected an array of "
            "non-negative integers)");
  EXPECT_EQ(entry(R"({"dtype":"F32","shape":[2]})"),
            "tensor 'a' has no 'data_offsets' field (expected an array "
            "[begin, end] of two non-negative integers)");
  EXPECT_EQ(entry(R"({"dtype":5,"shape":[2],"data_offsets":[0,8]})"),
            "tensor 'a': 'dtype' is 5, expected a string such as \"F32\"");
  EXPECT_EQ(entry(R"({"dtype":"U8","shape":[8],"data_offsets":[0,8]})"),
            "tensor 'a' has dtype 'U8', which moec does not support (expected "
            "F32, F64, BF16, F16, I32 or I64)");
  EXPECT_EQ(entry(R"({"dtype":"F32","shape":"2","data_offsets":[0,8]})"),
            "tensor 'a': 'shape' is \"2\", expected an array of non-negative "
            "integers");
  EXPECT_EQ(entry(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"),
            "tensor 'a': shape[0] is -2, expected a non-negative integer");
  EXPECT_EQ(entry(R"({"dtype":"F32","shape":[1,2.5],"data_offsets":[0,8]})"),
            "tensor 'a': shape[1] is 2.5, expected a non-negative integer");
  EXPECT_EQ(entry(R"({"dtype":"F32","shape":[[2]],"data_offsets":[0,8]})"),
            "'a' in the header has arrays or objects nested deeper than "
            "safetensors allows");
  EXPECT_EQ(entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4,8]})"),
            "tensor 'a': 'data_offsets' has 3 elements, expected two, "
            "[begin, end]");
  EXPECT_EQ(entry(R"({"dtype":"F32","shape":[0],"data_offsets":[8,0]})"),
            "tensor 'a': data_offsets [8, 0] ends before it begins");
}

TEST_F(CheckpointTest, ShapeDisagreesWithOffsets) {
  EXPECT_EQ(loadError(safetensors(
                R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                std::string(12, 0))),
            "tensor 'a': shape [3] of F32 needs 12 bytes but data_offsets "
            "[0, 8] span 8 bytes");
  // 2^62 elements of 4 bytes wrap to 0 bytes in 64-bit arithmetic.
  EXPECT_EQ(
      loadError(
          safetensors(R"({"a":{"dtype":"F32","shape":[4611686018427387904],)"
                      R"("data_offsets":[0,0]}})",
                      "")),
      "tensor 'a': shape [4611686018427387904] of F32 needs more than 2^63 "
      "bytes but data_offsets [0, 0] span 0 bytes");
}

TEST_F(CheckpointTest, OverlappingOffsets) {
  EXPECT_EQ(loadError(safetensors(
                R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                std::string(12, 0))),
            "tensors 'a' (bytes [0, 8)) and 'b' (bytes [4, 12)) overlap in the "
            "data section");
}

TEST_F(CheckpointTest, DuplicateNames) {
  EXPECT_EQ(loadError(safetensors(
                R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                std::string(8, 0))),
            "the header names 'a' twice");
}

TEST_F(CheckpointTest, MalformedMetadata) {
  EXPECT_EQ(loadError(safetensors(R"({"__metadata__":{"step":5}})", "")),
            "__metadata__ 'step' is 5 (number), expected a string "
            "(safetensors metadata values are strings)");
  EXPECT_EQ(loadError(safetensors(R"({"__metadata__":["x"]})", "")),
            "'__metadata__' is a JSON array, expected an object mapping "
            "strings to strings");
}

//===----------------------------------------------------------------------===//
// Matching a checkpoint to a model
//===----------------------------------------------------------------------===//

namespace {

CheckpointContents someContents() {
  CheckpointContents c;
  c.tensors["embed.tokens"] = Tensor(DType::F64, {100, 64});
  c.tensors["layers.0.wq"] = Tensor(DType::F32, {64, 32});
  c.tensors["layers.1.moe.w2"] = Tensor(DType::F32, {4, 64, 256});
  c.tensors["foo"] = Tensor(DType::F32, {1});
  return c;
}

std::string checkError(const CheckpointContents &c,
                       const std::vector<TensorSpec> &expected,
                       bool allowUnexpected = false) {
  try {
    checkCheckpoint("model.ckpt", c, expected, allowUnexpected);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(CheckCheckpoint, AcceptsAMatchingCheckpoint) {
  CheckpointContents c = someContents();
  std::vector<TensorSpec> expected;
  for (const auto &[name, t] : c.tensors)
    expected.push_back({name, t.dtype(), t.shape()});
  EXPECT_EQ(checkError(c, expected), "");
}

TEST(CheckCheckpoint, WrongShape) {
  CheckpointContents c;
  c.tensors["layers.0.wq"] = Tensor(DType::F32, {64, 32});
  EXPECT_EQ(checkError(c, {{"layers.0.wq", DType::F32, {64, 64}}}),
            "model.ckpt: tensor 'layers.0.wq' has shape [64, 32], the model "
            "expects [64, 64]");
}

TEST(CheckCheckpoint, WrongDType) {
  CheckpointContents c;
  c.tensors["embed.tokens"] = Tensor(DType::F64, {2});
  EXPECT_EQ(checkError(c, {{"embed.tokens", DType::F32, {2}}}),
            "model.ckpt: tensor 'embed.tokens' has dtype F64, the model "
            "expects F32");
}

TEST(CheckCheckpoint, MissingSuggestsTheNearestName) {
  CheckpointContents c;
  c.tensors["layers.1.moe.w2"] = Tensor(DType::F32, {1});
  c.tensors["zzz"] = Tensor(DType::F32, {1});
  EXPECT_EQ(checkError(c, {{"layers.1.moe.w1", DType::F32, {1}},
                           {"layers.1.moe.w2", DType::F32, {1}},
                           {"zzz", DType::F32, {1}}}),
            "model.ckpt: missing tensor 'layers.1.moe.w1' (did you mean "
            "'layers.1.moe.w2'?)");
}

TEST(CheckCheckpoint, MissingPrefersAnUnexpectedNameAndSkipsFarOnes) {
  CheckpointContents c;
  c.tensors["w1"] = Tensor(DType::F32, {1});
  c.tensors["w3"] = Tensor(DType::F32, {1});
  c.tensors["embedding"] = Tensor(DType::F32, {1});
  // 'w3' and 'w1' are equally near 'w2'; 'w3' is not expected, so more
  // likely the renamed one. Nothing is near 'router.gate'.
  EXPECT_EQ(checkError(c,
                       {{"w1", DType::F32, {1}},
                        {"w2", DType::F32, {1}},
                        {"router.gate", DType::F32, {1}}},
                       /*allowUnexpected=*/true),
            "model.ckpt: missing tensor 'w2' (did you mean 'w3'?)\n"
            "model.ckpt: missing tensor 'router.gate'");
}

TEST(CheckCheckpoint, Unexpected) {
  CheckpointContents c;
  c.tensors["foo"] = Tensor(DType::F32, {1});
  EXPECT_EQ(checkError(c, {}), "model.ckpt: unexpected tensor 'foo'");
  EXPECT_EQ(checkError(c, {}, /*allowUnexpected=*/true), "");
}

TEST(CheckCheckpoint, ReportsEveryProblemAtOnce) {
  EXPECT_EQ(checkError(someContents(),
                       {{"embed.tokens", DType::F32, {100, 32}},
                        {"layers.0.wq", DType::F32, {64, 64}},
                        {"layers.1.moe.w1", DType::F32, {4, 64, 256}}}),
            "model.ckpt: tensor 'embed.tokens' has dtype F64, the model "
            "expects F32\n"
            "model.ckpt: tensor 'embed.tokens' has shape [100, 64], the model "
            "expects [100, 32]\n"
            "model.ckpt: tensor 'layers.0.wq' has shape [64, 32], the model "
            "expects [64, 64]\n"
            "model.ckpt: missing tensor 'layers.1.moe.w1' (did you mean "
            "'layers.1.moe.w2'?)\n"
            "model.ckpt: unexpected tensor 'foo'\n"
            "model.ckpt: unexpected tensor 'layers.1.moe.w2'");
}
