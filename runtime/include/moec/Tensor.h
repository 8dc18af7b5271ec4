//===- Tensor.h - host tensors and views -----------------------*- C++ -*-===//

#ifndef MOEC_TENSOR_H
#define MOEC_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace moec {

enum class DType { F32, F64, BF16, F16, I32, I64 };

/// Bytes per element.
size_t dtypeSize(DType dtype);
/// "f32", "f64", "bf16", "f16", "i32", "i64".
const char *dtypeName(DType dtype);
/// The dtype called `name`; throws moec::Error for an unknown name.
DType parseDType(const std::string &name);

// Inline, so that the cpu device's conversion loops vectorize.

/// bfloat16 bits from a float, rounded to nearest even (NaN stays NaN).
inline uint16_t bf16FromFloat(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it quiet, keep the sign
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

/// The float a bfloat16 holds (exact).
inline float bf16ToFloat(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

using Shape = std::vector<int64_t>;

int64_t numElements(const Shape &shape);
/// "[2, 3, 4]".
std::string shapeString(const Shape &shape);

/// A non-owning view of a dense row-major tensor. `data == nullptr` marks an
/// absent optional operand or an output nobody reads.
struct TensorView {
  DType dtype = DType::F32;
  Shape shape;
  void *data = nullptr;

  bool present() const { return data != nullptr; }
  int64_t numel() const { return numElements(shape); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t dim(int64_t i) const { return shape[i < 0 ? shape.size() + i : i]; }
  size_t nbytes() const { return numel() * dtypeSize(dtype); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// An owning host tensor, 64-byte aligned.
class Tensor {
public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);
  /// A tensor of the given values (dtype follows T: float, double, int32_t,
  /// int64_t).
  template <typename T> static Tensor of(Shape shape, const std::vector<T> &values);

  DType dtype() const { return dtype_; }
  const Shape &shape() const { return shape_; }
  int64_t numel() const { return numElements(shape_); }
  size_t nbytes() const { return numel() * dtypeSize(dtype_); }
  bool empty() const { return !storage_; }

  void *raw() { return storage_.get(); }
  const void *raw() const { return storage_.get(); }
  template <typename T> T *data() { return static_cast<T *>(raw()); }
  template <typename T> const T *data() const {
    return static_cast<const T *>(raw());
  }
  TensorView view() const { return {dtype_, shape_, storage_.get()}; }

  /// Element i converted to double (any dtype).
  double at(int64_t i) const;
  /// Sets element i from a double: floats round to nearest (even),
  /// integers truncate.
  void set(int64_t i, double value);
  /// A copy in another dtype, element by element as at() and set() do.
  Tensor to(DType dtype) const;
  /// The same storage under another shape with as many elements (no copy:
  /// writes through either are seen by both); throws moec::Error otherwise.
  Tensor reshaped(Shape shape) const;

private:
  /// Releases storage: an anonymous mapping of mappedBytes, or (0) a
  /// malloc'd block.
  struct Free {
    size_t mappedBytes = 0;
    void operator()(void *p) const;
  };
  DType dtype_ = DType::F32;
  Shape shape_;
  std::shared_ptr<void> storage_;
};

} // namespace moec

#endif // MOEC_TENSOR_H
