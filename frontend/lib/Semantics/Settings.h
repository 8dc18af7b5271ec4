//===- Settings.h - typed, checked access to a node's settings --*- C++ -*-===//
//
// Reads the settings of one section, layer or call through its entry in the
// language's table (LanguageSchema.h): the table gives each setting's type,
// default and range, so Sema writes only the checks that relate settings to
// each other. Every error is reported at the value's line and column.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTEND_SETTINGS_H
#define MOEC_FRONTEND_SETTINGS_H

#include "moec/Frontend/LanguageSchema.h"
#include "moe/IR/MoeOps.h"
#include "moec/Frontend/SpecTree.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/SourceMgr.h"
#include <optional>
#include <string>
#include <vector>

namespace moec::frontend {

/// Reports errors at source locations and remembers whether any happened.
class Reporter {
public:
  /// While it lives, an error repeated at the same place is dropped: the
  /// blocks `repeat N` unrolls are checked one by one, and a mistake in
  /// their source must be reported once.
  Reporter(llvm::SourceMgr &sourceMgr, mlir::MLIRContext *context);

  mlir::InFlightDiagnostic error(llvm::SMLoc loc);
  bool failed() const { return anyError; }
  llvm::SourceMgr &sources() { return sourceMgr; }
  mlir::MLIRContext *getContext() { return context; }

private:
  llvm::SourceMgr &sourceMgr;
  mlir::MLIRContext *context;
  bool anyError = false;
  llvm::StringSet<> reported;
  mlir::ScopedDiagnosticHandler dropRepeats;
};

/// The settings of one node (or one call's arguments), checked against
/// `owner`'s table. Asking for a setting the table lacks is an internal
/// error. On a bad value a getter reports the error and returns the
/// default.
class Settings {
public:
  Settings(const std::vector<SpecSetting> &settings, const OwnerInfo &owner,
           llvm::SMRange range, Reporter &reporter);

  const SpecValue *get(llvm::StringRef name) const;
  bool has(llvm::StringRef name) const { return get(name) != nullptr; }
  /// Reports a missing required setting and returns nullptr.
  const SpecValue *require(llvm::StringRef name);

  /// An Integer setting: its value, or the table's default.
  int64_t getInt(llvm::StringRef name);
  /// An Integer setting whose default Sema computes (`computed`).
  int64_t getInt(llvm::StringRef name, int64_t computed);
  double getFloat(llvm::StringRef name);
  double getFloat(llvm::StringRef name, double computed);
  bool getBool(llvm::StringRef name);
  /// A Name setting: the index of its value among the table's choices
  /// (the default's index when absent or bad).
  size_t getChoice(llvm::StringRef name);
  /// A Name setting whose choices are the spellings of dialect enum E.
  template <typename E> E getEnum(llvm::StringRef name) {
    return *mlir::moe::symbolizeEnum<E>(info(name).choices[getChoice(name)]);
  }
  /// A Call setting: the chosen name when it is one of the table's choices
  /// (else a located error and nullopt). Absent: the default.
  std::optional<std::string> getCallName(llvm::StringRef name);

  /// Reports every setting the table does not know. Every setting of the
  /// table must have been read by now: a table entry the checker ignores
  /// would be accepted silently and documented wrongly (an internal error,
  /// checked only when the spec has no error so far).
  void finish();

  /// Checks a value that is already fetched.
  std::optional<int64_t> asInt(const SpecValue &value, llvm::StringRef name);
  std::optional<double> asFloat(const SpecValue &value, llvm::StringRef name);

  llvm::SMRange range() const { return ownerRange; }
  Reporter &getReporter() { return reporter; }
  const OwnerInfo &schema() const { return owner; }

private:
  const SettingInfo &info(llvm::StringRef name) const;
  void typeError(const SpecValue &value, llvm::StringRef name,
                 llvm::StringRef expected);
  /// Reports `v` outside the table's range for `s`; true when in range.
  bool inRange(const SettingInfo &s, const SpecValue &value, double v);

  const std::vector<SpecSetting> &settings;
  const OwnerInfo &owner;
  /// The settings the checker has read (get() records them).
  mutable std::vector<std::string> read;
  llvm::SMRange ownerRange;
  Reporter &reporter;
};

/// "an integer", "a float", "the name 'gelu'", ...
std::string describeValue(const SpecValue &value);

/// The settings a call value carries (none for a bare name or no value).
const std::vector<SpecSetting> &callArguments(const SpecValue *value);

} // namespace moec::frontend

#endif // MOEC_FRONTEND_SETTINGS_H
