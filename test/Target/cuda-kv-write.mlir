// RUN: moec-opt %s -moe-fuse-kernels -moe-tile-kernels=arch=sm_80 -moe-lower-to-plan | moec-translate --moe-to-cuda | FileCheck %s

// A decoding layer's cache writes are one kernel with a grid-stride loop
// per cache (row b * max_len + past + s of each). When the program still
// reads an old cache after its write, the plan keeps it and the group
// copies it into the new buffer first, a kernel of its own per cache
// (bf16 here: the copies and writes take the values' storage type).

module {
  func.func @decode(%ck: tensor<2x16x8xbf16> {moe.input = "ck"},
                    %cv: tensor<2x16x4xbf16> {moe.input = "cv"},
                    %k: tensor<2x?x8xbf16> {moe.input = "k", moe.dims = [2, "S", 8]},
                    %v: tensor<2x?x4xbf16> {moe.input = "v", moe.dims = [2, "S", 4]},
                    %past: tensor<i64> {moe.input = "past"})
      -> (tensor<2x16x8xbf16> {moe.output = "ck"}, tensor<2x16x4xbf16> {moe.output = "cv"},
          tensor<2x16x8xbf16> {moe.output = "old_k"}, tensor<2x16x4xbf16> {moe.output = "old_v"})
      attributes {moe.entry = "decode"} {
    %nk = moe.kv_cache_write %ck, %k, %past : (tensor<2x16x8xbf16>, tensor<2x?x8xbf16>, tensor<i64>) -> tensor<2x16x8xbf16>
    %nv = moe.kv_cache_write %cv, %v, %past : (tensor<2x16x4xbf16>, tensor<2x?x4xbf16>, tensor<i64>) -> tensor<2x16x4xbf16>
    return %nk, %nv, %ck, %cv : tensor<2x16x8xbf16>, tensor<2x16x4xbf16>, tensor<2x16x8xbf16>, tensor<2x16x4xbf16>
  }
}

// CHECK-LABEL: // ===== program decode
// CHECK:      // group 0 (kv_write): moe.kv_cache_write moe.kv_cache_write
// CHECK:      moek_decode_g0_copy(const moec::KernelParams p) {
// CHECK:        [[TO:to[0-9]+]][i] = [[FROM:from[0-9]+]][i];
// CHECK:      moek_decode_g0_copy1(const moec::KernelParams p) {
// CHECK:        to{{[0-9]+}}[i] = from{{[0-9]+}}[i];
// CHECK:      moek_decode_g0_write(const moec::KernelParams p) {
// CHECK-NEXT:   {
// CHECK-NEXT:     const int64_t n = moec::scalarArg(p, 0);
// CHECK-NEXT:     const int64_t S = moec::scalarArg(p, 1);
// CHECK-NEXT:     const moec::gptr<const moec::bf16> [[UK:update[0-9]+]] = moec::bufferArg<const moec::bf16>(p, 0);
// CHECK-NEXT:     const moec::gptr<const int64_t> [[PK:past[0-9]+]] = moec::bufferArg<const int64_t>(p, 1);
// CHECK-NEXT:     const moec::gptr<moec::bf16> [[CK:cache[0-9]+]] = moec::bufferArg<moec::bf16>(p, 2);
// CHECK-NEXT:     for (int64_t i = {{.*}}; i < n; i += {{.*}}) {
// CHECK-NEXT:       const int64_t b = i / (S * 8), s = i / 8 % S, c = i % 8;
// CHECK-NEXT:       [[CK]][(b * 16 + [[PK]][0] + s) * 8 + c] = [[UK]][i];
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   {
// CHECK-NEXT:     const int64_t n = moec::scalarArg(p, 2);
// CHECK-NEXT:     const int64_t S = moec::scalarArg(p, 1);
// CHECK-NEXT:     const moec::gptr<const moec::bf16> [[UV:update[0-9]+]] = moec::bufferArg<const moec::bf16>(p, 3);
// CHECK-NEXT:     const moec::gptr<const int64_t> [[PV:past[0-9]+]] = moec::bufferArg<const int64_t>(p, 1);
// CHECK-NEXT:     const moec::gptr<moec::bf16> [[CV:cache[0-9]+]] = moec::bufferArg<moec::bf16>(p, 4);
// CHECK-NEXT:     for (int64_t i = {{.*}}; i < n; i += {{.*}}) {
// CHECK-NEXT:       const int64_t b = i / (S * 4), s = i / 4 % S, c = i % 4;
// CHECK-NEXT:       [[CV]][(b * 16 + [[PV]][0] + s) * 4 + c] = [[UV]][i];
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }
// The copies write the buffers the one write launch then updates.
// CHECK:      // launch moek_decode_g0_copy grid(ceil(256/1024), 1, 1) block(256) smem 0 buffers(0, [[NK:[0-9]+]]) scalars(256)
// CHECK-NEXT: // launch moek_decode_g0_copy1 grid(ceil(128/1024), 1, 1) block(256) smem 0 buffers(1, [[NV:[0-9]+]]) scalars(128)
// CHECK-NEXT: // launch moek_decode_g0_write grid(ceil(16*S/1024), 1, 1) block(256) smem 0 buffers(2, 4, [[NK]], 3, [[NV]]) scalars(16*S, S, 8*S)
