//===- Tensor.cpp - host tensors ------------------------------------------===//

#include "moec/Tensor.h"
#include "moec/Error.h"

#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <sys/mman.h>

namespace moec {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::BF16:
  case DType::F16:
    return 2;
  }
  return 0;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  }
  return "?";
}

DType parseDType(const std::string &name) {
  for (DType d : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::I32,
                  DType::I64})
    if (name == dtypeName(d))
      return d;
  throw Error(fmt::format("unknown dtype '{}' (expected f32, f64, bf16, f16, "
                          "i32 or i64)",
                          name));
}

int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeString(const Shape &shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

void Tensor::Free::operator()(void *p) const {
  if (mappedBytes)
    ::munmap(p, mappedBytes);
  else
    std::free(p);
}

namespace {
/// Tensors this large take zeroed pages straight from the kernel: a fresh
/// anonymous mapping reads as zeros without a pass over it, and its pages
/// are first touched by whoever fills them (the initialisers in parallel),
/// in transparent huge pages where the system allows. Start-up of a 126 M
/// parameter model spent half its time in memset and its page faults.
constexpr size_t kMappedTensorBytes = size_t(1) << 20;

/// Under AddressSanitizer every tensor is a malloc'd block, which it
/// surrounds with poisoned bytes; it does not guard anonymous mappings.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kMapLargeTensors = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kMapLargeTensors = false;
#else
constexpr bool kMapLargeTensors = true;
#endif
#else
constexpr bool kMapLargeTensors = true;
#endif
} // namespace

Tensor Tensor::reshaped(Shape shape) const {
  if (numElements(shape) != numel())
    throw Error(fmt::format("cannot view a tensor of shape {} as {}: the "
                            "element counts differ",
                            shapeString(shape_), shapeString(shape)));
  Tensor view = *this;
  view.shape_ = std::move(shape);
  return view;
}

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_)
    if (d < 0)
      throw Error(fmt::format("negative dimension in tensor shape {}",
                              shapeString(shape_)));
  size_t bytes = std::max<size_t>(nbytes(), 1);
  auto outOfMemory = [&](size_t size) {
    return Error(fmt::format("out of host memory allocating {} bytes for a {} "
                             "tensor of shape {}",
                             size, dtypeName(dtype_), shapeString(shape_)));
  };
  if (kMapLargeTensors && bytes >= kMappedTensorBytes) {
    void *p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      throw outOfMemory(bytes);
    ::madvise(p, bytes, MADV_HUGEPAGE); // advice only: failure is harmless
    storage_ = std::shared_ptr<void>(p, Free{bytes});
    return;
  }
  size_t rounded = (bytes + 63) / 64 * 64;
  void *p = std::aligned_alloc(64, rounded);
  if (!p)
    throw outOfMemory(rounded);
  std::memset(p, 0, rounded);
  storage_ = std::shared_ptr<void>(p, Free{0});
}

namespace {
template <typename T> DType dtypeOf();
template <> DType dtypeOf<float>() { return DType::F32; }
template <> DType dtypeOf<double>() { return DType::F64; }
template <> DType dtypeOf<int32_t>() { return DType::I32; }
template <> DType dtypeOf<int64_t>() { return DType::I64; }
} // namespace

template <typename T>
Tensor Tensor::of(Shape shape, const std::vector<T> &values) {
  Tensor t(dtypeOf<T>(), std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.numel())
    throw Error(fmt::format("{} values for a tensor of shape {}",
                            values.size(), shapeString(t.shape())));
  std::memcpy(t.raw(), values.data(), t.nbytes());
  return t;
}

template Tensor Tensor::of<float>(Shape, const std::vector<float> &);
template Tensor Tensor::of<double>(Shape, const std::vector<double> &);
template Tensor Tensor::of<int32_t>(Shape, const std::vector<int32_t> &);
template Tensor Tensor::of<int64_t>(Shape, const std::vector<int64_t> &);

double Tensor::at(int64_t i) const {
  switch (dtype_) {
  case DType::F32:
    return data<float>()[i];
  case DType::F64:
    return data<double>()[i];
  case DType::I32:
    return data<int32_t>()[i];
  case DType::I64:
    return static_cast<double>(data<int64_t>()[i]);
  case DType::BF16:
    return bf16ToFloat(data<uint16_t>()[i]);
  case DType::F16:
    break;
  }
  throw Error(fmt::format("reading {} elements on the host is not supported",
                          dtypeName(dtype_)));
}

void Tensor::set(int64_t i, double value) {
  switch (dtype_) {
  case DType::F32:
    data<float>()[i] = static_cast<float>(value);
    return;
  case DType::F64:
    data<double>()[i] = value;
    return;
  case DType::I32:
    data<int32_t>()[i] = static_cast<int32_t>(value);
    return;
  case DType::I64:
    data<int64_t>()[i] = static_cast<int64_t>(value);
    return;
  case DType::BF16:
    data<uint16_t>()[i] = bf16FromFloat(static_cast<float>(value));
    return;
  case DType::F16:
    break;
  }
  throw Error(fmt::format("writing {} elements on the host is not supported",
                          dtypeName(dtype_)));
}

Tensor Tensor::to(DType dtype) const {
  Tensor t(dtype, shape_);
  for (int64_t i = 0; i < numel(); ++i)
    t.set(i, at(i));
  return t;
}

} // namespace moec
