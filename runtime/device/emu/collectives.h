//===- collectives.h - emu prelude: barriers, warp collectives --*- C++ -*-===//
//
// One part of the emu prelude (see prelude.h): runtime/CMakeLists.txt
// joins the parts, in the order it lists them, into the one header that
// kernels are built with.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Barriers and warp collectives (called on the fibers)
//===----------------------------------------------------------------------===//

inline int syncThreads(const char *file, int line, int kind, int predicate) {
  Thread &t = *tls.thread;
  t.barrierFile = file;
  t.barrierLine = line;
  t.barrierKind = kind;
  t.barrierPred = predicate != 0;
  suspend(t, Wait::Barrier);
  return t.barrierResult;
}

#ifdef MOEC_EMU_CHECK
constexpr bool kCheck = true;
#else
constexpr bool kCheck = false;
#endif

inline unsigned opKind(unsigned op) { return op & 0xff; }

inline float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline uint32_t floatToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

/// D = C + A * B for one m16n8k16 bf16 or m16n8k8 tf32 tile with the PTX
/// fragment layouts (see runtime/device/mma.cuh), summing in increasing k
/// order in fp32.
inline void completeMma(Block &b, unsigned warp, bool bf16) {
  const int kDepth = bf16 ? 16 : 8;
  float A[16][16], B[16][8], C[16][8];
  auto lo = [](uint32_t r) { return bitsToFloat(r << 16); };
  auto hi = [](uint32_t r) { return bitsToFloat(r & 0xffff0000u); };
  auto tf32 = [](uint32_t r) { return bitsToFloat(r & 0xffffe000u); };
  for (unsigned lane = 0; lane < kWarpSize; ++lane) {
    const LaneSlot &s = b.laneThread(warp, lane).slot;
    int g = static_cast<int>(lane / 4), t = static_cast<int>(lane % 4);
    if (bf16) {
      A[g][2 * t] = lo(s.a[0]);
      A[g][2 * t + 1] = hi(s.a[0]);
      A[g + 8][2 * t] = lo(s.a[1]);
      A[g + 8][2 * t + 1] = hi(s.a[1]);
      A[g][2 * t + 8] = lo(s.a[2]);
      A[g][2 * t + 9] = hi(s.a[2]);
      A[g + 8][2 * t + 8] = lo(s.a[3]);
      A[g + 8][2 * t + 9] = hi(s.a[3]);
      B[2 * t][g] = lo(s.b[0]);
      B[2 * t + 1][g] = hi(s.b[0]);
      B[2 * t + 8][g] = lo(s.b[1]);
      B[2 * t + 9][g] = hi(s.b[1]);
    } else {
      A[g][t] = tf32(s.a[0]);
      A[g + 8][t] = tf32(s.a[1]);
      A[g][t + 4] = tf32(s.a[2]);
      A[g + 8][t + 4] = tf32(s.a[3]);
      B[t][g] = tf32(s.b[0]);
      B[t + 4][g] = tf32(s.b[1]);
    }
    C[g][2 * t] = s.c[0];
    C[g][2 * t + 1] = s.c[1];
    C[g + 8][2 * t] = s.c[2];
    C[g + 8][2 * t + 1] = s.c[3];
  }
  float D[16][8];
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 8; ++j) {
      float acc = C[i][j];
      for (int k = 0; k < kDepth; ++k) {
        // bf16 and tf32 products are exact in fp32: no rounding here.
        float product = A[i][k] * B[k][j];
        acc = acc + product;
      }
      D[i][j] = acc;
    }
  }
  for (unsigned lane = 0; lane < kWarpSize; ++lane) {
    float *d = b.laneThread(warp, lane).slot.d;
    int g = static_cast<int>(lane / 4), t = static_cast<int>(lane % 4);
    d[0] = D[g][2 * t];
    d[1] = D[g][2 * t + 1];
    d[2] = D[g + 8][2 * t];
    d[3] = D[g + 8][2 * t + 1];
  }
}

/// ldmatrix.m8n8.x4 .b16 (PTX ISA, "ldmatrix"): lane 8 i + r gave row r of
/// matrix i (its 16 bytes are in its slot). Without .trans lane L receives,
/// for matrix i, the word of row L / 4 that holds columns 2 (L % 4) and
/// 2 (L % 4) + 1; with .trans it receives columns L / 4 of rows 2 (L % 4)
/// and 2 (L % 4) + 1 (the lower row in the low half).
inline void completeLdmatrix(Block &b, unsigned warp, bool trans) {
  auto row = [&](unsigned matrix, unsigned r) -> const uint32_t * {
    return b.laneThread(warp, matrix * 8 + r).slot.row;
  };
  auto half = [](const uint32_t *words, unsigned column) {
    return words[column / 2] >> (column % 2 * 16) & 0xffffu;
  };
  for (unsigned lane = 0; lane < kWarpSize; ++lane) {
    uint32_t *frag = b.laneThread(warp, lane).slot.frag;
    const unsigned g = lane / 4, t = lane % 4;
    for (unsigned i = 0; i < 4; ++i)
      frag[i] = trans ? half(row(i, 2 * t), g) | half(row(i, 2 * t + 1), g) << 16
                      : row(i, g)[t];
  }
}

/// Computes the results of a collective all of whose lanes have arrived.
inline void complete(Block &b, unsigned warp, const Group &g) {
  unsigned mask = g.mask;
  switch (opKind(g.op)) {
  case OpSync:
    return;
  case OpShfl:
    for (unsigned l = 0; l < kWarpSize; ++l) {
      if (!(mask >> l & 1))
        continue;
      LaneSlot &s = b.laneThread(warp, l).slot;
      unsigned src = static_cast<unsigned>(s.src);
      if (mask >> src & 1) {
        s.result = b.laneThread(warp, src).slot.value;
      } else {
        if (kCheck)
          fail("%s with mask 0x%08x: lane %u reads lane %u, which is not in "
               "the mask (its value is undefined on a GPU)",
               g.what, mask, l, src);
        s.result = s.value;
      }
    }
    return;
  case OpMmaBf16:
  case OpMmaTf32:
    completeMma(b, warp, opKind(g.op) == OpMmaBf16);
    return;
  case OpLdmatrix:
    completeLdmatrix(b, warp, (g.op >> 8 & 1) != 0);
    return;
  default:
    break;
  }
  // Votes and reductions.
  unsigned votes = 0;
  bool first = true;
  uint32_t acc = 0;
  bool isSigned = (g.op >> 8 & 0xff) != 0;
  for (unsigned l = 0; l < kWarpSize; ++l) {
    if (!(mask >> l & 1))
      continue;
    uint64_t v = b.laneThread(warp, l).slot.value;
    if (v)
      votes |= 1u << l;
    uint32_t x = static_cast<uint32_t>(v);
    if (first) {
      acc = x;
      first = false;
      continue;
    }
    switch (opKind(g.op)) {
    case OpReduceAdd:
      acc += x;
      break;
    case OpReduceMin:
      acc = isSigned ? static_cast<uint32_t>(std::min(static_cast<int32_t>(acc),
                                                      static_cast<int32_t>(x)))
                     : std::min(acc, x);
      break;
    case OpReduceMax:
      acc = isSigned ? static_cast<uint32_t>(std::max(static_cast<int32_t>(acc),
                                                      static_cast<int32_t>(x)))
                     : std::max(acc, x);
      break;
    case OpReduceAnd:
      acc &= x;
      break;
    case OpReduceOr:
      acc |= x;
      break;
    case OpReduceXor:
      acc ^= x;
      break;
    default:
      break;
    }
  }
  uint64_t result;
  switch (opKind(g.op)) {
  case OpBallot:
    result = votes;
    break;
  case OpAny:
    result = votes != 0;
    break;
  case OpAll:
    result = votes == mask;
    break;
  default:
    result = acc;
    break;
  }
  for (unsigned l = 0; l < kWarpSize; ++l)
    if (mask >> l & 1)
      b.laneThread(warp, l).slot.result = result;
}

/// Joins the calling lane to the collective of its warp with this mask;
/// returns when every lane of the mask has arrived (the last one to arrive
/// computes the results for all). Lanes that meet with the same mask must
/// call the same operation (shfl.sync and friends need the same qualifiers;
/// __syncwarp calls at different sites do meet, as on sm_70+).
inline void collective(unsigned mask, unsigned op, const char *what) {
  Thread &t = *tls.thread;
  Block &b = *tls.block;
  t.slot.op = op;
  t.slot.what = what;
  if (!(mask >> t.lane & 1))
    fail("%s with mask 0x%08x: the calling lane %u is not in the mask", what,
         mask, t.lane);
  unsigned absent = mask & ~b.existingLanes(t.warp);
  if (absent)
    fail("%s with mask 0x%08x: lane %d is not part of the block (%u "
         "threads); every lane in the mask must call it",
         what, mask, __builtin_ctz(absent), b.nThreads);
  WarpState &warp = b.warps[t.warp];
  if (unsigned exited = mask & warp.exited) {
    unsigned l = static_cast<unsigned>(__builtin_ctz(exited));
    fail("%s with mask 0x%08x: lane %u (thread %s) has exited; every lane "
         "in the mask must call it",
         what, mask, l, describe(b.laneThread(t.warp, l).idx).c_str());
  }
  // Collectives with other masks may be pending (divergent code); lanes
  // they share with this one arrive here after those complete, and what
  // never completes is reported when the block stalls.
  std::vector<Group> &groups = warp.groups;
  Group *group = nullptr;
  for (Group &g : groups)
    if (g.mask == mask)
      group = &g;
  if (!group) {
    groups.push_back(Group{mask, 0, op, what});
    group = &groups.back();
  } else if (group->op != op) {
    fail("%s while lane %d waits in %s with the same mask 0x%08x; the lanes "
         "of a collective must call the same operation on the same type",
         what, __builtin_ctz(group->arrived), group->what, mask);
  }
  group->arrived |= 1u << t.lane;
  if (group->arrived != mask) {
    suspend(t, Wait::Warp);
    return;
  }
  Group done = *group;
  groups.erase(groups.begin() + (group - groups.data()));
  complete(b, t.warp, done);
  for (unsigned l = 0; l < kWarpSize; ++l) {
    if ((mask >> l & 1) && l != t.lane) {
      b.laneThread(t.warp, l).wait = Wait::Ready;
      b.push(t.warp * kWarpSize + l);
    }
  }
}

/// Shuffle modes, as in PTX shfl.sync.
enum ShflMode : unsigned { ShflIdx, ShflUp, ShflDown, ShflXor };

template <typename T>
inline T shuffle(unsigned mask, T var, unsigned mode, int b, int width,
                 const char *what) {
  static_assert(sizeof(T) <= 8, "shuffles move at most 64 bits");
  Thread &t = *tls.thread;
  if (kCheck && (width < 1 || width > 32 || (width & (width - 1))))
    fail("%s: width %d is not a power of two in [1, 32]", what, width);
  // PTX: c = ((32 - width) << 8) | (up ? 0 : 0x1f).
  int lane = static_cast<int>(t.lane);
  int bval = b & 31;
  int segmask = (32 - width) & 31;
  int cval = mode == ShflUp ? 0 : 0x1f;
  int maxLane = (lane & segmask) | (cval & ~segmask);
  int minLane = lane & segmask;
  int j;
  bool inRange;
  switch (mode) {
  case ShflUp:
    j = lane - bval;
    inRange = j >= maxLane;
    break;
  case ShflDown:
    j = lane + bval;
    inRange = j <= maxLane;
    break;
  case ShflXor:
    j = lane ^ bval;
    inRange = j <= maxLane;
    break;
  default:
    j = minLane | (bval & ~segmask & 31);
    inRange = j <= maxLane;
    break;
  }
  if (!inRange)
    j = lane;
  uint64_t bits = 0;
  std::memcpy(&bits, &var, sizeof(T));
  t.slot.value = bits;
  t.slot.src = j;
  collective(mask, OpShfl | mode << 8 | sizeof(T) << 16, what);
  T result;
  bits = t.slot.result;
  std::memcpy(&result, &bits, sizeof(T));
  return result;
}

inline uint32_t vote(unsigned mask, int predicate, unsigned op,
                     const char *what) {
  Thread &t = *tls.thread;
  t.slot.value = predicate != 0;
  collective(mask, op, what);
  return static_cast<uint32_t>(t.slot.result);
}

inline uint32_t reduce(unsigned mask, uint32_t value, unsigned op,
                       bool isSigned, const char *what) {
  Thread &t = *tls.thread;
  t.slot.value = value;
  collective(mask, op | (isSigned ? 1u << 8 : 0u), what);
  return static_cast<uint32_t>(t.slot.result);
}

inline void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                const float (&c)[4], unsigned op, const char *what) {
  Thread &t = *tls.thread;
  t.slot.a = a;
  t.slot.b = b;
  t.slot.c = c;
  t.slot.d = d;
  collective(~0u, op, what);
}

/// The calling lane's part of an ldmatrix.x4: `row` is the 16 bytes at the
/// address it supplies; `frag` receives its four fragment registers. The
/// whole warp must take part (.sync.aligned), with the same .trans.
inline void ldmatrix(uint32_t (&frag)[4], const uint32_t (&row)[4],
                     bool trans, const char *what) {
  Thread &t = *tls.thread;
  std::memcpy(t.slot.row, row, sizeof row);
  t.slot.frag = frag;
  collective(~0u, OpLdmatrix | (trans ? 1u << 8 : 0u), what);
}

inline unsigned activeMask() {
  Thread &t = *tls.thread;
  suspend(t, Wait::ActiveMask);
  return static_cast<unsigned>(t.slot.result);
}

} // namespace detail

/// Warp-collective m16n8k16 bf16 mma with the PTX fragment layout.
inline void mmaM16N8K16Bf16(float (&d)[4], const uint32_t (&a)[4],
                            const uint32_t (&b)[2], const float (&c)[4]) {
  detail::mma(d, a, b, c, detail::OpMmaBf16, "mma.m16n8k16.bf16");
}

/// Warp-collective m16n8k8 tf32 mma with the PTX fragment layout.
inline void mmaM16N8K8Tf32(float (&d)[4], const uint32_t (&a)[4],
                           const uint32_t (&b)[2], const float (&c)[4]) {
  detail::mma(d, a, b, c, detail::OpMmaTf32, "mma.m16n8k8.tf32");
}

/// cvt.rna.tf32.f32: `x` rounded to tf32 (10 fraction bits) to nearest,
/// ties away from zero, as a word whose low 13 bits are zero. The mma above
/// truncates its tf32 operands (keeps their top 19 bits), which leaves such
/// words unchanged: rounded operands give the GPU's products here too.
inline uint32_t cvtRnaTf32(float x) {
  const uint32_t bits = detail::floatToBits(x);
  if ((bits & 0x7f800000u) == 0x7f800000u) // infinities stay, NaN is canonical
    return bits & 0x007fffffu ? 0x7fffffffu : bits;
  // Adding half a unit of the 13th bit rounds the magnitude up at ties; a
  // carry into the exponent is the correct result (up to infinity).
  return (bits + 0x1000u) & 0xffffe000u;
}

} // namespace moec_emu
