//===- EntryPoints.cpp - finding and describing entry functions -----------===//

#include "moec/Transforms/EntryPoints.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::moe;

func::FuncOp mlir::moe::findEntry(ModuleOp module, StringRef entry) {
  for (auto func : module.getOps<func::FuncOp>())
    if (auto kind = func->getAttrOfType<StringAttr>(attrs::kEntry);
        kind && kind.getValue() == entry)
      return func;
  return {};
}

ParamTable::ParamTable(ModuleOp module) {
  for (ParamOp param : module.getOps<ParamOp>())
    params.try_emplace(param.getSymNameAttr(), param);
}

ParamOp ParamTable::boundParam(func::FuncOp func, unsigned index) const {
  auto ref = func.getArgAttrOfType<FlatSymbolRefAttr>(index, attrs::kParam);
  if (!ref)
    return {};
  return params.lookup(ref.getAttr());
}

bool ParamSelection::contains(ParamOp param) const {
  if (param.getFrozen())
    return false;
  if (which == Which::All)
    return true;
  bool inGroup = param.getGroup() && *param.getGroup() == group;
  return inGroup == (which == Which::Inside);
}

SmallVector<TrainingProgram> mlir::moe::trainingPrograms(ModuleOp module) {
  auto training = module->getAttrOfType<DictionaryAttr>(attrs::kTraining);
  auto phases =
      training ? training.getAs<DictionaryAttr>("phases") : DictionaryAttr();
  auto group = phases ? phases.getAs<StringAttr>("group") : StringAttr();
  if (!group)
    return {{"loss", "backward", "train_step", ParamSelection()}};
  return {{"loss", "backward", "train_step",
           ParamSelection::outside(group.getValue())},
          {"loss_g", "backward_g", "train_step_g",
           ParamSelection::inside(group.getValue())}};
}

bool ParamTable::isTrainableParam(func::FuncOp func, unsigned index,
                                  const ParamSelection &selection) const {
  ParamOp param = boundParam(func, index);
  return param && selection.contains(param);
}

func::FuncOp mlir::moe::cloneEntry(func::FuncOp source, StringRef name,
                                   StringRef entry) {
  func::FuncOp clone = source.clone();
  clone.setSymName(name);
  clone->setAttr(attrs::kEntry, StringAttr::get(source.getContext(), entry));
  OpBuilder builder(source);
  builder.setInsertionPointAfter(source);
  builder.insert(clone);
  return clone;
}
