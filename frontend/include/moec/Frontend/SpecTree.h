//===- SpecTree.h - an evaluated .moe file ----------------------*- C++ -*-===//
//
// The parser turns `.moe` text into an AST; the evaluator folds constants,
// expands `repeat` and `if`, and yields this tree of plain values. Nothing
// here knows which settings a layer accepts: Sema checks that against the
// settings table, so the language grows by teaching the table new names,
// not by changing the grammar.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTEND_SPECTREE_H
#define MOEC_FRONTEND_SPECTREE_H

#include "llvm/Support/SMLoc.h"
#include <cstdint>
#include <string>
#include <vector>

namespace moec::frontend {

struct SpecSetting;

/// A value after evaluation.
struct SpecValue {
  enum class Kind {
    Int,    ///< 4, 2 * d
    Float,  ///< 3e-4, d / 3
    Bool,   ///< true, i % 2 == 1
    String, ///< "data/tiny.txt"
    Symbol, ///< a bare name that is no constant: gelu, none, bpr
    Call,   ///< adamw(lr = 1e-3): `name` and `args`
    List,   ///< [1, 2, 3]: `list`
  };
  Kind kind = Kind::Int;
  int64_t intValue = 0;
  double floatValue = 0;
  bool boolValue = false;
  /// String contents, symbol name or call name.
  std::string text;
  /// For a Symbol: the nearest constant name in scope when it looks like a
  /// misspelt one (empty otherwise), so a consumer expecting a number can
  /// say "did you mean".
  std::string suggestion;
  std::vector<SpecSetting> args;
  std::vector<SpecValue> list;
  llvm::SMRange range;
};

/// `name = value`, either in a body or as a call argument. Positional call
/// arguments have an empty name.
struct SpecSetting {
  std::string name;
  llvm::SMRange nameRange;
  SpecValue value;
};

/// A section (`model lm { ... }`), a layer statement (`attention(heads = 4)`,
/// optionally with a `{ ... }` body) or a block made by `repeat`.
struct SpecNode {
  /// "model", "train", "data" for sections; the statement's name for a
  /// layer ("attention", "moe", "ffn", ...); "block" for each repetition of
  /// a `repeat` body.
  std::string kind;
  /// The optional name after a section keyword (`model lm` -> "lm").
  std::string label;
  llvm::SMRange range;
  /// Call arguments and body settings, in source order. A name given twice
  /// is an error reported by the evaluator.
  std::vector<SpecSetting> settings;
  /// Nested layer statements and blocks, in source order, `if` already
  /// resolved and `repeat` expanded.
  std::vector<SpecNode> children;
  /// For a block made by `repeat`: its 0-based repetition index.
  int64_t index = -1;
};

struct SpecFile {
  /// The version from the first line, e.g. "1".
  std::string version;
  llvm::SMRange versionRange;
  std::vector<SpecNode> sections;
};

} // namespace moec::frontend

#endif // MOEC_FRONTEND_SPECTREE_H
