// RUN: moec-opt %s -moe-fuse-kernels -moe-tile-kernels=arch=sm_80 -moe-lower-to-plan | moec-translate --moe-to-cuda | FileCheck %s

// Batch norm's kernels (bf16 rows, f32 parameters and statistics, d = 40:
// two 32-column strips). Training: Welford partials over a grid of strips
// times 128 row chunks, a per-column merge that writes the running
// statistics' update, then a grid-stride normalisation. Eval reads the
// running statistics. The training gradient recomputes the statistics
// (the forward's moments kernel, shared), sums dy and dy * x_hat in the
// same layout and applies dx; the eval gradient without dgamma and dbeta
// read needs no sums.

module {
  func.func @bn(%x: tensor<?x?x40xbf16> {moe.input = "x", moe.dims = ["B", "S", 40]},
                %m: tensor<?x?xi32> {moe.input = "mask", moe.dims = ["B", "S"]},
                %g: tensor<40xf32> {moe.input = "g"}, %b: tensor<40xf32> {moe.input = "b"},
                %rm: tensor<40xf32> {moe.input = "rm"}, %rv: tensor<40xf32> {moe.input = "rv"},
                %dy: tensor<?x?x40xbf16> {moe.input = "dy", moe.dims = ["B", "S", 40]})
      -> (tensor<?x?x40xbf16> {moe.output = "y"}, tensor<40xf32> {moe.output = "new_mean"},
          tensor<40xf32> {moe.output = "new_var"}, tensor<?x?x40xbf16> {moe.output = "e"},
          tensor<?x?x40xbf16> {moe.output = "dx"}, tensor<40xf32> {moe.output = "dgamma"},
          tensor<40xf32> {moe.output = "dbeta"}, tensor<?x?x40xbf16> {moe.output = "dxe"})
      attributes {moe.entry = "bn"} {
    %y, %nm, %nv = moe.batch_norm %x, %g, %b, %rm, %rv mask %m {training, momentum = 0.25 : f64} : (tensor<?x?x40xbf16>, tensor<40xf32>, tensor<40xf32>, tensor<40xf32>, tensor<40xf32>, tensor<?x?xi32>) -> (tensor<?x?x40xbf16>, tensor<40xf32>, tensor<40xf32>)
    %e, %em, %ev = moe.batch_norm %x, %g, %b, %rm, %rv : (tensor<?x?x40xbf16>, tensor<40xf32>, tensor<40xf32>, tensor<40xf32>, tensor<40xf32>) -> (tensor<?x?x40xbf16>, tensor<40xf32>, tensor<40xf32>)
    %dx, %dg, %db = moe.batch_norm_grad %x, %g, %rm, %rv, %dy mask %m {training} : (tensor<?x?x40xbf16>, tensor<40xf32>, tensor<40xf32>, tensor<40xf32>, tensor<?x?x40xbf16>, tensor<?x?xi32>) -> (tensor<?x?x40xbf16>, tensor<40xf32>, tensor<40xf32>)
    %dxe, %dge, %dbe = moe.batch_norm_grad %x, %g, %rm, %rv, %dy : (tensor<?x?x40xbf16>, tensor<40xf32>, tensor<40xf32>, tensor<40xf32>, tensor<?x?x40xbf16>) -> (tensor<?x?x40xbf16>, tensor<40xf32>, tensor<40xf32>)
    return %y, %nm, %nv, %e, %dx, %dg, %db, %dxe : tensor<?x?x40xbf16>, tensor<40xf32>, tensor<40xf32>, tensor<?x?x40xbf16>, tensor<?x?x40xbf16>, tensor<40xf32>, tensor<40xf32>, tensor<?x?x40xbf16>
  }
}

// CHECK-LABEL: // ===== program bn
// CHECK:      // group 0 (batch_norm): moe.batch_norm
// CHECK:      moek_bn_g0_moments(const moec::KernelParams p) {
// CHECK:      moec::bnMomentPartials<40, moec::bf16>(rows, x0, mask1, moec::bufferArg<float>(p, 2), moec::bufferArg<float>(p, 3), moec::bufferArg<float>(p, 4));
// CHECK:      moek_bn_g0_stats(const moec::KernelParams p) {
// CHECK:      moec::bnMomentsFinish<40, 128, float>(9.99999975e-06f, 0.25f, {{.*}}, running_mean2, running_var3, moec::bufferArg<float>(p, 4), new_mean4, new_var5);
// CHECK:      moek_bn_g0_apply(const moec::KernelParams p) {
// CHECK:      moec::bnApply<40, moec::bf16, float>(n, x6, moec::bufferArg<const float>(p, 4), gamma7, beta8, y9);
// CHECK:      // group 1 (batch_norm): moe.batch_norm
// CHECK:      moec::bnRunningStats<40, float>(9.99999975e-06f, running_mean0, running_var1, moec::bufferArg<float>(p, 2), moec::gptr<float>(), moec::gptr<float>());
// CHECK:      moec::bnApply<40, moec::bf16, float>(
// CHECK:      // group 2 (batch_norm_grad): moe.batch_norm_grad
// CHECK:      moec::bnMomentsFinish<40, 128, float>({{.*}}, moec::gptr<float>(), moec::gptr<float>());
// CHECK:      moek_bn_g2_sums(const moec::KernelParams p) {
// CHECK:      moec::bnGradPartials<40, moec::bf16>(rows, x4, dy5,
// CHECK:      moek_bn_g2_sums_finish(const moec::KernelParams p) {
// CHECK:      moec::bnGradFinish<40, 128, float>({{.*}}, dgamma6, dbeta7);
// CHECK:      moek_bn_g2_apply(const moec::KernelParams p) {
// CHECK:      moec::bnGradApply<40, true, moec::bf16, float>(n, x8, dy9, mask10,
// CHECK:      // group 3 (batch_norm_grad): moe.batch_norm_grad
// CHECK-NOT:  moek_bn_g3_sums
// CHECK:      moec::bnGradApply<40, false, moec::bf16, float>(n, x2, dy3, moec::gptr<const int32_t>(), moec::bufferArg<const float>(p, 4), moec::gptr<const float>(), gamma4, dx5);

// CHECK:      // launch moek_bn_g0_moments grid(2, 128, 1) block(256)
// CHECK-NEXT: // launch moek_bn_g0_stats grid(ceil(40/256), 1, 1) block(256)
// CHECK-NEXT: // launch moek_bn_g0_apply grid(ceil(40*B*S/1024), 1, 1) block(256)
// CHECK-NEXT: // launch moek_bn_g1_stats grid(ceil(40/256), 1, 1) block(256)
// CHECK-NEXT: // launch moek_bn_g1_apply grid(ceil(40*B*S/1024), 1, 1) block(256)
// CHECK-NEXT: // launch moek_bn_g0_moments grid(2, 128, 1) block(256)
// CHECK-NEXT: // launch moek_bn_g2_stats grid(ceil(40/256), 1, 1) block(256)
// CHECK-NEXT: // launch moek_bn_g2_sums grid(2, 128, 1) block(256)
// CHECK-NEXT: // launch moek_bn_g2_sums_finish grid(ceil(40/256), 1, 1) block(256)
// CHECK-NEXT: // launch moek_bn_g2_apply grid(ceil(40*B*S/1024), 1, 1) block(256)
// CHECK-NEXT: // launch moek_bn_g1_stats grid(ceil(40/256), 1, 1) block(256)
// CHECK-NEXT: // launch moek_bn_g3_apply grid(ceil(40*B*S/1024), 1, 1) block(256)
