//===- EntryPoints.h - finding and describing entry functions ---*- C++ -*-===//

#ifndef MOEC_TRANSFORMS_ENTRYPOINTS_H
#define MOEC_TRANSFORMS_ENTRYPOINTS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "moe/IR/MoeOps.h"
#include "llvm/ADT/DenseMap.h"
#include <string>

namespace mlir::moe {

/// The function whose `moe.entry` is `entry`, or null.
func::FuncOp findEntry(ModuleOp module, StringRef entry);

/// The parameters one training program updates: every trainable one (joint
/// training), or under block coordinate descent those in the group phi (G
/// steps) or outside it (F steps).
class ParamSelection {
public:
  ParamSelection() = default;
  static ParamSelection inside(StringRef group) {
    return ParamSelection(group, Which::Inside);
  }
  static ParamSelection outside(StringRef group) {
    return ParamSelection(group, Which::Outside);
  }
  /// Whether `param` is trainable and selected.
  bool contains(ParamOp param) const;

private:
  enum class Which { All, Inside, Outside };
  ParamSelection(StringRef group, Which which)
      : group(group.str()), which(which) {}
  std::string group;
  Which which = Which::All;
};

/// An objective, the gradient program built from it and the train step
/// built from that, with the parameters they train.
struct TrainingProgram {
  std::string objective, backward, trainStep;
  ParamSelection trains;
};

/// The training programs of `module`: loss -> backward -> train_step over
/// every trainable parameter; with moe.training's `phases`, that over the
/// parameters outside the phases' group (F steps) and loss_g -> backward_g
/// -> train_step_g over those in it (G steps).
SmallVector<TrainingProgram> trainingPrograms(ModuleOp module);

/// The module's parameter declarations by name, gathered once: looking each
/// argument's symbol up in the module would make a model of N layers cost
/// N^2.
class ParamTable {
public:
  explicit ParamTable(ModuleOp module);

  /// The `moe.param` declaration argument `index` of `func` is bound to, or
  /// null when it is not a parameter.
  ParamOp boundParam(func::FuncOp func, unsigned index) const;

  /// Whether argument `index` is a parameter that training updates (one of
  /// `selection`).
  bool isTrainableParam(func::FuncOp func, unsigned index,
                        const ParamSelection &selection = {}) const;

  /// The declaration of parameter `name`, or null.
  ParamOp lookup(StringAttr name) const { return params.lookup(name); }

private:
  llvm::DenseMap<StringAttr, ParamOp> params;
};

/// Clones `source` as a new function `name` (placed after it) with entry
/// kind `entry`; the body, argument and result attributes are copied.
func::FuncOp cloneEntry(func::FuncOp source, StringRef name, StringRef entry);

} // namespace mlir::moe

#endif // MOEC_TRANSFORMS_ENTRYPOINTS_H
