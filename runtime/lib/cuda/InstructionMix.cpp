//===- InstructionMix.cpp - instruction kinds in a PTX module -------------===//
//
// A line-by-line reading of PTX: directives, labels, braces and comments
// are skipped, a guard predicate (@%p / @!%p) is dropped, and the opcode's
// dotted parts decide the kind. Reading the PTX needs no GPU and no
// disassembler, and it is what NVRTC gives for every kernel.
//
//===----------------------------------------------------------------------===//

#include "moec/Cuda.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <string_view>
#include <vector>

namespace moec {
namespace {

std::vector<std::string_view> dottedParts(std::string_view opcode) {
  std::vector<std::string_view> parts;
  size_t begin = 0;
  while (begin <= opcode.size()) {
    size_t dot = opcode.find('.', begin);
    if (dot == std::string_view::npos)
      dot = opcode.size();
    parts.push_back(opcode.substr(begin, dot - begin));
    begin = dot + 1;
  }
  return parts;
}

bool has(const std::vector<std::string_view> &parts, std::string_view part) {
  return std::find(parts.begin(), parts.end(), part) != parts.end();
}

/// Bytes one ld/st moves: the vector width times the element type's size.
int accessBytes(const std::vector<std::string_view> &parts) {
  int lanes = 1, bytes = 0;
  for (std::string_view p : parts) {
    if (p == "v2")
      lanes = 2;
    else if (p == "v4")
      lanes = 4;
    else if (p == "v8")
      lanes = 8;
    else if (p.size() >= 2 &&
             (p[0] == 'f' || p[0] == 'b' || p[0] == 'u' || p[0] == 's') &&
             std::all_of(p.begin() + 1, p.end(),
                         [](char c) { return c >= '0' && c <= '9'; }))
      bytes = std::stoi(std::string(p.substr(1))) / 8;
    else if (p == "bf16")
      bytes = 2;
  }
  return lanes * bytes;
}

void countInstruction(std::string_view opcode, InstructionMix &mix) {
  std::vector<std::string_view> parts = dottedParts(opcode);
  std::string_view head = parts.front();
  ++mix.instructions;
  if (head == "mma" || (head == "wgmma" && has(parts, "mma_async")))
    ++mix.mma;
  else if (head == "ldmatrix")
    ++mix.ldmatrix;
  else if (head == "cp" && parts.size() > 1 && parts[1] == "async" &&
           !has(parts, "commit_group") && !has(parts, "wait_group") &&
           !has(parts, "wait_all"))
    ++mix.cpAsync;
  else if ((head == "ld" || head == "st") && has(parts, "global")) {
    bool wide = accessBytes(parts) >= 16;
    if (head == "ld") {
      ++mix.globalLoads;
      mix.globalLoads16 += wide;
    } else {
      ++mix.globalStores;
      mix.globalStores16 += wide;
    }
  } else if ((head == "ld" || head == "st") && has(parts, "shared")) {
    ++mix.sharedAccesses;
    mix.sharedAccesses16 += accessBytes(parts) >= 16;
  } else if ((head == "bar" && !has(parts, "warp")) || head == "barrier")
    ++mix.barriers;
  else if (head == "call")
    ++mix.calls;
  if (has(parts, "f64"))
    ++mix.f64;
}

} // namespace

InstructionMix instructionMix(const std::string &ptx) {
  InstructionMix mix;
  std::istringstream in(ptx);
  std::string line;
  // A call spreads its operands over the lines up to its ';'.
  bool continued = false;
  while (std::getline(in, line)) {
    std::string_view text(line);
    size_t comment = text.find("//");
    if (comment != std::string_view::npos)
      text = text.substr(0, comment);
    if (continued) {
      continued = text.find(';') == std::string_view::npos;
      continue;
    }
    size_t first = text.find_first_not_of(" \t");
    if (first == std::string_view::npos)
      continue;
    text = text.substr(first);
    if (text[0] == '@') { // a guard predicate
      size_t space = text.find_first_of(" \t");
      if (space == std::string_view::npos)
        continue;
      text = text.substr(space);
      first = text.find_first_not_of(" \t");
      if (first == std::string_view::npos)
        continue;
      text = text.substr(first);
    }
    if (text[0] == '.' || text[0] == '{' || text[0] == '}' || text[0] == ')' ||
        text[0] == '(' || text[0] == '$')
      continue; // directives, scopes, call argument lists
    size_t end = text.find_first_of(" \t;,");
    std::string_view opcode = text.substr(0, end);
    if (opcode.empty() || opcode.back() == ':')
      continue; // a label
    if (!std::isalpha(static_cast<unsigned char>(opcode[0])))
      continue;
    countInstruction(opcode, mix);
    continued = text.find(';') == std::string_view::npos;
  }
  return mix;
}

} // namespace moec
