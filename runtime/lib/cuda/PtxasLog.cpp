//===- PtxasLog.cpp - resource usage from ptxas's verbose log -------------===//
//
// The lines look like (CUDA 12 and 13):
//
//   ptxas info    : Compiling entry function 'k' for 'sm_80'
//   ptxas info    : Function properties for k
//   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes ...
//   ptxas info    : Used 10 registers, used 1 barriers, 512 bytes smem, ...
//
// "Function properties" also appears for non-inlined device functions, so
// the parser tracks which function the following lines describe.
//
//===----------------------------------------------------------------------===//

#include "PtxasLog.h"

#include <cctype>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

namespace moec::detail::cuda {

namespace {

/// The decimal number that ends right before `suffix` in `line`.
std::optional<int> numberBefore(const std::string &line,
                                const std::string &suffix) {
  size_t at = line.find(suffix);
  if (at == std::string::npos)
    return std::nullopt;
  size_t begin = at;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(line[begin - 1])))
    --begin;
  if (begin == at)
    return std::nullopt;
  return std::stoi(line.substr(begin, at - begin));
}

/// The decimal number right after `prefix` in `line`.
std::optional<int> numberAfter(const std::string &line,
                               const std::string &prefix) {
  size_t at = line.find(prefix);
  if (at == std::string::npos)
    return std::nullopt;
  size_t begin = at + prefix.size(), end = begin;
  while (end < line.size() &&
         std::isdigit(static_cast<unsigned char>(line[end])))
    ++end;
  if (end == begin)
    return std::nullopt;
  return std::stoi(line.substr(begin, end - begin));
}

/// The text between the first pair of single quotes after `prefix`.
std::optional<std::string> quotedAfter(const std::string &line,
                                       const std::string &prefix) {
  size_t at = line.find(prefix);
  if (at == std::string::npos)
    return std::nullopt;
  size_t open = line.find('\'', at + prefix.size());
  size_t close = open == std::string::npos ? open : line.find('\'', open + 1);
  if (close == std::string::npos)
    return std::nullopt;
  return line.substr(open + 1, close - open - 1);
}

} // namespace

ResourceUsage parsePtxasLog(const std::string &log, const std::string &kernel) {
  std::map<std::string, ResourceUsage> usage;
  std::vector<std::string> entries;
  std::string current;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("ptxas", 0) != 0)
      continue;
    if (auto name = quotedAfter(line, "Compiling entry function")) {
      current = *name;
      entries.push_back(current);
      continue;
    }
    const std::string properties = "Function properties for ";
    if (size_t at = line.find(properties); at != std::string::npos) {
      current = line.substr(at + properties.size());
      while (!current.empty() &&
             std::isspace(static_cast<unsigned char>(current.back())))
        current.pop_back();
      continue;
    }
    if (current.empty())
      continue;
    ResourceUsage &u = usage[current];
    if (auto stack = numberBefore(line, " bytes stack frame"))
      u.stackBytes = *stack;
    if (auto stores = numberBefore(line, " bytes spill stores"))
      u.spillStoreBytes = *stores;
    if (auto loads = numberBefore(line, " bytes spill loads"))
      u.spillLoadBytes = *loads;
    if (auto registers = numberAfter(line, "Used ")) {
      u.registers = *registers;
      // ptxas leaves out "N bytes smem" when there is none.
      u.sharedBytes = numberBefore(line, " bytes smem").value_or(0);
    }
  }
  if (auto it = usage.find(kernel); it != usage.end())
    return it->second;
  if (entries.size() == 1)
    return usage[entries.front()];
  return {};
}

} // namespace moec::detail::cuda
