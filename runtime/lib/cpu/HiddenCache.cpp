//===- HiddenCache.cpp - the expert FFN's hidden layer, kept ------------===//

#include "cpu/HiddenCache.h"

#include <algorithm>

namespace moec::cpu {

namespace {

bool sameView(const TensorView &a, const TensorView &b) {
  return a.data == b.data && a.dtype == b.dtype && a.shape == b.shape;
}

} // namespace

HiddenCache::~HiddenCache() { clear(); }

std::vector<void *> HiddenCache::allocate(size_t count, size_t bytes) {
  std::vector<void *> result;
  for (size_t i = 0; i < count; ++i) {
    taken.push_back(pool.take(bytes, /*replaceLargest=*/false,
                              "the expert FFN's saved hidden layer"));
    result.push_back(taken.back().data);
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
                                   if (viewsOverlap(v, written))
                                     return true;
                                 return false;
                               }),
                entries.end());
}

void HiddenCache::clear() {
  entries.clear();
  for (BlockPool::Block &b : taken)
    pool.give(b);
  taken.clear();
}

} // namespace moec::cpu
