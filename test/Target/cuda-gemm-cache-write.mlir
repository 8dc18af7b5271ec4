// RUN: moec-opt %s -moe-fuse-kernels -moe-tile-kernels=arch=sm_80 -moe-lower-to-plan | moec-translate --moe-to-cuda | FileCheck %s

// A decoding projection on its own (no other projection of its input) is
// one GEMM whose epilogue adds the bias once and stores the product where
// the program reads it and its rows into the cache at position
// past + m % S of batch m / S (moec::cacheRow, called: not inlined into
// every unrolled fragment store). A launch of at most kGemmRowsMax rows
// (decoding a token a sequence) runs gemmRows, which streams the weight
// once, instead of the tile.

module {
  func.func @decode(%x: tensor<2x?x8xf32> {moe.input = "x", moe.dims = [2, "S", 8]},
                    %wk: tensor<8x8xf32> {moe.input = "wk"},
                    %b: tensor<8xf32> {moe.input = "b"},
                    %ck: tensor<2x16x8xf32> {moe.input = "ck"},
                    %past: tensor<i64> {moe.input = "past"})
      -> (tensor<2x16x8xf32> {moe.output = "ck"}, tensor<2x?x8xf32> {moe.output = "k"})
      attributes {moe.entry = "decode"} {
    %k = moe.linear %x, %wk bias %b : (tensor<2x?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x?x8xf32>
    %nk = moe.kv_cache_write %ck, %k, %past : (tensor<2x16x8xf32>, tensor<2x?x8xf32>, tensor<i64>) -> tensor<2x16x8xf32>
    return %nk, %k : tensor<2x16x8xf32>, tensor<2x?x8xf32>
  }
}

// CHECK-LABEL: // ===== program decode
// CHECK:      // gemm: generated (fuses moe.kv_cache_write into its epilogue)
// CHECK-NEXT: moek_decode_g0_gemm(const moec::KernelParams p) {
// CHECK:        const int64_t n0 = static_cast<int64_t>(blockIdx.x) * 32;
// CHECK-NEXT:   const auto w = [[W:w[0-9]+]];
// CHECK-NEXT:   const int64_t N = 8;
// CHECK-NEXT:   const auto store = [=](int64_t m, int64_t col, float acc) {
// CHECK-NEXT:     const float y = acc + moec::toFloat([[B:b[0-9]+]][col]);
// CHECK-NEXT:     [[OUT:out[0-9]+]][m * 8 + col] = y;
// CHECK-NEXT:     [[CACHE:cache[0-9]+]][moec::cacheRow(m, S, 16, [[PAST:past[0-9]+]][0]) * 8 + col] = y;
// CHECK-NEXT:   };
// CHECK-NEXT:   static_assert(64 > moec::kGemmRowsMax, "gemmRows takes the rows of one block row");
// CHECK-NEXT:   if (M <= moec::kGemmRowsMax) {
// CHECK-NEXT:     moec::gemmRows<32, 256, moec::RowsRounding::Fp32>(n0, M, N, 8, moec::RowMajor<float>{x{{[0-9]+}}, 8}, moec::RowMajor<float>{w, N}, store);
// CHECK-NEXT:   } else {
// CHECK-NEXT:     moec::gemmTile<64, 32, 16, 256>({{.*}}, n0, M, N, 8, moec::RowMajor<float>{x{{[0-9]+}}, 8}, moec::RowMajor<float>{w, N}, store);
// CHECK-NEXT:   }
// CHECK:      // launch moek_decode_g0_gemm grid(ceil(32/32), ceil(2*S/64), 1) block(256)
