// RUN: moec-opt %s -split-input-file -moe-fuse-kernels -moe-tile-kernels=arch=sm_80 -verify-diagnostics | FileCheck %s

// An attention's query and key tiles shrink until their rows fit the 48
// KiB of shared memory a kernel has, down to 4 queries by 8 keys: as f32
// rows 4 bytes x (2 x 4 + 2 x 8) x 509 plus the per-row values, 49152
// bytes, which a head of 509 dims just fits and one of 510 (rows of 511)
// does not.

// CHECK: moe.kernel attention tiles <threads = 128, tile_k = 8, tile_q = 4, head_dim = 509>
func.func @widest(%x: tensor<?x?x509xf32> {moe.input = "x", moe.dims = ["B", "S", 509]})
    -> (tensor<?x?x509xf32> {moe.output = "a"}) attributes {moe.entry = "forward"} {
  %a, %lse = moe.attention %x, %x, %x {num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 0.044 : f64, causal} : (tensor<?x?x509xf32>, tensor<?x?x509xf32>, tensor<?x?x509xf32>) -> (tensor<?x?x509xf32>, tensor<?x1x?xf32>)
  return %a : tensor<?x?x509xf32>
}

// -----

func.func @too_wide(%x: tensor<?x?x510xf32> {moe.input = "x", moe.dims = ["B", "S", 510]})
    -> (tensor<?x?x510xf32> {moe.output = "a"}) attributes {moe.entry = "forward"} {
  // expected-error @+1 {{attention head_dim 510 is too wide: its kernels stage query and key rows in 48 KiB of shared memory, which holds 4 queries and 8 keys of at most 509 dims}}
  %a, %lse = moe.attention %x, %x, %x {num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 0.044 : f64, causal} : (tensor<?x?x510xf32>, tensor<?x?x510xf32>, tensor<?x?x510xf32>) -> (tensor<?x?x510xf32>, tensor<?x1x?xf32>)
  return %a : tensor<?x?x510xf32>
}
