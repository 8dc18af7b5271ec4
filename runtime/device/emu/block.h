//===- block.h - emu prelude: a block and its scheduler ---------*- C++ -*-===//
//
// One part of the emu prelude (see prelude.h): runtime/CMakeLists.txt
// joins the parts, in the order it lists them, into the one header that
// kernels are built with.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// A block and its scheduler
//===----------------------------------------------------------------------===//

/// One thread block being run by one host thread. The scheduler resumes
/// ready fibers in FIFO order until every thread has exited or waits; then
/// it resolves __activemask(), reports collectives that cannot complete and
/// releases or rejects the barrier. Scheduling is deterministic.
struct Block {
  Launch *launch;
  uint3 idx;
  dim3 dim, grid;
  unsigned nThreads;
  unsigned long long linear;
  StackPool stacks; // outlives the fibers, which return their stacks to it
  std::vector<Thread> threads;
  std::vector<unsigned> ready; // ring buffer of thread indices
  unsigned readyHead = 0, readyCount = 0;
  std::vector<WarpState> warps;
  unsigned live = 0;
  bool failed = false, aborting = false;
  std::string error;
  std::vector<unsigned char> dynamicStorage;
  std::vector<uint64_t> dynamicWritten;
  SharedRegion dynamic;
  const void *hostStackBottom = nullptr; // for AddressSanitizer
  size_t hostStackBytes = 0;

  Block(Launch &launch)
      : launch(&launch), dim(launch.block), grid(launch.grid),
        nThreads(launch.nThreads), stacks(launch.stackBytes, launch.nThreads),
        threads(launch.nThreads), ready(launch.nThreads),
        warps((launch.nThreads + kWarpSize - 1) / kWarpSize),
        dynamicStorage(launch.sharedBytes + 128),
        dynamicWritten((launch.sharedBytes + 63) / 64) {
    for (unsigned i = 0; i < nThreads; ++i) {
      Thread &t = threads[i];
      t.linear = i;
      t.idx = uint3{i % dim.x, (i / dim.x) % dim.y, i / (dim.x * dim.y)};
      t.warp = i / kWarpSize;
      t.lane = i % kWarpSize;
    }
    uintptr_t base = reinterpret_cast<uintptr_t>(dynamicStorage.data());
    dynamic = SharedRegion{
        reinterpret_cast<unsigned char *>((base + 127) & ~uintptr_t(127)),
        dynamicWritten.data(),
        launch.sharedBytes,
        0,
        false,
        nullptr};
  }

  void push(unsigned i) {
    ready[(readyHead + readyCount) % nThreads] = i;
    ++readyCount;
  }
  unsigned pop() {
    unsigned i = ready[readyHead];
    readyHead = (readyHead + 1) % nThreads;
    --readyCount;
    return i;
  }
  Thread &laneThread(unsigned warp, unsigned lane) {
    return threads[warp * kWarpSize + lane];
  }
  /// Lanes of `warp` that exist (the last warp may be partial).
  unsigned existingLanes(unsigned warp) const {
    unsigned n = std::min(kWarpSize, nThreads - warp * kWarpSize);
    return n == 32 ? ~0u : (1u << n) - 1;
  }

  std::string where(const Thread *t) const {
    std::string s =
        format("%s: block %s", launch->kernel, describe(idx).c_str());
    if (t)
      s += format(", thread %s", describe(t->idx).c_str());
    return s;
  }
  /// Records the block's first error; the scheduler stops the block.
  void setError(const Thread *t, const std::string &message) {
    if (failed)
      return;
    failed = true;
    error = where(t) + ": " + message;
  }

  void run(unsigned long long blockLinear);
  void resume(Thread &t);
  bool resolveStall();
  std::string doing(const Thread &t) const;
  void abortAll();
};

inline const uint3 &currentBlockIdx() { return tls.block->idx; }
inline const dim3 &currentBlockDim() { return tls.block->dim; }
inline const dim3 &currentGridDim() { return tls.block->grid; }

[[noreturn]] inline void fail(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string message = vformat(fmt, args);
  va_end(args);
  if (!tls.block || !tls.thread) {
    std::fprintf(stderr, "moec emu: %s\n", message.c_str());
    std::abort();
  }
  tls.block->setError(tls.thread, message);
  throw AbortBlock{};
}

#ifdef MOEC_EMU_ASAN
inline void startSwitch(void **fakeStack, const void *bottom, size_t bytes) {
  __sanitizer_start_switch_fiber(fakeStack, bottom, bytes);
}
inline void finishSwitch(void *fakeStack, const void **bottom, size_t *bytes) {
  __sanitizer_finish_switch_fiber(fakeStack, bottom, bytes);
}
#else
inline void startSwitch(void **, const void *, size_t) {}
inline void finishSwitch(void *, const void **, size_t *) {}
#endif

/// Suspends the calling thread until the scheduler resumes it.
inline void suspend(Thread &t, Wait wait) {
  t.wait = wait;
  Block &b = *tls.block;
  startSwitch(&t.fakeStack, b.hostStackBottom, b.hostStackBytes);
  t.sink = std::move(t.sink).resume();
  finishSwitch(t.fakeStack, &b.hostStackBottom, &b.hostStackBytes);
  if (b.aborting)
    throw AbortBlock{};
}

inline boost::context::fiber threadMain(Thread &t,
                                        boost::context::fiber &&sink) {
  t.sink = std::move(sink);
  Block &b = *tls.block;
  finishSwitch(nullptr, &b.hostStackBottom, &b.hostStackBytes);
  if (!b.aborting) {
    try {
      b.launch->invoke(b.launch->fn, b.launch->params);
    } catch (const AbortBlock &) {
    } catch (const boost::context::detail::forced_unwind &) {
      throw;
    } catch (const std::exception &e) {
      b.setError(&t, format("uncaught exception: %s", e.what()));
    } catch (...) {
      b.setError(&t, "uncaught exception");
    }
  }
  t.wait = Wait::Done;
  --b.live;
  b.warps[t.warp].exited |= 1u << t.lane;
  startSwitch(nullptr, b.hostStackBottom, b.hostStackBytes);
  return std::move(t.sink);
}

inline void Block::resume(Thread &t) {
  tls.thread = &t;
  if (!t.started) {
    t.started = true;
    Thread *self = &t;
    t.fiber =
        boost::context::fiber(std::allocator_arg, PooledStack{&stacks, &t},
                              [self](boost::context::fiber &&sink) {
                                return threadMain(*self, std::move(sink));
                              });
  }
  t.wait = Wait::Ready;
  void *fakeStack = nullptr;
  startSwitch(&fakeStack, t.stackBottom, t.stackBytes);
  t.fiber = std::move(t.fiber).resume();
  finishSwitch(fakeStack, nullptr, nullptr);
  tls.thread = nullptr;
}

inline void Block::run(unsigned long long blockLinear) {
  linear = blockLinear;
  idx = uint3{static_cast<unsigned>(blockLinear % grid.x),
              static_cast<unsigned>((blockLinear / grid.x) % grid.y),
              static_cast<unsigned>(blockLinear / (1ull * grid.x * grid.y))};
  failed = aborting = false;
  error.clear();
  live = nThreads;
  readyHead = readyCount = 0;
  for (WarpState &w : warps) {
    w.groups.clear();
    w.exited = 0;
  }
  dynamic.serial = ++tls.serial;
  dynamic.escaped = false;
  // Shared memory starts with garbage on a GPU; here with a fixed pattern
  // (NaN as float, -1 as int) so that results never depend on earlier
  // blocks.
  if (dynamic.bytes) {
    std::memset(dynamic.data, 0xff, dynamic.bytes);
    std::memset(dynamic.written, 0, dynamicWritten.size() * sizeof(uint64_t));
  }
  for (unsigned i = 0; i < nThreads; ++i) {
    threads[i].wait = Wait::Ready;
    threads[i].started = false;
    push(i);
  }
  for (;;) {
    while (readyCount && !failed)
      resume(threads[pop()]);
    if (failed || live == 0 || !resolveStall())
      break;
  }
  if (failed)
    abortAll();
}

/// Resumes every suspended thread of a failed block so that it unwinds.
inline void Block::abortAll() {
  aborting = true;
  for (Thread &t : threads)
    if (t.started && t.fiber)
      resume(t);
}

inline std::string Block::doing(const Thread &t) const {
  switch (t.wait) {
  case Wait::Done:
    return "has exited";
  case Wait::Barrier:
    return format("waits at __syncthreads() (%s:%d)", t.barrierFile,
                  t.barrierLine);
  case Wait::Warp:
    return format("waits in %s", t.slot.what);
  case Wait::ActiveMask:
    return "waits in __activemask()";
  case Wait::Ready:
    break;
  }
  return "is runnable";
}

inline bool Block::resolveStall() {
  // __activemask(): the lanes of a warp waiting there converge.
  bool released = false;
  for (unsigned w = 0; w < warps.size(); ++w) {
    unsigned mask = 0;
    for (unsigned l = 0; l < kWarpSize && w * kWarpSize + l < nThreads; ++l)
      if (laneThread(w, l).wait == Wait::ActiveMask)
        mask |= 1u << l;
    for (unsigned l = 0; l < kWarpSize; ++l) {
      if (mask >> l & 1) {
        laneThread(w, l).slot.result = mask;
        laneThread(w, l).wait = Wait::Ready;
        push(w * kWarpSize + l);
        released = true;
      }
    }
  }
  if (released)
    return true;

  // A warp collective still waiting now can never complete.
  for (unsigned w = 0; w < warps.size(); ++w) {
    for (const Group &g : warps[w].groups) {
      unsigned missing = g.mask & ~g.arrived;
      unsigned lane = static_cast<unsigned>(__builtin_ctz(missing));
      unsigned first = static_cast<unsigned>(__builtin_ctz(g.arrived));
      setError(&laneThread(w, first),
               format("%s with mask 0x%08x never completes: lane %u (thread "
                      "%s) %s; every lane in the mask must call it",
                      g.what, g.mask, lane,
                      describe(laneThread(w, lane).idx).c_str(),
                      doing(laneThread(w, lane)).c_str()));
      return false;
    }
  }

  // __syncthreads(): every thread of the block waits at the same one.
  const Thread *first = nullptr;
  const Thread *exited = nullptr;
  unsigned waiting = 0;
  for (const Thread &t : threads) {
    if (t.wait == Wait::Barrier) {
      ++waiting;
      if (!first)
        first = &t;
    } else if (t.wait == Wait::Done && !exited) {
      exited = &t;
    }
  }
  if (!first) {
    setError(nullptr, "internal error: the block stalled with no waiting "
                      "thread");
    return false;
  }
  if (exited) {
    setError(first,
             format("waits at __syncthreads() (%s:%d) but thread %s has "
                    "exited (%u of %u threads wait); every thread of a block "
                    "must reach each barrier",
                    first->barrierFile, first->barrierLine,
                    describe(exited->idx).c_str(), waiting, nThreads));
    return false;
  }
  int count = 0;
  for (const Thread &t : threads) {
    if (t.barrierLine != first->barrierLine ||
        t.barrierKind != first->barrierKind ||
        (t.barrierFile != first->barrierFile &&
         std::strcmp(t.barrierFile, first->barrierFile) != 0)) {
      setError(first,
               format("waits at the barrier at %s:%d while thread %s "
                      "waits at the one at %s:%d; the threads of a "
                      "block must reach the same barrier",
                      first->barrierFile, first->barrierLine,
                      describe(t.idx).c_str(), t.barrierFile, t.barrierLine));
      return false;
    }
    count += t.barrierPred;
  }
  // Kinds: 0 plain, 1 count, 2 and, 3 or.
  int result = first->barrierKind == 1   ? count
               : first->barrierKind == 2 ? count == static_cast<int>(nThreads)
               : first->barrierKind == 3 ? count != 0
                                         : 0;
  for (unsigned i = 0; i < nThreads; ++i) {
    threads[i].barrierResult = result;
    threads[i].wait = Wait::Ready;
    push(i);
  }
  return true;
}
