//===- MoeDialect.cpp - moe dialect registration -------------------------===//

#include "moe/IR/MoeDialect.h"
#include "moe/IR/MoeOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::moe;

#include "moe/IR/MoeDialect.cpp.inc"
#include "moe/IR/MoeEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "moe/IR/MoeAttrs.cpp.inc"

void MoeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "moe/IR/MoeOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "moe/IR/MoeAttrs.cpp.inc"
      >();
}
