//===- KernelStatus.cpp - bad data that generated kernels report ----------===//

#include "KernelStatus.h"
#include "LaunchShape.h"
#include "cpu/kernels/Common.h"
#include "moec/support/MoeDefs.h"

#include <fmt/format.h>

namespace moec::detail {

std::string unrankedLogitsMessage(const std::string &index) {
  return fmt::format("the logits of token {} contain NaN or +inf, or are all "
                     "-inf; the router cannot rank them",
                     index);
}

namespace {

/// Token `item` of the router step in `group` as the cpu names it: its
/// index in the logits' dimensions but the last (the experts).
std::string tokenIndex(const ProgramDesc &program, const GroupDesc &group,
                       const SymbolValues &symbols, uint32_t item,
                       std::string &op, std::string &loc) {
  for (size_t s : group.steps) {
    const StepDesc &step = program.steps[s];
    if (step.op != defs::ops::topk_router::kName || step.in.empty())
      continue;
    op = step.op;
    loc = step.loc;
    const BufferDesc &logits = program.buffers[step.in[0]];
    Shape tokens;
    for (size_t d = 0; d + 1 < logits.dims.size(); ++d) {
      std::optional<int64_t> size = logits.dims[d].evaluate(symbols);
      if (!size)
        return fmt::format("[{}]", item);
      tokens.push_back(*size);
    }
    return cpu::indexString(tokens, item);
  }
  return fmt::format("[{}]", item);
}

} // namespace

std::optional<Error> kernelStatusError(const ProgramDesc &program,
                                       const SymbolValues &symbols,
                                       const KernelStatusWords &words) {
  if (words.launch == 0)
    return std::nullopt;
  for (size_t g = 0, seen = 0; g < program.groups.size(); ++g) {
    const GroupDesc &group = program.groups[g];
    if (words.launch > seen + group.launches.size()) {
      seen += group.launches.size();
      continue;
    }
    const LaunchDesc &launch = group.launches[words.launch - seen - 1];
    if (words.code != static_cast<uint32_t>(KernelStatusCode::RouterLogits))
      return launchError(program, g, launch,
                         fmt::format("the kernel reported status code {}, "
                                     "which this runtime does not know",
                                     words.code));
    std::string op = "the router", loc;
    std::string index =
        tokenIndex(program, group, symbols, words.item, op, loc);
    return launchError(program, g, launch,
                       fmt::format("{}: {}{}", op, unrankedLogitsMessage(index),
                                   loc.empty() ? "" : " (from " + loc + ")"));
  }
  return Error(fmt::format("program '{}': a kernel reported status for launch "
                           "{}, but the program has fewer launches",
                           program.name, words.launch));
}

} // namespace moec::detail
