//===- LaunchShape.cpp - a launch's grid and scalars at run time ----------===//

#include "LaunchShape.h"

#include <fmt/format.h>

namespace moec::detail {

Error launchError(const ProgramDesc &program, size_t group,
                  const LaunchDesc &launch, const std::string &what) {
  return Error(fmt::format("program '{}', group {}, kernel '{}': {}",
                           program.name, group, launch.kernel, what));
}

int64_t evaluateLaunchSize(const ProgramDesc &program, size_t group,
                           const LaunchDesc &launch, const DimExpr &expr,
                           const SymbolValues &symbols, const char *what) {
  std::optional<int64_t> value = expr.evaluate(symbols);
  if (!value)
    throw launchError(program, group, launch,
                      fmt::format("{} {} depends on an unbound symbol or "
                                  "overflows",
                                  what, expr.str()));
  return *value;
}

LaunchShape resolveLaunch(const ProgramDesc &program, size_t group,
                          const LaunchDesc &launch, const SymbolValues &symbols,
                          const std::array<int64_t, 3> &maxGrid) {
  LaunchShape shape;
  for (int i = 0; i < 3; ++i) {
    const GridDimDesc &dim = launch.grid[i];
    int64_t extent = evaluateLaunchSize(program, group, launch, dim.extent,
                                        symbols, "the grid extent");
    int64_t blocks = 0;
    if (extent > 0)
      blocks = (extent - 1) / dim.perBlock + 1 + dim.extra;
    if (blocks > maxGrid[i])
      throw launchError(program, group, launch,
                        fmt::format("{} blocks in grid dimension {}, more "
                                    "than the {} a grid may have",
                                    blocks, i, maxGrid[i]));
    shape.grid[i] = static_cast<unsigned>(blocks);
    shape.block[i] = static_cast<unsigned>(launch.block[i]);
  }
  shape.scalars.reserve(launch.scalars.size());
  for (const DimExpr &scalar : launch.scalars)
    shape.scalars.push_back(evaluateLaunchSize(program, group, launch, scalar,
                                               symbols, "the scalar"));
  return shape;
}

} // namespace moec::detail
