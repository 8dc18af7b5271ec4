//===- HiddenCache.h - the expert FFN's hidden layer, kept -*- C++ -*-===//
//
// moe.expert_ffn_grad needs the hidden layer that moe.expert_ffn computed
// from the same operands; recomputing it is a fifth of the gradient's gemms
// (two fifths with GLU). The cpu device keeps what the forward computed for
// the rest of one program run, keyed by the operands' storage, and drops an
// entry as soon as any step writes over an operand's bytes, so a hit always
// sees the operands the forward saw. Results are the same with or without it:
// both paths run the same code on the same values.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CPU_HIDDENCACHE_H
#define MOEC_RUNTIME_CPU_HIDDENCACHE_H

#include "cpu/kernels/Common.h"
#include "moec/Tensor.h"

#include <cstddef>
#include <string>
#include <vector>

namespace moec::cpu {

class HiddenCache {
public:
  HiddenCache() = default;
  HiddenCache(const HiddenCache &) = delete;
  HiddenCache &operator=(const HiddenCache &) = delete;
  ~HiddenCache();

  /// `count` buffers of `bytes` each, 64-byte aligned, for an entry about to
  /// be stored with put(); they stay allocated until clear().
  std::vector<void *> allocate(size_t count, size_t bytes);
  /// Keeps `buffers` (from allocate()) for operands `key` and variant `tag`.
  void put(const std::vector<TensorView> &key, const std::string &tag,
           std::vector<void *> buffers);
  /// The buffers stored for exactly these operands and tag, or an empty
  /// vector; the entry is removed (its storage lives until clear()).
  std::vector<void *> take(const std::vector<TensorView> &key,
                           const std::string &tag);
  /// Drops every entry one of whose operands overlaps the bytes of `written`.
  void invalidate(const TensorView &written);
  /// Drops every entry and recycles all storage (end of a program run).
  void clear();

private:
  struct Entry {
    std::vector<TensorView> key;
    std::string tag;
    std::vector<void *> buffers;
  };
  std::vector<Entry> entries;
  BlockPool pool;
  std::vector<BlockPool::Block> taken;
};

} // namespace moec::cpu

#endif // MOEC_RUNTIME_CPU_HIDDENCACHE_H
