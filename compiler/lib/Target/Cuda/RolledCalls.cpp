//===- RolledCalls.cpp - library calls over argument runs as one loop -----===//
//
// Multi-tensor kernels (the optimizer, the gradient norm) make one library
// call per tensor. NVRTC compiles every call site on its own (a few ms each
// in NVVM and ptxas), so runs of calls that differ only in their argument
// slots, each slot stepping by a fixed stride, become one loop over the call
// number: the kernel indexes its parameter block at run time, which ptxas
// reads from the parameter space (no stack frame).
//
//===----------------------------------------------------------------------===//

#include "GroupEmitter.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::moe::cuda;

namespace {

/// A line with its argument slots (the N of `(p, N)`) taken out: the text
/// around them and their values.
struct SlotPattern {
  std::string skeleton;
  llvm::SmallVector<int64_t> slots;
};

constexpr char kSlotMark = '\0';

SlotPattern slotPattern(StringRef line) {
  constexpr StringRef kOpen = "(p, ";
  SlotPattern pattern;
  size_t done = 0;
  for (size_t at = line.find(kOpen); at != StringRef::npos;
       at = line.find(kOpen, done)) {
    size_t digits = at + kOpen.size(), end = digits;
    while (end < line.size() && llvm::isDigit(line[end]))
      ++end;
    pattern.skeleton += line.slice(done, digits).str();
    done = digits;
    if (end == digits || end == line.size() || line[end] != ')')
      continue;
    int64_t slot;
    if (line.slice(digits, end).getAsInteger(10, slot))
      continue;
    pattern.skeleton += kSlotMark;
    pattern.slots.push_back(slot);
    done = end;
  }
  pattern.skeleton += line.drop_front(done).str();
  return pattern;
}

/// `first + stride * call` as CUDA, simplified.
std::string slotExpr(int64_t first, int64_t stride, StringRef call) {
  if (stride == 0)
    return std::to_string(first);
  std::string step =
      stride == 1 ? call.str() : llvm::formatv("{0} * {1}", stride, call).str();
  return first == 0 ? step : llvm::formatv("{0} + {1}", first, step).str();
}

} // namespace

void mlir::moe::cuda::emitRolledCalls(CodeWriter &w,
                                      llvm::ArrayRef<std::string> lines) {
  constexpr StringRef kCall = "call";
  llvm::SmallVector<SlotPattern> patterns;
  for (const std::string &line : lines)
    patterns.push_back(slotPattern(line));
  for (size_t i = 0; i < lines.size();) {
    const SlotPattern &head = patterns[i];
    llvm::SmallVector<int64_t> strides;
    size_t end = i + 1;
    if (!head.slots.empty() && end < lines.size() &&
        patterns[end].skeleton == head.skeleton) {
      for (size_t k = 0; k < head.slots.size(); ++k)
        strides.push_back(patterns[end].slots[k] - head.slots[k]);
      auto follows = [&](size_t j) {
        if (patterns[j].skeleton != head.skeleton)
          return false;
        for (size_t k = 0; k < head.slots.size(); ++k)
          if (patterns[j].slots[k] !=
              head.slots[k] + strides[k] * static_cast<int64_t>(j - i))
            return false;
        return true;
      };
      while (end < lines.size() && follows(end))
        ++end;
    }
    if (end - i < 2) {
      w.line(lines[i]);
      ++i;
      continue;
    }
    std::string body;
    size_t slot = 0;
    for (char c : head.skeleton) {
      if (c != kSlotMark) {
        body += c;
        continue;
      }
      body += slotExpr(head.slots[slot], strides[slot], kCall);
      ++slot;
    }
    w.line("#pragma unroll 1");
    w.line(
        llvm::formatv("for (int {0} = 0; {0} < {1}; ++{0})", kCall, end - i));
    w.indent();
    w.line(body);
    w.dedent();
    i = end;
  }
}
