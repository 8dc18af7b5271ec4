//===- LaunchShape.h - a launch's grid and scalars at run time --*- C++ -*-===//
//
// The bundle gives grids and kernel scalars as size expressions over the
// program's symbols (B, S, ...). The cuda and emu devices both resolve them
// here for the sizes of one run, so that they launch exactly the same
// blocks.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_LAUNCHSHAPE_H
#define MOEC_RUNTIME_LAUNCHSHAPE_H

#include "BundleData.h"
#include "moec/Error.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace moec::detail {

/// The largest grid extent in each dimension (CUDA's limits).
constexpr std::array<int64_t, 3> kMaxGrid = {2147483647, 65535, 65535};

struct LaunchShape {
  std::array<unsigned, 3> grid = {1, 1, 1};
  std::array<unsigned, 3> block = {1, 1, 1};
  std::vector<int64_t> scalars;
  /// Some grid dimension has no block: the launch does nothing.
  bool empty() const { return grid[0] == 0 || grid[1] == 0 || grid[2] == 0; }
};

/// An error about one launch: "program 'P', group G, kernel 'K': what".
Error launchError(const ProgramDesc &program, size_t group,
                  const LaunchDesc &launch, const std::string &what);

/// Evaluates one of the launch's size expressions (`what`: "the grid
/// extent", "the scalar", "the GEMM size") under `symbols`; throws
/// launchError() for an unbound symbol or an overflow.
int64_t evaluateLaunchSize(const ProgramDesc &program, size_t group,
                           const LaunchDesc &launch, const DimExpr &expr,
                           const SymbolValues &symbols, const char *what);

/// Evaluates the launch's grid (ceil(extent / per_block) + extra blocks per
/// dimension; none where the extent is not positive) and scalars under
/// `symbols`. Throws launchError() for an unbound symbol, an overflow or a
/// grid beyond `maxGrid`.
LaunchShape resolveLaunch(const ProgramDesc &program, size_t group,
                          const LaunchDesc &launch, const SymbolValues &symbols,
                          const std::array<int64_t, 3> &maxGrid = kMaxGrid);

} // namespace moec::detail

#endif // MOEC_RUNTIME_LAUNCHSHAPE_H
