//===- MoeDialect.cpp - moe dialect registration -------------------------===//

#include "moe/IR/MoeDialect.h"
#include "moe/IR/MoeOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::moe;

#include "moe/IR/MoeDialect.cpp.inc"
#include "moe/IR/MoeEnums.cpp.inc"

// GCC 12 takes the generated parser's FailureOr<std::optional<int64_t>>
// results for maybe uninitialized once inlined; they are set before use.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define GET_ATTRDEF_CLASSES
#include "moe/IR/MoeAttrs.cpp.inc"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

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
