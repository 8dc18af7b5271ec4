//===- execution.h - emu prelude: execution state ---------------*- C++ -*-===//
//
// One part of the emu prelude (see prelude.h): runtime/CMakeLists.txt
// joins the parts, in the order it lists them, into the one header that
// kernels are built with.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Execution state: launch, block, thread
//===----------------------------------------------------------------------===//

namespace moec_emu {
namespace detail {

constexpr unsigned kWarpSize = 32;
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned long long kMaxSharedBytes = 227ull * 1024; // sm_90 opt-in
constexpr unsigned kMaxBuffers = MOEC_EMU_MAX_BUFFERS;
constexpr size_t kDefaultStackBytes = 64 * 1024;
constexpr unsigned kMaxHostThreads = 256;

/// Thrown through kernel frames to stop a thread of a failed block.
struct AbortBlock {};

/// Index operands of the pointer classes: any integer type, so that they
/// beat the built-in operators reached through the pointer conversions.
template <typename I>
using EnableIfIndex = std::enable_if_t<std::is_integral<I>::value, int>;

/// Why a thread is not running.
enum class Wait : unsigned char { Ready, Barrier, Warp, ActiveMask, Done };

/// What a warp collective does; lanes of one collective must agree on it.
enum Op : unsigned {
  OpSync = 1,
  OpShfl,
  OpBallot,
  OpAny,
  OpAll,
  OpReduceAdd,
  OpReduceMin,
  OpReduceMax,
  OpReduceAnd,
  OpReduceOr,
  OpReduceXor,
  OpMmaBf16,
  OpMmaTf32,
  OpLdmatrix,
};

/// A lane's part in a warp collective; lives until the collective completes.
struct LaneSlot {
  unsigned op;           // Op | shuffle mode << 8 | operand bytes << 16
  uint64_t value;        // operand (shuffle value, predicate, reduce operand)
  int src;               // shuffles: the lane read after PTX clamping
  uint64_t result;       // filled in by the lane that completes the collective
  const char *what;      // the intrinsic's name, for messages
  const uint32_t *a, *b; // mma fragments
  const float *c;
  float *d;
  uint32_t row[4];       // ldmatrix: the 16 bytes at this lane's row address
  uint32_t *frag;        // ldmatrix: the lane's four destination registers
};

/// One CUDA thread: a fiber plus the state the scheduler keeps for it.
struct Thread {
  uint3 idx;
  unsigned linear, warp, lane;
  Wait wait;
  bool started;
  boost::context::fiber fiber; // resumed by the scheduler
  boost::context::fiber sink;  // resumed by the thread to yield
  const void *stackBottom;     // for AddressSanitizer
  size_t stackBytes;
  void *fakeStack;
  const char *barrierFile;
  int barrierLine, barrierKind, barrierPred, barrierResult;
  LaneSlot slot;
};

/// A warp collective some lanes have reached and others not yet.
struct Group {
  unsigned mask, arrived, op;
  const char *what;
};

/// The collectives pending in one warp and the lanes that have exited.
struct WarpState {
  std::vector<Group> groups;
  unsigned exited;
};

/// A buffer of the launch as the bounds checks see it.
struct BufferInfo {
  const unsigned char *base;
  unsigned long long bytes;
  int index;
};

/// A shared-memory array or the dynamic shared memory, tracked per byte in
/// check mode.
struct SharedRegion {
  unsigned char *data;
  uint64_t *written;
  size_t bytes;
  unsigned long long serial; // the block it was reset for
  bool escaped;              // a raw pointer to it was taken: stop checking
  const char *name;          // null: the dynamic shared memory
};

class StackPool;

/// What every block of a launch shares.
struct Launch {
  const char *kernel;
  void (*invoke)(void (*fn)(), const void *params);
  void (*fn)();
  const void *params;
  dim3 grid, block;
  unsigned nThreads;
  unsigned long long nBlocks;
  size_t sharedBytes, stackBytes;
  BufferInfo buffers[kMaxBuffers];
  std::atomic<unsigned long long> nextBlock{0};
  std::atomic<unsigned long long> stopAt{~0ull};
  std::mutex errorMutex;
  unsigned long long errorBlock = ~0ull;
  std::string error;
};

struct Block;

/// The host thread's view: which block runs on it and which fiber is on.
struct Tls {
  Thread *thread;
  Block *block;
  unsigned long long serial; // counts blocks run by this host thread
};
inline thread_local Tls tls;

/// Formats like snprintf into a std::string.
inline std::string vformat(const char *fmt, va_list args) {
  char small[512];
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(small, sizeof small, fmt, copy);
  va_end(copy);
  if (n < 0)
    return fmt;
  if (static_cast<size_t>(n) < sizeof small)
    return std::string(small, static_cast<size_t>(n));
  std::string big(static_cast<size_t>(n) + 1, '\0');
  std::vsnprintf(&big[0], big.size(), fmt, args);
  big.resize(static_cast<size_t>(n));
  return big;
}

inline std::string format(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
inline std::string format(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string s = vformat(fmt, args);
  va_end(args);
  return s;
}

inline std::string describe(const uint3 &v) {
  return format("(%u,%u,%u)", v.x, v.y, v.z);
}

/// Stops the calling CUDA thread with an error for its block (the first
/// error of a block wins). Outside a launch it prints and aborts.
[[noreturn]] inline void fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

} // namespace detail
} // namespace moec_emu
