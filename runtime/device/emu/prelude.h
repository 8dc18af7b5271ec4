//===- prelude.h - the SIMT prelude of the emu device -----------*- C++ -*-===//
//
// The emu device runs the CUDA source moec generates on the CPU:
//
//   c++ -std=c++17 -O1 -g1 -fPIC -shared -fvisibility=hidden -pthread
//       -DMOEC_EMU [-DMOEC_EMU_CHECK] -include prelude.h -x c++ kernel.cu
//       -o kernel.so -lboost_context
//
// This header makes the CUDA subset of compiler/CODEGEN.md compile with the
// host compiler and behave as on a GPU. Every thread of a block is a fiber
// (Boost.Context); __syncthreads() and the warp collectives suspend it until
// the threads they wait for arrive, so barriers are real and a block whose
// threads disagree is reported instead of hanging. Blocks run one after the
// other on a host thread, or on several host threads in parallel.
//
// With MOEC_EMU_CHECK, moec::gptr<T> is a bounds-checked pointer, shared
// memory is tracked per byte (out-of-bounds accesses and reads of bytes no
// thread of the block has written are reported) and shuffles that read a
// lane outside their mask are errors. Tracked shared arrays are objects, so
// code that hands one to a template deducing T from a T* parameter does not
// compile: such parameters should be moec::sptr<T> (T* on the GPU), or the
// tracking can be left out with MOEC_EMU_UNTRACKED_SHARED.
//
// It is self-contained: each kernel .so carries its own copy, compiled with
// hidden visibility, and exports only moec_emu_launch_<kernel> (see
// MOEC_EMU_EXPORT_KERNEL), so the .so needs nothing from the moec runtime.
//
// This file opens the prelude; the other files of this directory are its
// parts, joined after it in the order runtime/CMakeLists.txt lists them
// (launcher_abi.h ... launcher.h), and end.h closes it.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_EMU_PRELUDE_H
#define MOEC_EMU_PRELUDE_H

#include <boost/context/fiber.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <utility>
#include <vector>

// Under AddressSanitizer every fiber switch is announced, so that ASan
// knows which stack is live (exceptions unwind fiber stacks).
#if defined(__SANITIZE_ADDRESS__)
#define MOEC_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MOEC_EMU_ASAN 1
#endif
#endif
#ifdef MOEC_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

// The emu device passes the kernel ABI's buffer count, so that this file
// and the device library share one number.
#ifndef MOEC_EMU_MAX_BUFFERS
#error "build with -DMOEC_EMU_MAX_BUFFERS=<the kernel ABI's buffer count>"
#endif

#if defined(MOEC_EMU_CHECK) && !defined(MOEC_EMU_UNTRACKED_SHARED)
#define MOEC_EMU_TRACK_SHARED 1
#endif
