//===- HiddenCache.cpp - the expert FFN's hidden layer, kept ------------===//

#include "cpu/HiddenCache.h"

#include "moec/Error.h"

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>

namespace moec::cpu {

namespace {

bool sameView(const TensorView &a, const TensorView &b) {
  return a.data == b.data && a.dtype == b.dtype && a.shape == b.shape;
}

bool overlaps(const TensorView &a, const TensorView &b) {
  if (!a.present() || !b.present())
    return false;
  auto begin = [](const TensorView &v) {
    return static_cast<const char *>(v.data);
  };
  auto end = [&](const TensorView &v) { return begin(v) + v.nbytes(); };
  return begin(a) < end(b) && begin(b) < end(a);
}

} // namespace

HiddenCache::~HiddenCache() {
  clear();
  for (Block &b : idle)
    std::free(b.data);
}

std::vector<void *> HiddenCache::allocate(size_t count, size_t bytes) {
  bytes = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  std::vector<void *> result;
  for (size_t i = 0; i < count; ++i) {
    // The smallest idle block that fits, so that steady-state runs reuse
    // the same (already faulted-in) pages.
    auto best = idle.end();
    for (auto it = idle.begin(); it != idle.end(); ++it)
      if (it->bytes >= bytes && (best == idle.end() || it->bytes < best->bytes))
        best = it;
    Block block;
    if (best != idle.end()) {
      block = *best;
      idle.erase(best);
    } else {
      block = {std::aligned_alloc(64, bytes), bytes};
      if (!block.data)
        throw Error(fmt::format("out of host memory allocating {} bytes for "
                                "the expert FFN's saved hidden layer",
                                bytes));
    }
    taken.push_back(block);
    result.push_back(block.data);
  }
  return result;
}

void HiddenCache::put(const std::vector<TensorView> &key,
                      const std::string &tag, std::vector<void *> buffers) {
  take(key, tag); // a newer forward of the same operands replaces it
  entries.push_back({key, tag, std::move(buffers)});
}

std::vector<void *> HiddenCache::take(const std::vector<TensorView> &key,
                                      const std::string &tag) {
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    if (it->tag != tag || it->key.size() != key.size() ||
        !std::equal(key.begin(), key.end(), it->key.begin(), sameView))
      continue;
    std::vector<void *> buffers = std::move(it->buffers);
    entries.erase(it);
    return buffers;
  }
  return {};
}

void HiddenCache::invalidate(const TensorView &written) {
  if (!written.present())
    return;
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [&](const Entry &e) {
                                 for (const TensorView &v : e.key)
                                   if (overlaps(v, written))
                                     return true;
                                 return false;
                               }),
                entries.end());
}

void HiddenCache::clear() {
  entries.clear();
  idle.insert(idle.end(), taken.begin(), taken.end());
  taken.clear();
}

} // namespace moec::cpu
