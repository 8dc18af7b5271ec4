//===- Settings.h - typed, checked access to a node's settings --*- C++ -*-===//

#ifndef MOEC_FRONTEND_SETTINGS_H
#define MOEC_FRONTEND_SETTINGS_H

#include "moec/Frontend/SpecTree.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/SourceMgr.h"
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace moec::frontend {

/// Reports errors at source locations and remembers whether any happened.
class Reporter {
public:
  Reporter(llvm::SourceMgr &sourceMgr, mlir::MLIRContext *context)
      : sourceMgr(sourceMgr), context(context) {}

  mlir::InFlightDiagnostic error(llvm::SMLoc loc);
  bool failed() const { return anyError; }
  llvm::SourceMgr &sources() { return sourceMgr; }
  mlir::MLIRContext *getContext() { return context; }

private:
  llvm::SourceMgr &sourceMgr;
  mlir::MLIRContext *context;
  bool anyError = false;
};

/// Reads the settings of one node (or one call's arguments). Every getter
/// records the name it asked for, so that finish() can flag the settings
/// nobody asked for and suggest the nearest known name. On a bad value a
/// getter reports the error and returns the fallback.
class Settings {
public:
  /// `what` names the owner in messages: "model", "moe layer", "adamw".
  Settings(const std::vector<SpecSetting> &settings, std::string what,
           llvm::SMRange range, Reporter &reporter);

  const SpecValue *get(llvm::StringRef name);
  bool has(llvm::StringRef name) const;
  /// Reports a missing required setting and returns nullptr.
  const SpecValue *require(llvm::StringRef name);

  int64_t getInt(llvm::StringRef name, int64_t fallback,
                 int64_t min = std::numeric_limits<int64_t>::min(),
                 int64_t max = std::numeric_limits<int64_t>::max());
  /// A required positive integer; 0 after reporting when absent or bad.
  int64_t requirePositive(llvm::StringRef name);
  double getFloat(llvm::StringRef name, double fallback,
                  double min = -std::numeric_limits<double>::infinity(),
                  double max = std::numeric_limits<double>::infinity());
  bool getBool(llvm::StringRef name, bool fallback);
  std::string getString(llvm::StringRef name, std::string fallback);
  /// A symbol (or string) out of `allowed`; returns its index, or
  /// `fallback` when absent or bad.
  size_t getChoice(llvm::StringRef name, llvm::ArrayRef<llvm::StringRef> allowed,
                   size_t fallback);

  /// Reports every setting no getter asked for.
  void finish();

  /// Checks a value that is already fetched.
  std::optional<int64_t> asInt(const SpecValue &value, llvm::StringRef name);
  std::optional<double> asFloat(const SpecValue &value, llvm::StringRef name);

  llvm::SMRange range() const { return ownerRange; }
  Reporter &getReporter() { return reporter; }

private:
  void typeError(const SpecValue &value, llvm::StringRef name,
                 llvm::StringRef expected);

  const std::vector<SpecSetting> &settings;
  std::string what;
  llvm::SMRange ownerRange;
  Reporter &reporter;
  std::vector<std::string> known;
};

/// "an integer", "a float", "the name 'gelu'", ...
std::string describeValue(const SpecValue &value);

} // namespace moec::frontend

#endif // MOEC_FRONTEND_SETTINGS_H
