//===- LanguageSchema.h - every setting of the .moe language ----*- C++ -*-===//
//
// The one table of what each section, layer and call of the language takes:
// every setting's type, default, allowed values and meaning. Sema reads
// settings through it (Settings.h), so a default or a range is written
// once; the language reference (frontend/LANGUAGE.md, `moec language`) is
// generated from it, and a test holds the committed page to the table.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTEND_LANGUAGESCHEMA_H
#define MOEC_FRONTEND_LANGUAGESCHEMA_H

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moec::frontend {

/// The widest attention head the kernels take: moe-tile-kernels shrinks an
/// attention's query and key tiles until their rows fit the 48 KiB of
/// static shared memory a kernel has, down to 4 queries by 8 keys, which
/// hold rows of at most this many dims.
constexpr int64_t kWidestHeadDim = 509;

enum class SettingType {
  Integer, ///< 4, 2 * d
  Number,  ///< 3e-4, 1 (integers are accepted)
  Flag,    ///< true, false
  Text,    ///< "file.txt"
  Name,    ///< one of `choices`, written bare (gelu_tanh)
  Call,    ///< one of `choices`, bare or called with settings: adamw(lr = 1e-3)
  Pair,    ///< a list of two numbers: [0.9, 0.98]
  TextList, ///< a list of strings: ["neg", "pos"]
  CallList, ///< a list of calls of one of `choices`: [group("g", ...)]
};

/// A range limit as messages and the reference print it: "0.5", "2^31".
std::string limitText(double v);

struct SettingInfo {
  std::string name;
  SettingType type = SettingType::Integer;
  /// The default as the reference shows it ("1e-5", "heads", "none").
  std::string defaultText;
  /// A default Sema computes from other settings: the getter is given it.
  bool computed = false;
  bool required = false;
  /// Integer and Number: the accepted range, inclusive.
  std::optional<double> min, max;
  /// Name and Call: the accepted names. For a Call, each names an owner
  /// whose id is "<setting> <name>" (e.g. "capacity switch").
  std::vector<std::string> choices;
  std::string help;
};

/// A section, layer or call of the language and the settings it takes.
struct OwnerInfo {
  /// "model", "layer moe", "capacity switch", "optimizer adamw".
  std::string id;
  /// How messages name it: "the model", "the moe layer", "capacity
  /// 'switch'".
  std::string what;
  /// A sentence for the reference.
  std::string summary;
  std::vector<SettingInfo> settings;

  /// The setting called `name`, or null.
  const SettingInfo *find(std::string_view name) const;
  /// Every setting's name, in table order.
  std::vector<std::string> names() const;
};

/// The owner `id`; an unknown id is an internal error.
const OwnerInfo &schemaOf(std::string_view id);

/// Every owner, in the order the reference lists them.
const std::vector<OwnerInfo> &languageSchema();

/// The language reference, as Markdown.
std::string languageReference();

} // namespace moec::frontend

#endif // MOEC_FRONTEND_LANGUAGESCHEMA_H
