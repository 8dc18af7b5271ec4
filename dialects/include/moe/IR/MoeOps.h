//===- MoeOps.h - moe dialect operations -----------------------*- C++ -*-===//

#ifndef MOE_IR_MOEOPS_H
#define MOE_IR_MOEOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "moe/IR/MoeDialect.h"
#include "moe/IR/SymbolicShape.h"

#include "moe/IR/MoeEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "moe/IR/MoeAttrs.h.inc"

#include "moe/IR/MoeInterfaces.h.inc"

namespace mlir::moe {
class KernelKindAttr;
/// The custom<KernelKind> directive of moe.kernel: the kind as a keyword.
ParseResult parseKernelKind(OpAsmParser &parser, KernelKindAttr &kind);
void printKernelKind(OpAsmPrinter &printer, Operation *op,
                     KernelKindAttr kind);
} // namespace mlir::moe

#define GET_OP_CLASSES
#include "moe/IR/MoeOps.h.inc"

namespace mlir::moe {

/// Names of the attributes that bind entry-function arguments and results to
/// the model's state and inputs (see DESIGN.md, "bundle").
namespace attrs {
inline constexpr llvm::StringLiteral kParam = "moe.param";
inline constexpr llvm::StringLiteral kState = "moe.state";
inline constexpr llvm::StringLiteral kInput = "moe.input";
inline constexpr llvm::StringLiteral kDims = "moe.dims";
inline constexpr llvm::StringLiteral kOutput = "moe.output";
inline constexpr llvm::StringLiteral kUpdate = "moe.update";
inline constexpr llvm::StringLiteral kEntry = "moe.entry";
inline constexpr llvm::StringLiteral kObjective = "moe.objective";
inline constexpr llvm::StringLiteral kModel = "moe.model";
inline constexpr llvm::StringLiteral kTraining = "moe.training";
inline constexpr llvm::StringLiteral kData = "moe.data";
inline constexpr llvm::StringLiteral kGenerate = "moe.generate";
/// An op's position in an execution plan (moe-lower-to-plan).
inline constexpr llvm::StringLiteral kStep = "moe.step";
} // namespace attrs

/// Whether `v` is a 0-d tensor (losses, learning rates, step counts).
bool isScalarTensor(Value v);

/// Whether `op` is computed element by element (arith float ops,
/// activation, dropout, cast, and their gradients): the ops that fuse into
/// other kernels' prologues and epilogues.
bool isElementwiseOp(Operation *op);

/// Whether `b` may share one GEMM launch with `a` as a projection of the
/// same input (decoding's query, key and value): the same x, weight layout
/// and element types, so that one tile computes both.
bool projectsSameInput(LinearOp a, LinearOp b);

/// Computes the symbolic shape of every value of an op that has no moe
/// interface: func.return, tensor constants and the elementwise float arith
/// ops the runtime implements (addf, subf, mulf, divf, negf, maximumf,
/// minimumf). Fails with a diagnostic for any other op.
LogicalResult inferUpstreamShapes(Operation *op,
                                  llvm::ArrayRef<SymShape> operands,
                                  llvm::SmallVectorImpl<SymShape> &results);

} // namespace mlir::moe

#endif // MOE_IR_MOEOPS_H
