// RUN: moec-opt %s -moe-fuse-kernels -moe-tile-kernels=arch=sm_80 -moe-lower-to-plan | moec-translate --moe-to-cuda | FileCheck %s

// The MAE layer's kernels: the window means one thread per (sequence,
// feature) column, over x or over a decoding history after `past`
// positions; the head mixture as a load of g inside an elementwise loop
// (one gate per sequence: S rows per g row; one per position: 1); its
// gradient one block per (row group, head); sampling one row per thread;
// the gate statistics one block. Storage types come from the values.

module {
  func.func @mae(%c: tensor<?x?x16xbf16> {moe.input = "c", moe.dims = ["B", "S", 16]},
                 %mask: tensor<?x?xi32> {moe.input = "mask", moe.dims = ["B", "S"]},
                 %h: tensor<?x40x16xbf16> {moe.input = "history", moe.dims = ["B", 40, 16]},
                 %past: tensor<i64> {moe.input = "past"},
                 %g1: tensor<?x1x4xf32> {moe.input = "g1", moe.dims = ["B", 1, 4]},
                 %gs: tensor<?x?x4xf32> {moe.input = "gs", moe.dims = ["B", "S", 4]},
                 %seed: tensor<i64> {moe.input = "rng"})
      -> (tensor<?x1x16xbf16> {moe.output = "m"}, tensor<?x?x16xbf16> {moe.output = "l"},
          tensor<?x?x16xbf16> {moe.output = "dm"}, tensor<?x?x16xbf16> {moe.output = "y"},
          tensor<?x?x16xbf16> {moe.output = "dc"}, tensor<?x1x4xf32> {moe.output = "dg"},
          tensor<?x?x4xf32> {moe.output = "e"}, tensor<?x1x4xf32> {moe.output = "u"},
          tensor<5xf32> {moe.output = "stats"})
      attributes {moe.entry = "mae"} {
    %m = moe.window_mean %c mask %mask {window = #moe.pool_window<sequence>} : (tensor<?x?x16xbf16>, tensor<?x?xi32>) -> tensor<?x1x16xbf16>
    %l = moe.window_mean %c history %h past %past {window = #moe.pool_window<last>, size = 3 : i64} : (tensor<?x?x16xbf16>, tensor<?x40x16xbf16>, tensor<i64>) -> tensor<?x?x16xbf16>
    %dm = moe.window_mean_grad %c, %l {window = #moe.pool_window<prefix>} : (tensor<?x?x16xbf16>, tensor<?x?x16xbf16>) -> tensor<?x?x16xbf16>
    %y1 = moe.head_mixture %c, %g1 {num_heads = 4 : i64} : (tensor<?x?x16xbf16>, tensor<?x1x4xf32>) -> tensor<?x?x16xbf16>
    %y2 = moe.head_mixture %c, %gs {num_heads = 4 : i64} : (tensor<?x?x16xbf16>, tensor<?x?x4xf32>) -> tensor<?x?x16xbf16>
    %y = arith.addf %y1, %y2 : tensor<?x?x16xbf16>
    %dc, %dg = moe.head_mixture_grad %y, %c, %g1 {num_heads = 4 : i64} : (tensor<?x?x16xbf16>, tensor<?x?x16xbf16>, tensor<?x1x4xf32>) -> (tensor<?x?x16xbf16>, tensor<?x1x4xf32>)
    %e = moe.sample_expert %gs, %seed {num_experts = 4 : i64, stream = 7 : i64} : (tensor<?x?x4xf32>, tensor<i64>) -> tensor<?x?x4xf32>
    %u = moe.sample_expert %g1, %seed {num_experts = 4 : i64, stream = 8 : i64, uniform} : (tensor<?x1x4xf32>, tensor<i64>) -> tensor<?x1x4xf32>
    %stats = moe.gate_stats %gs : (tensor<?x?x4xf32>) -> tensor<5xf32>
    return %m, %l, %dm, %y, %dc, %dg, %e, %u, %stats : tensor<?x1x16xbf16>, tensor<?x?x16xbf16>, tensor<?x?x16xbf16>, tensor<?x?x16xbf16>, tensor<?x?x16xbf16>, tensor<?x1x4xf32>, tensor<?x?x4xf32>, tensor<?x1x4xf32>, tensor<5xf32>
  }
}

// CHECK-LABEL: // ===== program mae
// CHECK:      // group 0 (window_mean): moe.window_mean
// CHECK:      const moec::gptr<const moec::bf16> src0 = moec::bufferArg<const moec::bf16>(p, 0);
// CHECK:      moec::windowMean<16, moec::PoolWindow::Sequence>(batch, seq, len, 0, 0, src0, mask1, y2);
// CHECK:      // group 1 (window_mean): moe.window_mean
// CHECK:      const moec::gptr<const int64_t> past1 = moec::bufferArg<const int64_t>(p, 1);
// CHECK:      moec::windowMean<16, moec::PoolWindow::Last>(batch, seq, len, past1[0], 3, src0, moec::gptr<const int32_t>(), y2);
// CHECK:      // group 2 (window_mean_grad): moe.window_mean_grad
// CHECK:      moec::windowMeanGrad<16, moec::PoolWindow::Prefix>(batch, seq, 0, dy0, moec::gptr<const int32_t>(), dx1);
// CHECK:      // group 3 (elementwise): moe.head_mixture moe.head_mixture arith.addf
// CHECK:      const int64_t [[R:R[0-9]+]] = moec::scalarArg(p, 1);
// CHECK:      const float [[V1:v[0-9]+]] = [[X:x[0-9]+]] * moec::headMixtureScale<4, 4>(in1, i, [[R]]);
// CHECK:      const float [[V2:v[0-9]+]] = [[X]] * moec::headMixtureScale<4, 4>(in2, i, 1);
// CHECK:      // group 4 (head_mixture_grad): moe.head_mixture_grad
// CHECK:      moec::headMixtureGrad<4, 4, 128>(groups, rowsPerGroup, dy0, context1, g2, dcontext3, dg4);
// CHECK:      // group 5 (sample_expert): moe.sample_expert
// CHECK:      moec::sampleExpert<4, false>(rows, groups, width, static_cast<uint64_t>(seed1[0]), 7ull, p0, y2);
// CHECK:      // group 6 (sample_expert): moe.sample_expert
// CHECK:      moec::sampleExpert<4, true>(rows, groups, width, static_cast<uint64_t>(seed1[0]), 8ull, p0, y2);
// CHECK:      // group 7 (gate_stats): moe.gate_stats
// CHECK:      moec::gateStats<4, 256>(rows, g0, stats1);

// A column per thread; the history's 40 positions are a scalar; a block
// per (sequence, head) for one gate per sequence; one block of statistics.
// CHECK:      // launch moek_mae_g0 grid(ceil(16*B/128), 1, 1) block(128) {{.*}} scalars(B, S)
// CHECK:      // launch moek_mae_g1 grid(ceil(16*B/128), 1, 1) block(128) {{.*}} scalars(B, S, 40)
// CHECK:      // launch moek_mae_g2 grid(ceil(16*B/128), 1, 1) block(128)
// CHECK:      // launch moek_mae_g3 grid(ceil(16*B*S/1024), 1, 1) block(256) {{.*}} scalars(16*B*S, S)
// CHECK:      // launch moek_mae_g4 grid(4*B, 1, 1) block(128) {{.*}} scalars(B, S)
// CHECK:      // launch moek_mae_g5 grid(ceil(B*S/128), 1, 1) block(128) {{.*}} scalars(B*S, S, 4)
// CHECK:      // launch moek_mae_g6 grid(ceil(B/128), 1, 1) block(128) {{.*}} scalars(B, 1, 4)
// CHECK:      // launch moek_mae_g7 grid(1, 1, 1) block(256) {{.*}} scalars(B*S)
