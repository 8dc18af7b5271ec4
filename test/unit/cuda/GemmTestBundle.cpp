//===- GemmTestBundle.cpp - a program of one library GEMM -----------------===//

#include "GemmTestBundle.h"
#include "CudaTestUtil.h"
#include "moec/support/DeviceLibrary.h"

#include <cmath>

namespace moec::test {

using namespace detail;

namespace {

DimExpr dim(const std::string &text) { return *DimExpr::parse(text); }

/// Element (i, j) of a matrix stored row-major (p[i*ld + j]) or
/// column-major (p[j*ld + i]): gemm.cuh's RowMajor and ColMajor loaders.
double at(const Tensor &t, bool colMajor, int64_t ld, int64_t i, int64_t j) {
  return t.at(colMajor ? j * ld + i : i * ld + j);
}

} // namespace

GemmCase linearGemmCase() {
  GemmCase c{"B", "3", "5", false, false, 5, 3};
  c.aDims = {dim("B"), DimExpr(5)};
  c.bDims = {DimExpr(5), DimExpr(3)};
  return c;
}

BundleData gemmBundle(const GemmCase &c) {
  BundleData bundle;
  bundle.origin = "gemm.bundle.json";
  bundle.deviceLibraryHash = std::string(deviceLibraryHash());
  std::string unit = scaleKernelSource("moek_test_gemm", "gemm");
  bundle.kernels["moek_test_gemm"] = {
      "moek_test_gemm", unit.substr(deviceLibrarySource().size() + 1)};
  ProgramDesc &p = bundle.programs["forward"];
  p.name = "forward";
  p.buffers = {{BufferKind::Input, c.in, c.aDims, "a", {}},
               {BufferKind::Input, c.in, c.bDims, "b", {}},
               {BufferKind::Input, c.out, {dim(c.n)}, "bias", {}},
               {BufferKind::Temp, c.out, {dim(c.m), dim(c.n)}, "", {}}};
  p.inputs = {{"a", 0}, {"b", 1}, {"bias", 2}};
  p.outputs = {{"d", 3}};
  LaunchDesc l;
  l.kernel = "moek_test_gemm";
  l.grid[0] = {dim(c.m), 64};
  l.block[0] = 128;
  l.buffers = {0, 1, c.bias ? 2 : -1, 3};
  GemmDesc g;
  g.library = true;
  g.why = "dense GEMM, nothing fused";
  g.m = dim(c.m);
  g.n = dim(c.n);
  g.k = dim(c.k);
  g.a = {0, c.aCol, c.lda};
  g.b = {1, c.bCol, c.ldb};
  g.d = 3;
  g.bias = c.bias ? 2 : -1;
  g.compute = "f32";
  l.gemm = g;
  GroupDesc group;
  group.kind = "gemm";
  group.launches.push_back(l);
  p.groups.push_back(group);
  return bundle;
}

Tensor gemmOperand(DType dtype, Shape shape, double phase) {
  Tensor t(DType::F32, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = float(std::sin(0.7 * double(i) + phase) + 0.1);
  return dtype == DType::F32 ? t : t.to(dtype);
}

GemmOperands gemmOperands(const GemmCase &c, int64_t batch, double phase) {
  SymbolValues symbols{{"B", batch}};
  auto shape = [&](const std::vector<DimExpr> &dims) {
    Shape s;
    for (const DimExpr &d : dims)
      s.push_back(*d.evaluate(symbols));
    return s;
  };
  GemmOperands o;
  o.m = *dim(c.m).evaluate(symbols);
  o.n = *dim(c.n).evaluate(symbols);
  o.k = *dim(c.k).evaluate(symbols);
  o.a = gemmOperand(c.in, shape(c.aDims), 0.3 + phase);
  o.b = gemmOperand(c.in, shape(c.bDims), 1.1 + phase);
  o.bias = gemmOperand(c.out, {o.n}, 2.0 + phase);
  return o;
}

double gemmExpected(const GemmCase &c, const GemmOperands &o, int64_t i,
                    int64_t j) {
  double want = c.bias ? at(o.bias, false, o.n, 0, j) : 0;
  for (int64_t l = 0; l < o.k; ++l)
    want += at(o.a, c.aCol, c.lda, i, l) * at(o.b, c.bCol, c.ldb, l, j);
  return want;
}

} // namespace moec::test
