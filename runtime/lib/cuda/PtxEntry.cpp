//===- PtxEntry.cpp - one kernel's part of a PTX module -------------------===//
//
// A line-by-line reading of the module as NVVM writes it: a function starts
// on a line whose first directive, after linkage words, is `.entry` or
// `.func`, with its name on the same line, and it ends at the `;` of a
// declaration or at the brace that closes its body. Everything else
// (header, globals, debug sections) is kept whole.
//
//===----------------------------------------------------------------------===//

#include "PtxEntry.h"

#include <cctype>
#include <fmt/format.h>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

namespace moec::detail::cuda {
namespace {

/// A function's lines in the module: [begin, end) in bytes.
struct Function {
  std::string name;
  bool entry = false;
  bool definition = false;
  size_t begin = 0, end = 0;
};

/// What the first line of a function says: its name (empty when the line
/// starts none) and whether it is an entry.
struct FunctionStart {
  std::string name;
  bool entry = false;
};

/// NVVM's PTX is not the user's input: a module this reading cannot follow
/// is a bug here.
[[noreturn]] void internalError(const std::string &what) {
  throw std::logic_error(fmt::format(
      "internal error: {} (reading NVRTC's PTX module; please report it)",
      what));
}

bool identifierChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}

std::string_view withoutComment(std::string_view line) {
  size_t comment = line.find("//");
  return comment == std::string_view::npos ? line : line.substr(0, comment);
}

std::string_view trimmed(std::string_view text) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos)
    return {};
  size_t last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

FunctionStart functionStartedBy(std::string_view line) {
  std::string_view text = trimmed(withoutComment(line));
  for (std::string_view linkage : {".visible", ".weak", ".extern"})
    if (text.substr(0, linkage.size()) == linkage)
      text = trimmed(text.substr(linkage.size()));
  bool entry = text.substr(0, 6) == ".entry";
  if (!entry && text.substr(0, 5) != ".func")
    return {};
  text = trimmed(text.substr(entry ? 6 : 5));
  if (!text.empty() && text[0] == '(') { // a .func's return parameters
    size_t close = text.find(')');
    text = close == std::string_view::npos ? std::string_view()
                                           : trimmed(text.substr(close + 1));
  }
  size_t length = 0;
  while (length < text.size() && identifierChar(text[length]))
    ++length;
  if (length == 0)
    internalError(fmt::format("a function without a name on its first "
                              "line: '{}'",
                              trimmed(line)));
  return {std::string(text.substr(0, length)), entry};
}

/// Whether `line` is NVVM's `// .globl NAME` comment for function `name`.
bool globlCommentFor(std::string_view line, std::string_view name) {
  std::string_view text = trimmed(line);
  if (text.substr(0, 2) != "//")
    return false;
  text = trimmed(text.substr(2));
  if (text.substr(0, 6) != ".globl")
    return false;
  return trimmed(text.substr(6)) == name;
}

/// The module's functions, in order. The `// .globl` comment NVVM writes
/// right above an entry goes with it (the first entry's stands above the
/// module's declarations, and stays with them).
std::vector<Function> functionsOf(std::string_view ptx) {
  std::vector<Function> functions;
  Function *open = nullptr;
  int parens = 0, braces = 0;
  size_t at = 0, previous = 0;
  while (at < ptx.size()) {
    size_t newline = ptx.find('\n', at);
    size_t next = newline == std::string_view::npos ? ptx.size() : newline + 1;
    std::string_view line = ptx.substr(at, next - at);
    if (!open) {
      FunctionStart start = functionStartedBy(line);
      if (!start.name.empty()) {
        size_t begin = at;
        if (at > 0 &&
            globlCommentFor(ptx.substr(previous, at - previous), start.name))
          begin = previous;
        functions.push_back({start.name, start.entry, false, begin, 0});
        open = &functions.back();
        parens = braces = 0;
      }
    }
    if (open) {
      bool ended = false;
      for (char c : withoutComment(line)) {
        if (c == '(')
          ++parens;
        else if (c == ')')
          --parens;
        else if (c == '{') {
          ++braces;
          open->definition = true;
        } else if (c == '}')
          ended = --braces == 0;
        else if (c == ';' && braces == 0 && parens == 0 && !open->definition)
          ended = true;
      }
      if (ended) {
        open->end = next;
        open = nullptr;
      }
    }
    previous = at;
    at = next;
  }
  if (open)
    internalError(fmt::format("the function '{}' does not end", open->name));
  return functions;
}

/// The device functions that `text` names, as indices of `functions`.
std::vector<size_t>
namedIn(std::string_view text,
        const std::unordered_map<std::string_view, size_t> &deviceFunctions) {
  std::vector<size_t> named;
  size_t at = 0;
  while (at < text.size()) {
    size_t newline = text.find('\n', at);
    size_t next = newline == std::string_view::npos ? text.size() : newline + 1;
    std::string_view line = withoutComment(text.substr(at, next - at));
    for (size_t i = 0; i < line.size();) {
      if (!identifierChar(line[i])) {
        ++i;
        continue;
      }
      size_t start = i;
      while (i < line.size() && identifierChar(line[i]))
        ++i;
      auto it = deviceFunctions.find(line.substr(start, i - start));
      if (it != deviceFunctions.end())
        named.push_back(it->second);
    }
    at = next;
  }
  return named;
}

} // namespace

std::vector<std::string> entryPtx(const std::string &modulePtx,
                                  const std::vector<std::string> &entries) {
  std::string_view ptx(modulePtx);
  std::vector<Function> functions = functionsOf(ptx);
  std::unordered_map<std::string_view, size_t> deviceFunctions, entryFunctions;
  for (size_t i = 0; i < functions.size(); ++i)
    if (functions[i].definition)
      (functions[i].entry ? entryFunctions
                          : deviceFunctions)[functions[i].name] = i;
  // What each definition's body calls (or takes the address of), and what
  // the text around the functions names: a global's initializer (a table
  // of device functions) or an alias, which every part keeps.
  std::vector<std::vector<size_t>> callees(functions.size());
  std::vector<size_t> roots;
  size_t between = 0;
  for (size_t i = 0; i < functions.size(); ++i) {
    const Function &f = functions[i];
    std::vector<size_t> named =
        namedIn(ptx.substr(between, f.begin - between), deviceFunctions);
    roots.insert(roots.end(), named.begin(), named.end());
    between = f.end;
    if (!f.definition)
      continue;
    std::string_view text = ptx.substr(f.begin, f.end - f.begin);
    callees[i] = namedIn(text.substr(text.find('{')), deviceFunctions);
  }
  std::vector<size_t> tail = namedIn(ptx.substr(between), deviceFunctions);
  roots.insert(roots.end(), tail.begin(), tail.end());

  std::vector<std::string> results;
  for (const std::string &name : entries) {
    auto found = entryFunctions.find(name);
    if (found == entryFunctions.end())
      internalError(fmt::format("the module defines no kernel '{}'", name));
    // The entry and every device function it or the kept text reaches.
    std::vector<char> kept(functions.size(), 0);
    std::vector<size_t> work = roots;
    work.push_back(found->second);
    for (size_t f : work)
      kept[f] = 1;
    while (!work.empty()) {
      size_t f = work.back();
      work.pop_back();
      for (size_t callee : callees[f])
        if (!kept[callee]) {
          kept[callee] = 1;
          work.push_back(callee);
        }
    }
    std::string result;
    size_t copied = 0;
    for (size_t i = 0; i < functions.size(); ++i) {
      const Function &f = functions[i];
      if (!f.definition || kept[i])
        continue;
      result.append(ptx.substr(copied, f.begin - copied));
      copied = f.end;
    }
    result.append(ptx.substr(copied));
    results.push_back(std::move(result));
  }
  return results;
}

} // namespace moec::detail::cuda
