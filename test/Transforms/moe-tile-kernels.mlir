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
}

// BAD: error: unsupported architecture 'sm_70' (sm_80 or sm_90)
