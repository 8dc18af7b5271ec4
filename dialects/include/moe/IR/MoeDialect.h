//===- MoeDialect.h - moe dialect ------------------------------*- C++ -*-===//

#ifndef MOE_IR_MOEDIALECT_H
#define MOE_IR_MOEDIALECT_H

#include "mlir/IR/Dialect.h"

#include "moe/IR/MoeDialect.h.inc"

#endif // MOE_IR_MOEDIALECT_H
