// RUN: moec-opt %s -moe-fuse-kernels -moe-tile-kernels=arch=sm_80 | FileCheck %s --check-prefix=SM80
// RUN: moec-opt %s -moe-fuse-kernels -moe-tile-kernels=arch=sm_90 | FileCheck %s --check-prefix=SM90
// RUN: not moec-opt %s -moe-fuse-kernels -moe-tile-kernels=arch=sm_70 2>&1 | FileCheck %s --check-prefix=BAD

// Tiles depend on the architecture: sm_90 takes 128-row GEMM tiles for
// wide outputs and 64-key attention tiles.

module {
  func.func @forward(%x: tensor<?x?x128xf32> {moe.input = "x", moe.dims = ["B", "S", 128]},
                     %w: tensor<128x512xf32> {moe.input = "w"},
                     %n: tensor<128x16xf32> {moe.input = "n"})
      -> (tensor<?x?x512xf32> {moe.output = "h"}, tensor<?x?x128xf32> {moe.output = "a"}, tensor<?x?x16xf32> {moe.output = "m"})
      attributes {moe.entry = "forward"} {
    // SM80: moe.kernel gemm tiles <threads = 256, tile_m = 64, tile_n = 64, tile_k = 16>
    // SM90: moe.kernel gemm tiles <threads = 256, tile_m = 128, tile_n = 64, tile_k = 16>
    %h = moe.linear %x, %w : (tensor<?x?x128xf32>, tensor<128x512xf32>) -> tensor<?x?x512xf32>
    // SM80: moe.kernel attention tiles <threads = 128, tile_k = 32, tile_q = 32, head_dim = 32>
    // SM90: moe.kernel attention tiles <threads = 128, tile_k = 64, tile_q = 32, head_dim = 32>
    %a, %lse = moe.attention %x, %x, %x {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.17677669529663687 : f64, causal} : (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>) -> (tensor<?x?x128xf32>, tensor<?x4x?xf32>)
    // A narrow output keeps 32-column tiles on both.
    // SM80: moe.kernel gemm tiles <threads = 256, tile_m = 64, tile_n = 32, tile_k = 16>
    // SM90: moe.kernel gemm tiles <threads = 256, tile_m = 64, tile_n = 32, tile_k = 16>
    %m = moe.linear %x, %n : (tensor<?x?x128xf32>, tensor<128x16xf32>) -> tensor<?x?x16xf32>
    return %h, %a, %m : tensor<?x?x512xf32>, tensor<?x?x128xf32>, tensor<?x?x16xf32>
  }

  // Row scaling gives each row a power-of-two group of lanes as wide as
  // the row, up to a warp, and fills 256 threads with rows.
  func.func @gate(%wg: tensor<8x16xf32> {moe.input = "wg"},
                  %v: tensor<?x8xf32> {moe.input = "v", moe.dims = ["T", 8]},
                  %u: tensor<?x100xf32> {moe.input = "u", moe.dims = ["T", 100]})
      -> (tensor<8x16xf32> {moe.output = "n"}, tensor<?x8xf32> {moe.output = "f"}, tensor<?x100xf32> {moe.output = "du"})
      attributes {moe.entry = "gate"} {
    // SM80: moe.kernel row_scale tiles <threads = 256, rows_per_block = 16>
    // SM90: moe.kernel row_scale tiles <threads = 256, rows_per_block = 16>
    %r = moe.rescale_rows %wg {norm = 1.5 : f64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
    // SM80: moe.kernel row_scale tiles <threads = 256, rows_per_block = 16>
    %n = moe.normalize_rows %r : (tensor<8x16xf32>) -> tensor<8x16xf32>
    // SM80: moe.kernel row_scale tiles <threads = 256, rows_per_block = 32>
    %nv = moe.normalize_rows %v : (tensor<?x8xf32>) -> tensor<?x8xf32>
    // SM80: moe.kernel finite_or_min tiles <threads = 256, items = 4>
    %f = moe.finite_or_min %nv : (tensor<?x8xf32>) -> tensor<?x8xf32>
    // SM80: moe.kernel row_scale_grad tiles <threads = 256, rows_per_block = 8>
    %du = moe.normalize_rows_grad %u, %u : (tensor<?x100xf32>, tensor<?x100xf32>) -> tensor<?x100xf32>
    return %n, %f, %du : tensor<8x16xf32>, tensor<?x8xf32>, tensor<?x100xf32>
  }

  // The MAE layer's kernels: a column, head group or row per thread in
  // blocks of 128; the gate statistics in one block of 256.
  func.func @mae(%c: tensor<?x?x8xf32> {moe.input = "c", moe.dims = ["B", "S", 8]},
                 %seed: tensor<i64> {moe.input = "rng"},
                 %g: tensor<?x1x2xf32> {moe.input = "g", moe.dims = ["B", 1, 2]})
      -> (tensor<?x1x8xf32> {moe.output = "m"}, tensor<?x?x8xf32> {moe.output = "dm"},
          tensor<?x?x8xf32> {moe.output = "dc"}, tensor<?x1x2xf32> {moe.output = "dg"},
          tensor<?x1x2xf32> {moe.output = "e"}, tensor<3xf32> {moe.output = "stats"})
      attributes {moe.entry = "mae"} {
    // SM80: moe.kernel window_mean tiles <threads = 128>
    // SM90: moe.kernel window_mean tiles <threads = 128>
    %m = moe.window_mean %c {window = #moe.pool_window<sequence>} : (tensor<?x?x8xf32>) -> tensor<?x1x8xf32>
    // SM80: moe.kernel window_mean_grad tiles <threads = 128>
    %dm = moe.window_mean_grad %c, %m {window = #moe.pool_window<sequence>} : (tensor<?x?x8xf32>, tensor<?x1x8xf32>) -> tensor<?x?x8xf32>
    // SM80: moe.kernel head_mixture_grad tiles <threads = 128>
    %dc, %dg = moe.head_mixture_grad %c, %c, %g {num_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x1x2xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x2xf32>)
    // SM80: moe.kernel sample_expert tiles <threads = 128>
    %e = moe.sample_expert %g, %seed {num_experts = 2 : i64, stream = 0 : i64} : (tensor<?x1x2xf32>, tensor<i64>) -> tensor<?x1x2xf32>
    // SM80: moe.kernel gate_stats tiles <threads = 256>
    %stats = moe.gate_stats %g : (tensor<?x1x2xf32>) -> tensor<3xf32>
    return %m, %dm, %dc, %dg, %e, %stats : tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x1x2xf32>, tensor<?x1x2xf32>, tensor<3xf32>
  }
}

// BAD: error: unsupported architecture 'sm_70' (sm_80 or sm_90)
