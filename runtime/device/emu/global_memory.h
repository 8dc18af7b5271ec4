//===- global_memory.h - emu prelude: global memory -------------*- C++ -*-===//
//
// One part of the emu prelude (see prelude.h): runtime/CMakeLists.txt
// joins the parts, in the order it lists them, into the one header that
// kernels are built with.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Global memory: moec::gptr and bufferArg
//===----------------------------------------------------------------------===//

namespace moec {

#ifndef MOEC_EMU_CHECK

/// A pointer to global memory.
template <typename T> using gptr = T *;

/// Buffer `i` of the launch as a typed pointer.
template <typename T, typename Params>
inline gptr<T> bufferArg(const Params &p, int i) {
  return static_cast<T *>(p.buffers[i]);
}

#else // MOEC_EMU_CHECK

/// A pointer to global memory that knows the buffer it points into and
/// checks every access against it (null, bounds, alignment). Arithmetic is
/// unchecked, as pointers one past the end are common. Built from a raw
/// pointer it checks nothing but null; it converts to a raw pointer.
template <typename T> class gptr {
public:
  gptr() = default;
  gptr(T *p) : p(p) {}
  gptr(T *p, const ::moec_emu::detail::BufferInfo *buffer)
      : p(p), buffer(buffer) {}
  template <typename U,
            std::enable_if_t<std::is_convertible<U *, T *>::value, int> = 0>
  gptr(const gptr<U> &other) : p(other.p), buffer(other.buffer) {}

  operator T *() const { return p; }
  T &operator*() const { return *check(0); }
  T *operator->() const { return check(0); }
  template <typename I, ::moec_emu::detail::EnableIfIndex<I> = 0>
  T &operator[](I i) const {
    return *check(static_cast<ptrdiff_t>(i));
  }

  template <typename I, ::moec_emu::detail::EnableIfIndex<I> = 0>
  gptr operator+(I i) const {
    return gptr(p + i, buffer);
  }
  template <typename I, ::moec_emu::detail::EnableIfIndex<I> = 0>
  friend gptr operator+(I i, const gptr &g) {
    return g + i;
  }
  template <typename I, ::moec_emu::detail::EnableIfIndex<I> = 0>
  gptr operator-(I i) const {
    return gptr(p - i, buffer);
  }
  ptrdiff_t operator-(const gptr &other) const { return p - other.p; }
  template <typename I, ::moec_emu::detail::EnableIfIndex<I> = 0>
  gptr &operator+=(I i) {
    p += i;
    return *this;
  }
  template <typename I, ::moec_emu::detail::EnableIfIndex<I> = 0>
  gptr &operator-=(I i) {
    p -= i;
    return *this;
  }
  gptr &operator++() {
    ++p;
    return *this;
  }
  gptr &operator--() {
    --p;
    return *this;
  }
  gptr operator++(int) {
    gptr old = *this;
    ++p;
    return old;
  }
  gptr operator--(int) {
    gptr old = *this;
    --p;
    return old;
  }
  bool operator==(const gptr &o) const { return p == o.p; }
  bool operator!=(const gptr &o) const { return p != o.p; }
  bool operator<(const gptr &o) const { return p < o.p; }
  bool operator<=(const gptr &o) const { return p <= o.p; }
  bool operator>(const gptr &o) const { return p > o.p; }
  bool operator>=(const gptr &o) const { return p >= o.p; }
  bool operator==(std::nullptr_t) const { return p == nullptr; }
  bool operator!=(std::nullptr_t) const { return p != nullptr; }

  /// The address of element `i` after checking an access to it.
  T *check(ptrdiff_t i) const;

private:
  template <typename U> friend class gptr;
  T *p = nullptr;
  const ::moec_emu::detail::BufferInfo *buffer = nullptr;
};

#endif // MOEC_EMU_CHECK

} // namespace moec

#ifdef MOEC_EMU_CHECK
namespace moec_emu {
namespace detail {

template <typename T> const char *typeName() {
  if (std::is_same<std::remove_cv_t<T>, float>::value)
    return "float";
  if (std::is_same<std::remove_cv_t<T>, double>::value)
    return "double";
  if (std::is_same<std::remove_cv_t<T>, int>::value)
    return "int";
  if (std::is_same<std::remove_cv_t<T>, unsigned>::value)
    return "unsigned";
  return "element";
}

} // namespace detail
} // namespace moec_emu

template <typename T> T *moec::gptr<T>::check(ptrdiff_t i) const {
  using namespace ::moec_emu::detail;
  T *q = p + i;
  if (!p) {
    if (buffer)
      fail("access to buffer %d, which is null (the launch passes no buffer "
           "there)",
           buffer->index);
    fail("access through a null global pointer");
  }
  if (buffer && buffer->bytes) {
    ptrdiff_t offset =
        reinterpret_cast<const unsigned char *>(q) - buffer->base;
    if (offset < 0 ||
        static_cast<unsigned long long>(offset) + sizeof(T) > buffer->bytes)
      fail("out-of-bounds access to buffer %d: byte offset %td (%zu-byte %s "
           "at index %td from the buffer start), but the buffer has %llu "
           "bytes",
           buffer->index, offset, sizeof(T), typeName<T>(),
           offset / static_cast<ptrdiff_t>(sizeof(T)), buffer->bytes);
  }
  if (reinterpret_cast<uintptr_t>(q) % alignof(T))
    fail("misaligned access to global memory%s: address %p for a %zu-byte "
         "aligned type",
         buffer ? format(" (buffer %d)", buffer->index).c_str() : "",
         static_cast<const void *>(q), alignof(T));
  return q;
}

namespace moec {

/// Buffer `i` of the launch as a bounds-checked pointer.
template <typename T, typename Params>
inline gptr<T> bufferArg(const Params &p, int i) {
  using namespace ::moec_emu::detail;
  if (i < 0 || i >= static_cast<int>(kMaxBuffers))
    fail("bufferArg(%d): there are %u buffer slots", i, kMaxBuffers);
  return gptr<T>(static_cast<T *>(p.buffers[i]),
                 &tls.block->launch->buffers[i]);
}

} // namespace moec
#endif // MOEC_EMU_CHECK

namespace moec_emu {

namespace detail {

/// Fails unless `p`, an address in `space`, is `bytes`-aligned, as the
/// GPU's `what` (a vector access or copy the emu does piece by piece) needs
/// it.
inline void checkAligned(const void *p, unsigned bytes, const char *space,
                         const char *what) {
  if (reinterpret_cast<uintptr_t>(p) % bytes)
    fail("%s: %s address %p is not %u-byte aligned", what, space, p, bytes);
}

} // namespace detail

inline void checkGlobalAligned(const void *p, unsigned bytes,
                               const char *what) {
  detail::checkAligned(p, bytes, "global", what);
}

} // namespace moec_emu
