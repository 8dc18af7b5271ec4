/*===- NoLlvmSlabPoisoning.h - ASan builds against Debian's LLVM ----------===*
 *
 * Included first in every file of an ASan build (MOEC_SANITIZE). LLVM's
 * headers poison a BumpPtrAllocator's fresh slabs when they see ASan, and
 * unpoison each allocation from them. Debian's LLVM and MLIR libraries are
 * not instrumented: their inlined allocations never unpoison, so a slab our
 * code poisoned reads as use-after-poison there. Without the poisoning the
 * slabs are plain heap memory, still checked at their ends.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MOEC_NO_LLVM_SLAB_POISONING_H
#define MOEC_NO_LLVM_SLAB_POISONING_H

#include <sanitizer/asan_interface.h>

#define __asan_poison_memory_region(p, size) ((void)(p), (void)(size))
#define __asan_unpoison_memory_region(p, size) ((void)(p), (void)(size))

#endif
