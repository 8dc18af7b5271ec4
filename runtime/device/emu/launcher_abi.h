//===- launcher_abi.h - emu prelude: the launcher abi -----------*- C++ -*-===//
//
// One part of the emu prelude (see prelude.h): runtime/CMakeLists.txt
// joins the parts, in the order it lists them, into the one header that
// kernels are built with.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// The launcher ABI (plain C, shared with runtime/lib/emu/EmuCompiler.h)
//===----------------------------------------------------------------------===//

/// The value of moec_emu_launch::version this prelude accepts.
#define MOEC_EMU_ABI_VERSION 1u

extern "C" {
/// One launch of one kernel; the host fills it, the .so reads it.
typedef struct moec_emu_launch {
  unsigned version;     ///< MOEC_EMU_ABI_VERSION
  unsigned flags;       ///< reserved, 0
  unsigned grid[3];     ///< gridDim
  unsigned block[3];    ///< blockDim
  unsigned hostThreads; ///< host threads running blocks; 0 or 1: sequential
  unsigned reserved;    ///< 0
  unsigned long long sharedBytes; ///< dynamic shared memory per block
  unsigned long long stackBytes;  ///< fiber stack per thread; 0: 64 KiB
  /// Byte size of each buffer of KernelParams (0: unknown, not checked).
  unsigned long long bufferBytes[MOEC_EMU_MAX_BUFFERS];
} moec_emu_launch;
}
static_assert(offsetof(moec_emu_launch, sharedBytes) == 40 &&
                  offsetof(moec_emu_launch, bufferBytes) == 56 &&
                  sizeof(moec_emu_launch) == 56 + 8 * MOEC_EMU_MAX_BUFFERS,
              "the launcher ABI is fixed (EmuCompiler.cpp mirrors it)");
