// RUN: moec-opt %s -moe-tile-kernels=arch=sm_80 -moe-lower-to-plan | not moec-translate --moe-to-cuda 2>&1 | FileCheck %s

// A gemm kernel of several moe.linear ops is what moe-fuse-kernels makes
// of decoding's projections: linears of one input, each with at most the
// cache write of its product. A plan that holds anything else in one is
// refused at the group, not emitted as a kernel that computes part of it.

module {
  func.func @decode(%x: tensor<2x3x8xf32> {moe.input = "x"},
                    %y: tensor<2x3x8xf32> {moe.input = "y"},
                    %wq: tensor<8x8xf32> {moe.input = "wq"},
                    %wk: tensor<8x8xf32> {moe.input = "wk"},
                    %ck: tensor<2x16x8xf32> {moe.input = "ck"},
                    %past: tensor<i64> {moe.input = "past"})
      -> (tensor<2x3x8xf32> {moe.output = "q"}, tensor<2x16x8xf32> {moe.output = "ck"})
      attributes {moe.entry = "decode"} {
    // CHECK: error: 'moe.linear' op a gemm kernel of several moe.linear ops holds projections of one input, each with at most the moe.kv_cache_write of its product after it
    %q, %c = moe.kernel gemm {
      %0 = moe.linear %x, %wq : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
      %1 = moe.linear %y, %wk : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
      %2 = moe.kv_cache_write %ck, %1, %past : (tensor<2x16x8xf32>, tensor<2x3x8xf32>, tensor<i64>) -> tensor<2x16x8xf32>
      moe.yield %0, %2 : tensor<2x3x8xf32>, tensor<2x16x8xf32>
    } : tensor<2x3x8xf32>, tensor<2x16x8xf32>
    return %q, %c : tensor<2x3x8xf32>, tensor<2x16x8xf32>
  }
}
