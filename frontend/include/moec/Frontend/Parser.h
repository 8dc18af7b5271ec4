//===- Parser.h - parse a .moe file into an AST -----------------*- C++ -*-===//
//
// The parser checks syntax only. Its grammar is in frontend/GRAMMAR.md, and
// each production is repeated on the function that parses it in
// lib/Parser.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTEND_PARSER_H
#define MOEC_FRONTEND_PARSER_H

#include "moec/Frontend/AST.h"
#include "moec/Frontend/Diagnostics.h"
#include <memory>

namespace moec::frontend {

/// Parses the main buffer of `diags`' SourceMgr. Syntax errors are reported
/// through `diags`; after one, the parser skips to the next statement and
/// goes on, so the returned tree holds every statement that parsed. Returns
/// null only when the file cannot be read as this language at all (an
/// unsupported version line).
std::unique_ptr<ast::File> parseFile(DiagnosticReporter &diags);

} // namespace moec::frontend

#endif // MOEC_FRONTEND_PARSER_H
