//===- Checkpoint.cpp - reading and writing safetensors files -------------===//
//
// The layout is: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {string: string}}, then the data section; offsets are
// relative to its start. Loading checks every field before allocating, so
// malformed input costs at most the header size (capped at 100 MB). As the
// safetensors format requires, the tensors must cover the data section
// exactly, without holes or trailing bytes: a header length that is off by
// one is refused instead of loading every weight shifted by a byte. moec
// records the CRC-32 of the data section in the metadata and checks it on
// load, so a damaged file is named, never trained on.
//
//===----------------------------------------------------------------------===//

#include "moec/Checkpoint.h"
#include "moec/Error.h"
#include "moec/Files.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>
#include <zlib.h>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian and is copied as is");

using nlohmann::json;

namespace moec {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u * 1000 * 1000;
/// No real tensor has more dimensions; the cap bounds what a hostile header
/// can make the JSON parser allocate.
constexpr int kMaxArrayLength = 64;
constexpr const char *kMetadataKey = "__metadata__";
constexpr const char *kChecksumKey = "data_crc32";

const DType kAllDTypes[] = {DType::F32, DType::F64, DType::BF16,
                            DType::F16, DType::I32, DType::I64};

std::string errnoText() { return std::strerror(errno); }

/// A JSON value for a message, cut short: it may come from a huge header.
std::string brief(const json &value) {
  std::string text = value.dump();
  return text.size() <= 40 ? text : text.substr(0, 37) + "...";
}

/// A file descriptor open for reading, closed on scope exit.
class Fd {
public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  ~Fd() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  int get() const { return fd_; }

private:
  int fd_;
};

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

std::string headerText(const std::string &path,
                       const std::map<std::string, Tensor> &tensors,
                       const std::map<std::string, std::string> &metadata) {
  json header = json::object();
  if (!metadata.empty())
    header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (const auto &[name, tensor] : tensors) {
    if (name == kMetadataKey)
      throw Error(fmt::format("{}: cannot save a tensor named '{}': the name "
                              "is reserved for the file's metadata",
                              path, name));
    if (tensor.empty())
      throw Error(fmt::format("{}: cannot save tensor '{}': it has no storage "
                              "(a default-constructed Tensor)",
                              path, name));
    uint64_t end = offset + tensor.nbytes();
    header[name] = {{"dtype", safetensorsDTypeName(tensor.dtype())},
                    {"shape", tensor.shape()},
                    {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception &e) {
    throw Error(fmt::format("{}: a tensor name or metadata string is not "
                            "valid UTF-8: {}",
                            path, e.what()));
  }
  // Pad so that the data section starts 8-byte aligned, as the reference
  // implementation does.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

void readAt(int fd, void *data, size_t size, uint64_t offset,
            const std::string &path) {
  char *p = static_cast<char *>(data);
  while (size > 0) {
    ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw Error(fmt::format("{}: read failed: {}", path, errnoText()));
    if (n == 0)
      throw Error(
          fmt::format("{}: the file shrank while it was being read", path));
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

/// One tensor's header entry, validated.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

/// Parses the header, rejecting duplicate names and anything nested deeper
/// than a safetensors header can be while the parser runs.
json parseHeader(const std::string &path, const std::string &text) {
  std::set<std::string> names;
  std::string currentName;
  int arrayLength = 0;
  auto callback = [&](int depth, json::parse_event_t event, json &parsed) {
    if (event == json::parse_event_t::key && depth == 1) {
      currentName = parsed.get<std::string>();
      if (!names.insert(currentName).second)
        throw Error(
            fmt::format("{}: the header names '{}' twice", path, currentName));
    }
    auto where = [&] {
      return currentName.empty()
                 ? std::string("the header")
                 : fmt::format("'{}' in the header", currentName);
    };
    bool opens = event == json::parse_event_t::object_start ||
                 event == json::parse_event_t::array_start;
    if (opens && depth >= 3)
      throw Error(fmt::format("{}: {} has arrays or objects nested deeper "
                              "than safetensors allows",
                              path, where()));
    if (opens)
      arrayLength = 0;
    if (event == json::parse_event_t::value && depth == 3 &&
        ++arrayLength > kMaxArrayLength)
      throw Error(fmt::format("{}: {} has an array or object of more than {} "
                              "elements",
                              path, where(), kMaxArrayLength));
    return true;
  };
  try {
    return json::parse(text, callback);
  } catch (const json::exception &e) {
    // Syntax errors and out-of-range numbers alike; drop nlohmann's
    // "[json.exception.parse_error.101] " tag.
    std::string what = e.what();
    size_t tag = what.find("] ");
    if (tag != std::string::npos)
      what = what.substr(tag + 2);
    throw Error(
        fmt::format("{}: the header is not valid JSON: {}", path, what));
  }
}

DType parseSafetensorsDType(const std::string &path, const std::string &name,
                            const std::string &text) {
  for (DType d : kAllDTypes)
    if (text == safetensorsDTypeName(d))
      return d;
  throw Error(fmt::format("{}: tensor '{}' has dtype '{}', which moec does not "
                          "support (expected F32, F64, BF16, F16, I32 or I64)",
                          path, name, text));
}

/// Reads a JSON array of non-negative integers that fit in int64.
std::vector<uint64_t> parseCounts(const std::string &path,
                                  const std::string &name, const json &entry,
                                  const char *field, const char *expected) {
  auto it = entry.find(field);
  if (it == entry.end())
    throw Error(fmt::format("{}: tensor '{}' has no '{}' field (expected {})",
                            path, name, field, expected));
  if (!it->is_array())
    throw Error(fmt::format("{}: tensor '{}': '{}' is {}, expected {}", path,
                            name, field, brief(*it), expected));
  std::vector<uint64_t> counts;
  for (size_t i = 0; i < it->size(); ++i) {
    const json &v = (*it)[i];
    if (!v.is_number_unsigned() &&
        !(v.is_number_integer() && v.get<int64_t>() >= 0))
      throw Error(fmt::format("{}: tensor '{}': {}[{}] is {}, expected a "
                              "non-negative integer",
                              path, name, field, i, brief(v)));
    uint64_t n = v.get<uint64_t>();
    if (n > static_cast<uint64_t>(INT64_MAX))
      throw Error(fmt::format("{}: tensor '{}': {}[{}] is {}, which is too "
                              "large",
                              path, name, field, i, n));
    counts.push_back(n);
  }
  return counts;
}

Entry parseEntry(const std::string &path, const std::string &name,
                 const json &entry) {
  if (!entry.is_object())
    throw Error(fmt::format("{}: tensor '{}' is described by {}, expected an "
                            "object with dtype, shape and data_offsets",
                            path, name, brief(entry)));
  Entry result;
  result.name = name;

  auto dtype = entry.find("dtype");
  if (dtype == entry.end())
    throw Error(
        fmt::format("{}: tensor '{}' has no 'dtype' field", path, name));
  if (!dtype->is_string())
    throw Error(fmt::format("{}: tensor '{}': 'dtype' is {}, expected a "
                            "string such as \"F32\"",
                            path, name, brief(*dtype)));
  result.dtype = parseSafetensorsDType(path, name, dtype->get<std::string>());

  // Element and byte counts are checked for overflow before use: a hostile
  // shape must not wrap around to match its data_offsets.
  uint64_t numel = 1;
  bool overflow = false;
  for (uint64_t d : parseCounts(path, name, entry, "shape",
                                "an array of non-negative integers")) {
    result.shape.push_back(static_cast<int64_t>(d));
    overflow |= __builtin_mul_overflow(numel, d, &numel);
  }
  uint64_t bytes = 0;
  overflow |= __builtin_mul_overflow(numel, dtypeSize(result.dtype), &bytes);
  overflow |= bytes > static_cast<uint64_t>(INT64_MAX);

  std::vector<uint64_t> offsets =
      parseCounts(path, name, entry, "data_offsets",
                  "an array [begin, end] of two non-negative integers");
  if (offsets.size() != 2)
    throw Error(fmt::format("{}: tensor '{}': 'data_offsets' has {} elements, "
                            "expected two, [begin, end]",
                            path, name, offsets.size()));
  result.begin = offsets[0];
  result.end = offsets[1];
  if (result.begin > result.end)
    throw Error(fmt::format("{}: tensor '{}': data_offsets [{}, {}] ends "
                            "before it begins",
                            path, name, result.begin, result.end));
  uint64_t span = result.end - result.begin;
  if (overflow || bytes != span)
    throw Error(fmt::format(
        "{}: tensor '{}': shape {} of {} needs {} bytes but data_offsets "
        "[{}, {}] span {} bytes",
        path, name, shapeString(result.shape),
        safetensorsDTypeName(result.dtype),
        overflow ? std::string("more than 2^63") : std::to_string(bytes),
        result.begin, result.end, span));
  return result;
}

std::map<std::string, std::string> parseMetadata(const std::string &path,
                                                 const json &value) {
  if (!value.is_object())
    throw Error(fmt::format("{}: '{}' is a JSON {}, expected an object mapping "
                            "strings to strings",
                            path, kMetadataKey, value.type_name()));
  std::map<std::string, std::string> metadata;
  for (const auto &[key, v] : value.items()) {
    if (!v.is_string())
      throw Error(fmt::format("{}: {} '{}' is {} ({}), expected a string "
                              "(safetensors metadata values are strings)",
                              path, kMetadataKey, key, brief(v),
                              v.type_name()));
    metadata[key] = v.get<std::string>();
  }
  return metadata;
}

/// Checks that the entries, sorted by offset, tile the data section
/// exactly: inside it, without overlaps, holes or trailing bytes.
void checkLayout(const std::string &path, std::vector<Entry> &entries,
                 uint64_t dataSize) {
  std::sort(entries.begin(), entries.end(), [](const Entry &a, const Entry &b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  const Entry *previous = nullptr;
  uint64_t covered = 0;
  for (const Entry &e : entries) {
    if (e.end > dataSize)
      throw Error(fmt::format("{}: truncated: tensor '{}' needs bytes [{}, {}) "
                              "of the data section but it holds only {} bytes",
                              path, e.name, e.begin, e.end, dataSize));
    if (e.begin == e.end)
      continue; // Empty tensors occupy no bytes, so overlap nothing.
    if (previous && e.begin < previous->end)
      throw Error(fmt::format("{}: tensors '{}' (bytes [{}, {})) and '{}' "
                              "(bytes [{}, {})) overlap in the data section",
                              path, previous->name, previous->begin,
                              previous->end, e.name, e.begin, e.end));
    if (e.begin != covered)
      throw Error(fmt::format("{}: bytes [{}, {}) of the data section belong "
                              "to no tensor (before '{}'); the header length "
                              "or offsets are wrong",
                              path, covered, e.begin, e.name));
    covered = e.end;
    previous = &e;
  }
  if (covered != dataSize)
    throw Error(fmt::format("{}: the tensors cover {} bytes of the data "
                            "section but it holds {}; the header length or "
                            "offsets are wrong, or bytes were appended",
                            path, covered, dataSize));
}

/// The CRC-32 of `size` bytes, continuing `crc`.
uint32_t crc32Of(uint32_t crc, const void *data, size_t size) {
  const Bytef *p = static_cast<const Bytef *>(data);
  return static_cast<uint32_t>(crc32_z(crc, p, size));
}

std::string checksumText(uint32_t crc) { return fmt::format("{:08x}", crc); }

} // namespace

const char *safetensorsDTypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "F32";
  case DType::F64:
    return "F64";
  case DType::BF16:
    return "BF16";
  case DType::F16:
    return "F16";
  case DType::I32:
    return "I32";
  case DType::I64:
    return "I64";
  }
  return "?";
}

void saveCheckpoint(const std::string &path,
                    const std::map<std::string, Tensor> &tensors,
                    const std::map<std::string, std::string> &metadata) {
  uint32_t crc = crc32Of(0, nullptr, 0);
  for (const auto &[name, tensor] : tensors)
    if (!tensor.empty())
      crc = crc32Of(crc, tensor.raw(), tensor.nbytes());
  std::map<std::string, std::string> withChecksum = metadata;
  withChecksum[kChecksumKey] = checksumText(crc);
  std::string header = headerText(path, tensors, withChecksum);

  uint64_t length = header.size();
  std::vector<ByteChunk> chunks = {{&length, 8},
                                           {header.data(), header.size()}};
  for (const auto &[name, tensor] : tensors)
    chunks.push_back({tensor.raw(), tensor.nbytes()});
  writeFile(path, chunks);
}

CheckpointContents loadCheckpoint(const std::string &path) {
  // Non-blocking, so that a FIFO is refused as not a regular file
  // instead of waiting for a writer.
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0)
    throw Error(
        fmt::format("{}: cannot open the checkpoint: {}", path, errnoText()));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    throw Error(
        fmt::format("{}: cannot stat the checkpoint: {}", path, errnoText()));
  if (!S_ISREG(st.st_mode))
    throw Error(fmt::format("{}: not a regular file", path));
  uint64_t fileSize = static_cast<uint64_t>(st.st_size);

  if (fileSize < 8)
    throw Error(fmt::format("{}: truncated: the file holds {} bytes, fewer "
                            "than the 8-byte header length that starts a "
                            "safetensors file",
                            path, fileSize));
  uint64_t headerSize;
  readAt(fd.get(), &headerSize, 8, 0, path);
  if (headerSize > kMaxHeaderBytes)
    throw Error(fmt::format("{}: the header length is {} bytes, more than the "
                            "100 MB limit; the file is damaged or not a "
                            "safetensors file",
                            path, headerSize));
  if (headerSize > fileSize - 8)
    throw Error(fmt::format("{}: truncated: the header needs {} bytes but the "
                            "file holds only {} after the 8-byte length",
                            path, headerSize, fileSize - 8));
  std::string text(headerSize, '\0');
  readAt(fd.get(), text.data(), text.size(), 8, path);

  json header = parseHeader(path, text);
  if (!header.is_object())
    throw Error(fmt::format("{}: the header is a JSON {}, expected an object",
                            path, header.type_name()));

  CheckpointContents contents;
  std::vector<Entry> entries;
  for (const auto &[name, value] : header.items()) {
    if (name == kMetadataKey)
      contents.metadata = parseMetadata(path, value);
    else
      entries.push_back(parseEntry(path, name, value));
  }
  uint64_t dataStart = 8 + headerSize;
  checkLayout(path, entries, fileSize - dataStart);

  // In offset order, so the checksum runs over the data section as stored.
  uint32_t crc = crc32Of(0, nullptr, 0);
  for (const Entry &e : entries) {
    Tensor tensor(e.dtype, e.shape);
    readAt(fd.get(), tensor.raw(), tensor.nbytes(), dataStart + e.begin, path);
    crc = crc32Of(crc, tensor.raw(), tensor.nbytes());
    contents.tensors.emplace(e.name, std::move(tensor));
  }
  if (auto it = contents.metadata.find(kChecksumKey);
      it != contents.metadata.end()) {
    if (it->second != checksumText(crc))
      throw Error(fmt::format("{}: the data section does not match the "
                              "checksum in its metadata ('{}' is {}, the data "
                              "has {}): the file is damaged",
                              path, kChecksumKey, it->second,
                              checksumText(crc)));
    contents.metadata.erase(it);
  }
  return contents;
}

} // namespace moec
