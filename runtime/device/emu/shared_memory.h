//===- shared_memory.h - emu prelude: shared memory -------------*- C++ -*-===//
//
// One part of the emu prelude (see prelude.h): runtime/CMakeLists.txt
// joins the parts, in the order it lists them, into the one header that
// kernels are built with.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Shared memory
//===----------------------------------------------------------------------===//

namespace moec_emu {
namespace detail {

/// The dynamic shared memory of the running block.
inline SharedRegion &dynamicRegion() { return tls.block->dynamic; }

} // namespace detail
} // namespace moec_emu

#ifndef MOEC_EMU_TRACK_SHARED

namespace moec_emu {
namespace detail {
/// Fills a static shared array with the garbage pattern when the first
/// thread of a new block reaches its declaration, so that what a kernel
/// reads before writing never depends on earlier blocks or launches.
inline bool freshen(void *data, size_t bytes, unsigned long long &serial) {
  if (serial != tls.serial) {
    serial = tls.serial;
    std::memset(data, 0xff, bytes);
  }
  return true;
}
} // namespace detail
} // namespace moec_emu

// All fibers of a block run on one host thread, so a thread_local array is
// the block's own.
#define MOEC_SHARED(type, name, count)                                         \
  alignas(16) static thread_local type name[count];                            \
  static thread_local unsigned long long moec_shared_serial_##name;            \
  [[maybe_unused]] const bool moec_shared_fresh_##name =                       \
      ::moec_emu::detail::freshen(name, sizeof(name),                          \
                                  moec_shared_serial_##name)
#define MOEC_DYNAMIC_SHARED(type, name)                                        \
  type *name =                                                                 \
      reinterpret_cast<type *>(::moec_emu::detail::dynamicRegion().data)

#else // MOEC_EMU_TRACK_SHARED

namespace moec_emu {

template <typename T> class SharedPtr;
template <typename T> class SharedRef;

namespace detail {

inline std::string regionName(const SharedRegion &r) {
  return r.name ? format("shared array '%s'", r.name)
                : std::string("dynamic shared memory");
}

/// Forgets what an earlier block wrote to `r` (contents become garbage).
inline void refresh(SharedRegion &r) {
  if (r.serial == tls.serial)
    return;
  r.serial = tls.serial;
  r.escaped = false;
  std::memset(r.written, 0, (r.bytes + 63) / 64 * sizeof(uint64_t));
  std::memset(r.data, 0xff, r.bytes);
}

/// Checks one access of `size` bytes at byte `offset` of `r`; a read also
/// needs every byte written by some thread of the block since it started.
inline void sharedAccess(SharedRegion *r, ptrdiff_t offset, size_t size,
                         size_t align, bool read, bool write) {
  if (!r)
    fail("access through a null shared-memory pointer");
  refresh(*r);
  if (offset < 0 || static_cast<size_t>(offset) + size > r->bytes)
    fail("out-of-bounds access to %s: byte offset %td, %zu bytes, but it has "
         "%zu bytes",
         regionName(*r).c_str(), offset, size, r->bytes);
  if (static_cast<size_t>(offset) % align)
    fail("misaligned access to %s: byte offset %td for a %zu-byte aligned "
         "type",
         regionName(*r).c_str(), offset, align);
  if (r->escaped)
    return;
  size_t begin = static_cast<size_t>(offset), end = begin + size;
  if (read)
    for (size_t i = begin; i < end; ++i)
      if (!(r->written[i / 64] >> (i % 64) & 1))
        fail("read of uninitialized shared memory: %s, byte offset %zu "
             "(element at byte %td, %zu bytes) has not been written by any "
             "thread of this block",
             regionName(*r).c_str(), i, offset, size);
  if (write)
    for (size_t i = begin; i < end; ++i)
      r->written[i / 64] |= uint64_t(1) << (i % 64);
}

/// Per-field proxies for CUDA vector types (s[i].x = ...); none by default.
template <typename T> struct SharedFields {
  SharedFields(SharedRegion *, ptrdiff_t) {}
};

/// The value of an operand of a compound assignment (a proxy is loaded).
template <typename U> const U &operandValue(const U &u) { return u; }
template <typename U> std::remove_cv_t<U> operandValue(const SharedRef<U> &r) {
  return r.load();
}

} // namespace detail

/// A reference to an element of tracked shared memory. Every member works
/// only on a temporary (s[i] = v, float x = s[i], s[i] += v): a named proxy
/// (`auto v = s[i];`) would alias the memory instead of copying, so it does
/// not compile; spell the element type instead.
template <typename T> class SharedRef : public detail::SharedFields<T> {
  using V = std::remove_cv_t<T>;

public:
  SharedRef(detail::SharedRegion *r, ptrdiff_t offset)
      : detail::SharedFields<T>(r, offset), r(r), offset(offset) {}

  V load() const {
    detail::sharedAccess(r, offset, sizeof(V), alignof(V), true, false);
    V v;
    std::memcpy(static_cast<void *>(&v), r->data + offset, sizeof(V));
    return v;
  }
  void store(const V &v) const {
    static_assert(!std::is_const<T>::value, "store through a const element");
    detail::sharedAccess(r, offset, sizeof(V), alignof(V), false, true);
    std::memcpy(static_cast<void *>(r->data + offset), &v, sizeof(V));
  }

  operator V() const && { return load(); }
  /// Class elements (a bf16) convert on to what they convert to.
  template <typename U, std::enable_if_t<std::is_class<V>::value &&
                                             std::is_arithmetic<U>::value &&
                                             std::is_convertible<V, U>::value,
                                         int> = 0>
  operator U() const && {
    return static_cast<U>(load());
  }

  V operator=(const V &v) && {
    store(v);
    return v;
  }
  V operator=(const SharedRef &other) && {
    V v = other.load();
    store(v);
    return v;
  }
  template <typename U> V operator=(const SharedRef<U> &other) && {
    V v = static_cast<V>(other.load());
    store(v);
    return v;
  }

#define MOEC_EMU_COMPOUND(op)                                                  \
  template <typename U> V operator op(const U &u) && {                         \
    V v = load();                                                              \
    v op detail::operandValue(u);                                              \
    store(v);                                                                  \
    return v;                                                                  \
  }
  MOEC_EMU_COMPOUND(+=)
  MOEC_EMU_COMPOUND(-=)
  MOEC_EMU_COMPOUND(*=)
  MOEC_EMU_COMPOUND(/=)
  MOEC_EMU_COMPOUND(%=)
  MOEC_EMU_COMPOUND(&=)
  MOEC_EMU_COMPOUND(|=)
  MOEC_EMU_COMPOUND(^=)
  MOEC_EMU_COMPOUND(<<=)
  MOEC_EMU_COMPOUND(>>=)
#undef MOEC_EMU_COMPOUND

  V operator++() && {
    V v = load();
    ++v;
    store(v);
    return v;
  }
  V operator--() && {
    V v = load();
    --v;
    store(v);
    return v;
  }
  V operator++(int) && {
    V v = load();
    V next = v;
    ++next;
    store(next);
    return v;
  }
  V operator--(int) && {
    V v = load();
    V next = v;
    --next;
    store(next);
    return v;
  }

  SharedPtr<T> operator&() const { return SharedPtr<T>(r, offset); }

private:
  template <typename U> friend class SharedRef;
  detail::SharedRegion *r;
  ptrdiff_t offset;
};

/// A pointer into tracked shared memory (moec::sptr<T> in check mode):
/// checked on every access. Turning it into a raw pointer (passing it where
/// a T* is expected) stops checking its array for the rest of the block,
/// since writes through a raw pointer cannot be seen.
template <typename T> class SharedPtr {
public:
  SharedPtr() = default;
  SharedPtr(std::nullptr_t) {}
  SharedPtr(detail::SharedRegion *r, ptrdiff_t offset) : r(r), offset(offset) {}
  template <typename U, std::enable_if_t<std::is_convertible<U *, T *>::value &&
                                             sizeof(U) == sizeof(T),
                                         int> = 0>
  SharedPtr(const SharedPtr<U> &other) : r(other.r), offset(other.offset) {}

  SharedRef<T> operator*() const { return SharedRef<T>(r, offset); }
  template <typename I, detail::EnableIfIndex<I> = 0>
  SharedRef<T> operator[](I i) const {
    return SharedRef<T>(r, offset + static_cast<ptrdiff_t>(i) *
                                        static_cast<ptrdiff_t>(sizeof(T)));
  }
  T *operator->() const { return escape(); }
  operator T *() const { return escape(); }
  explicit operator bool() const { return r != nullptr; }

  template <typename I, detail::EnableIfIndex<I> = 0>
  SharedPtr operator+(I i) const {
    return SharedPtr(r, offset + static_cast<ptrdiff_t>(i) *
                                     static_cast<ptrdiff_t>(sizeof(T)));
  }
  template <typename I, detail::EnableIfIndex<I> = 0>
  friend SharedPtr operator+(I i, const SharedPtr &p) {
    return p + i;
  }
  template <typename I, detail::EnableIfIndex<I> = 0>
  SharedPtr operator-(I i) const {
    return *this + (-static_cast<ptrdiff_t>(i));
  }
  ptrdiff_t operator-(const SharedPtr &other) const {
    return (offset - other.offset) / static_cast<ptrdiff_t>(sizeof(T));
  }
  template <typename I, detail::EnableIfIndex<I> = 0>
  SharedPtr &operator+=(I i) {
    return *this = *this + i;
  }
  template <typename I, detail::EnableIfIndex<I> = 0>
  SharedPtr &operator-=(I i) {
    return *this = *this - i;
  }
  SharedPtr &operator++() { return *this += 1; }
  SharedPtr &operator--() { return *this -= 1; }
  SharedPtr operator++(int) {
    SharedPtr old = *this;
    *this += 1;
    return old;
  }
  SharedPtr operator--(int) {
    SharedPtr old = *this;
    *this -= 1;
    return old;
  }
  bool operator==(const SharedPtr &o) const {
    return r == o.r && offset == o.offset;
  }
  bool operator!=(const SharedPtr &o) const { return !(*this == o); }
  bool operator<(const SharedPtr &o) const { return offset < o.offset; }
  bool operator<=(const SharedPtr &o) const { return offset <= o.offset; }
  bool operator>(const SharedPtr &o) const { return offset > o.offset; }
  bool operator>=(const SharedPtr &o) const { return offset >= o.offset; }

  /// The same address as a pointer to U: a vector load of scalars stored
  /// one by one, whose alignment and written bits are checked as U's.
  template <typename U> SharedPtr<U> reinterpretAs() const {
    return SharedPtr<U>(r, offset);
  }

  /// The checked element address for atomics (they read and write).
  T *atomicTarget() const {
    detail::sharedAccess(r, offset, sizeof(T), alignof(T), true, true);
    return reinterpret_cast<T *>(r->data + offset);
  }

private:
  template <typename U> friend class SharedPtr;
  T *escape() const {
    if (!r)
      return nullptr;
    detail::refresh(*r);
    r->escaped = true;
    return reinterpret_cast<T *>(r->data + offset);
  }
  detail::SharedRegion *r = nullptr;
  ptrdiff_t offset = 0;
};

namespace detail {

/// Field proxies of CUDA vector types.
#define MOEC_EMU_FIELDS2(V, E)                                                 \
  template <> struct SharedFields<V> {                                         \
    SharedRef<E> x, y;                                                         \
    SharedFields(SharedRegion *r, ptrdiff_t o)                                 \
        : x(r, o), y(r, o + ptrdiff_t(sizeof(E))) {}                           \
  };
#define MOEC_EMU_FIELDS4(V, E)                                                 \
  template <> struct SharedFields<V> {                                         \
    SharedRef<E> x, y, z, w;                                                   \
    SharedFields(SharedRegion *r, ptrdiff_t o)                                 \
        : x(r, o), y(r, o + ptrdiff_t(sizeof(E))),                             \
          z(r, o + 2 * ptrdiff_t(sizeof(E))),                                  \
          w(r, o + 3 * ptrdiff_t(sizeof(E))) {}                                \
  };
MOEC_EMU_FIELDS2(float2, float)
MOEC_EMU_FIELDS4(float4, float)
MOEC_EMU_FIELDS2(int2, int)
MOEC_EMU_FIELDS4(int4, int)
MOEC_EMU_FIELDS2(uint2, unsigned)
MOEC_EMU_FIELDS4(uint4, unsigned)
MOEC_EMU_FIELDS2(double2, double)
#undef MOEC_EMU_FIELDS2
#undef MOEC_EMU_FIELDS4

/// A static shared array (MOEC_SHARED) with its written bits. It is a
/// SharedPtr to its own storage, so it converts to moec::sptr<T> even where
/// T is deduced; it resets itself the first time a new block touches it.
template <typename T, size_t N, typename Tag>
class SharedArray : public SharedPtr<T> {
  static_assert(std::is_trivially_copyable<T>::value,
                "shared-memory elements must be trivially copyable");
  static constexpr size_t kBytes = N * sizeof(T);

public:
  SharedArray()
      : SharedPtr<T>(&region, 0), region{storage, written, kBytes,
                                         0,       false,   Tag::str()} {}
  SharedArray(const SharedArray &) = delete;
  SharedArray &operator=(const SharedArray &) = delete;

private:
  SharedRegion region;
  uint64_t written[(kBytes + 63) / 64];
  alignas(16) unsigned char storage[kBytes];
};

} // namespace detail
} // namespace moec_emu

#define MOEC_SHARED(type, name, count)                                         \
  struct moec_shared_tag_##name {                                              \
    static constexpr const char *str() { return #name; }                       \
  };                                                                           \
  static thread_local ::moec_emu::detail::SharedArray<type, (count),           \
                                                      moec_shared_tag_##name>  \
      name
#define MOEC_DYNAMIC_SHARED(type, name)                                        \
  ::moec_emu::SharedPtr<type> name(&::moec_emu::detail::dynamicRegion(), 0)

#endif // MOEC_EMU_TRACK_SHARED

namespace moec {
/// A pointer to shared memory, for device functions that take a shared
/// array: T* on the GPU and in emu, a checked pointer when emu tracks
/// shared memory.
#ifdef MOEC_EMU_TRACK_SHARED
template <typename T> using sptr = ::moec_emu::SharedPtr<T>;
#else
template <typename T> using sptr = T *;
#endif
} // namespace moec
