// RUN: moec-opt %s -moe-fuse-kernels -moe-tile-kernels=arch=sm_80 -moe-lower-to-plan | moec-translate --moe-to-cuda | FileCheck %s

// The X-MoE gate's kernels: row scaling on a 16-lane group per row (16
// rows of a 256-thread block), and the finite fill as a fixed grid of 64
// blocks finding the minimum (ticket: the last block combines them) and a
// grid-stride fill. Storage types come from the values (bf16 here, the
// rescaled parameter f32).

module {
  func.func @gate(%wg: tensor<8x16xf32> {moe.input = "wg"},
                  %x: tensor<?x16xbf16> {moe.input = "x", moe.dims = ["T", 16]},
                  %l: tensor<?x8xbf16> {moe.input = "l", moe.dims = ["T", 8]},
                  %dl: tensor<?x8xbf16> {moe.input = "dl", moe.dims = ["T", 8]})
      -> (tensor<8x16xf32> {moe.output = "r"}, tensor<?x16xbf16> {moe.output = "n"},
          tensor<?x16xbf16> {moe.output = "dn"}, tensor<?x8xbf16> {moe.output = "f"},
          tensor<?x8xbf16> {moe.output = "df"})
      attributes {moe.entry = "gate"} {
    %r = moe.rescale_rows %wg {norm = 1.5 : f64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %n = moe.normalize_rows %x : (tensor<?x16xbf16>) -> tensor<?x16xbf16>
    %dn = moe.normalize_rows_grad %x, %n {eps = 1.0e-3 : f64} : (tensor<?x16xbf16>, tensor<?x16xbf16>) -> tensor<?x16xbf16>
    %f = moe.finite_or_min %l : (tensor<?x8xbf16>) -> tensor<?x8xbf16>
    %df = moe.finite_or_min_grad %l, %dl : (tensor<?x8xbf16>, tensor<?x8xbf16>) -> tensor<?x8xbf16>
    return %r, %n, %dn, %f, %df : tensor<8x16xf32>, tensor<?x16xbf16>, tensor<?x16xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>
  }
}

// CHECK-LABEL: // ===== program gate
// CHECK:      // group 0 (row_scale): moe.rescale_rows
// CHECK:      const moec::gptr<const float> x0 = moec::bufferArg<const float>(p, 0);
// CHECK:      moec::scaleRows<16, 16, 16, true>(rows, 1.5f, x0, y1);
// CHECK:      // group 1 (row_scale): moe.normalize_rows
// CHECK:      moec::scaleRows<16, 16, 16, false>(rows, 9.99999975e-05f, x0, y1);
// CHECK:      // group 2 (row_scale_grad): moe.normalize_rows_grad
// CHECK:      const moec::gptr<const moec::bf16> x0 = moec::bufferArg<const moec::bf16>(p, 0);
// CHECK:      moec::normalizeRowsGrad<16, 16, 16>(rows, 0.00100000005f, x0, dy1, dx2);
// CHECK:      // group 3 (finite_or_min): moe.finite_or_min
// CHECK:      moek_gate_g3_min(const moec::KernelParams p) {
// CHECK:      moec::finiteMinPass<256>(n, x0, moec::gptr<const moec::bf16>(), {{.*}});
// CHECK:      moek_gate_g3_fill(const moec::KernelParams p) {
// CHECK:      moec::finiteFill(n, x1,
// CHECK:      // group 4 (finite_or_min_grad): moe.finite_or_min_grad
// CHECK:      moec::finiteMinPass<256>(n, x0, dy1, {{.*}});
// CHECK:      moec::finiteFillGrad(n, x2, dy3,

// The parameter's 8 rows in one block; the input's T rows 16 to a block.
// CHECK:      // launch moek_gate_g0 grid(ceil(8/16), 1, 1) block(256)
// CHECK:      // launch moek_gate_g1 grid(ceil(T/16), 1, 1) block(256)
// CHECK:      // launch moek_gate_g2 grid(ceil(T/16), 1, 1) block(256)
// CHECK:      // launch moek_gate_g3_min grid(64, 1, 1) block(256)
// CHECK:      // launch moek_gate_g3_fill grid(ceil(8*T/1024), 1, 1) block(256)
// CHECK:      // launch moek_gate_g4_min grid(64, 1, 1) block(256)
// CHECK:      // launch moek_gate_g4_fill grid(ceil(8*T/1024), 1, 1) block(256)
