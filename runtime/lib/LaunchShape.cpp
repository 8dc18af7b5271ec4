//===- LaunchShape.cpp - a launch's grid and scalars at run time ----------===//

#include "LaunchShape.h"

#include <fmt/format.h>

namespace moec::detail {

Error launchError(const ProgramDesc &program, size_t group,
                  const LaunchDesc &launch, const std::string &what) {
  return Error(fmt::format("program '{}', group {}, kernel '{}': {}",
                           program.name, group, launch.kernel, what));
}

LaunchShape resolveLaunch(const ProgramDesc &program, size_t group,
                          const LaunchDesc &launch, const SymbolValues &symbols,
                          const std::array<int64_t, 3> &maxGrid) {
  LaunchShape shape;
  for (int i = 0; i < 3; ++i) {
    const GridDimDesc &dim = launch.grid[i];
    std::optional<int64_t> extent = dim.extent.evaluate(symbols);
    if (!extent)
      throw launchError(program, group, launch,
                        fmt::format("the grid extent {} depends on an unbound "
                                    "symbol or overflows",
                                    dim.extent.str()));
    int64_t blocks = 0;
    if (*extent > 0)
      blocks = (*extent - 1) / dim.perBlock + 1 + dim.extra;
    if (blocks > maxGrid[i])
      throw launchError(program, group, launch,
                        fmt::format("{} blocks in grid dimension {}, more "
                                    "than the {} a grid may have",
                                    blocks, i, maxGrid[i]));
    shape.grid[i] = static_cast<unsigned>(blocks);
    shape.block[i] = static_cast<unsigned>(launch.block[i]);
  }
  shape.scalars.reserve(launch.scalars.size());
  for (const DimExpr &scalar : launch.scalars) {
    std::optional<int64_t> value = scalar.evaluate(symbols);
    if (!value)
      throw launchError(program, group, launch,
                        fmt::format("the scalar {} depends on an unbound "
                                    "symbol or overflows",
                                    scalar.str()));
    shape.scalars.push_back(*value);
  }
  return shape;
}

} // namespace moec::detail
