// RUN: moec-opt %s -split-input-file -verify-diagnostics

// One case per verifier error of fused kernel groups (moe.kernel, moe.yield,
// #moe.tiles): a pass that breaks a group, or a plan edited by hand, is
// rejected where it is malformed.

func.func @wrong_start(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = moe.kernel gemm {
    // expected-error @+1 {{'arith.addf' op cannot start a 'gemm' kernel}}
    %1 = arith.addf %x, %x : tensor<4x8xf32>
    %2 = moe.linear %1, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    moe.yield %2 : tensor<4x8xf32>
  } : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @rope_of_a_register(%x: tensor<2x3x8xf32>, %s: tensor<i64>) -> tensor<2x3x8xf32> {
  %0 = moe.kernel elementwise {
    %1 = arith.addf %x, %x : tensor<2x3x8xf32>
    // expected-error @+1 {{'moe.rope' op reads x at two elements, so x must come from before its kernel}}
    %2 = moe.rope %1, %s {num_heads = 2 : i64, head_dim = 4 : i64, rotary_dim = 4 : i64} : (tensor<2x3x8xf32>, tensor<i64>) -> tensor<2x3x8xf32>
    moe.yield %2 : tensor<2x3x8xf32>
  } : tensor<2x3x8xf32>
  return %0 : tensor<2x3x8xf32>
}

// -----

func.func @rope_in_a_gemm(%x: tensor<2x3x8xf32>, %w: tensor<8x8xf32>, %s: tensor<i64>) -> tensor<2x3x8xf32> {
  %0 = moe.kernel gemm {
    %1 = moe.linear %x, %w : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    // expected-error @+1 {{'moe.rope' op cannot follow earlier ops in a 'gemm' kernel}}
    %2 = moe.rope %1, %s {num_heads = 2 : i64, head_dim = 4 : i64, rotary_dim = 4 : i64} : (tensor<2x3x8xf32>, tensor<i64>) -> tensor<2x3x8xf32>
    moe.yield %2 : tensor<2x3x8xf32>
  } : tensor<2x3x8xf32>
  return %0 : tensor<2x3x8xf32>
}

// -----

func.func @cache_write_of_a_cache_write(%c: tensor<1x16x8xf32>, %u: tensor<1x2x8xf32>, %p: tensor<i64>) -> tensor<1x16x8xf32> {
  %0 = moe.kernel kv_write {
    %1 = moe.kv_cache_write %c, %u, %p : (tensor<1x16x8xf32>, tensor<1x2x8xf32>, tensor<i64>) -> tensor<1x16x8xf32>
    // expected-error @+1 {{'moe.kv_cache_write' op reads a value of its own kernel; a cache write's operands must come from before it}}
    %2 = moe.kv_cache_write %1, %u, %p : (tensor<1x16x8xf32>, tensor<1x2x8xf32>, tensor<i64>) -> tensor<1x16x8xf32>
    moe.yield %2 : tensor<1x16x8xf32>
  } : tensor<1x16x8xf32>
  return %0 : tensor<1x16x8xf32>
}

// -----

func.func @cache_write_of_an_input_in_a_gemm(%x: tensor<1x2x8xf32>, %w: tensor<8x8xf32>, %c: tensor<1x16x8xf32>, %p: tensor<i64>) -> tensor<1x16x8xf32> {
  %0 = moe.kernel gemm {
    %1 = moe.linear %x, %w : (tensor<1x2x8xf32>, tensor<8x8xf32>) -> tensor<1x2x8xf32>
    // expected-error @+1 {{'moe.kv_cache_write' op in a 'gemm' kernel stores the product of the moe.linear just before it}}
    %2 = moe.kv_cache_write %c, %x, %p : (tensor<1x16x8xf32>, tensor<1x2x8xf32>, tensor<i64>) -> tensor<1x16x8xf32>
    moe.yield %2 : tensor<1x16x8xf32>
  } : tensor<1x16x8xf32>
  return %0 : tensor<1x16x8xf32>
}

// -----

// A gemm kernel of several projections is one tile over one input.
func.func @projections_of_two_inputs(%x: tensor<2x3x8xf32>, %y: tensor<2x3x8xf32>, %wq: tensor<8x8xf32>, %wk: tensor<8x8xf32>, %c: tensor<2x16x8xf32>, %p: tensor<i64>) -> (tensor<2x3x8xf32>, tensor<2x16x8xf32>) {
  %0, %1 = moe.kernel gemm {
    %2 = moe.linear %x, %wq : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    // expected-error @+1 {{'moe.linear' op in a 'gemm' kernel of several projections reads the first one's input with its weight layout and element types}}
    %3 = moe.linear %y, %wk : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %4 = moe.kv_cache_write %c, %3, %p : (tensor<2x16x8xf32>, tensor<2x3x8xf32>, tensor<i64>) -> tensor<2x16x8xf32>
    moe.yield %2, %4 : tensor<2x3x8xf32>, tensor<2x16x8xf32>
  } : tensor<2x3x8xf32>, tensor<2x16x8xf32>
  return %0, %1 : tensor<2x3x8xf32>, tensor<2x16x8xf32>
}

// -----

// The epilogue of each product stores its own rows into the cache.
func.func @cache_write_of_an_earlier_projection(%x: tensor<2x3x8xf32>, %wk: tensor<8x8xf32>, %wv: tensor<8x8xf32>, %c: tensor<2x16x8xf32>, %p: tensor<i64>) -> (tensor<2x3x8xf32>, tensor<2x16x8xf32>) {
  %0, %1 = moe.kernel gemm {
    %2 = moe.linear %x, %wk : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %3 = moe.linear %x, %wv : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    // expected-error @+1 {{'moe.kv_cache_write' op in a 'gemm' kernel stores the product of the moe.linear just before it}}
    %4 = moe.kv_cache_write %c, %2, %p : (tensor<2x16x8xf32>, tensor<2x3x8xf32>, tensor<i64>) -> tensor<2x16x8xf32>
    moe.yield %3, %4 : tensor<2x3x8xf32>, tensor<2x16x8xf32>
  } : tensor<2x3x8xf32>, tensor<2x16x8xf32>
  return %0, %1 : tensor<2x3x8xf32>, tensor<2x16x8xf32>
}

// -----

// An epilogue follows a kernel of one projection and no cache write.
func.func @epilogue_after_a_cache_write(%x: tensor<1x2x8xf32>, %w: tensor<8x8xf32>, %c: tensor<1x16x8xf32>, %p: tensor<i64>) -> tensor<1x16x8xf32> {
  %0 = moe.kernel gemm {
    %1 = moe.linear %x, %w : (tensor<1x2x8xf32>, tensor<8x8xf32>) -> tensor<1x2x8xf32>
    %2 = moe.kv_cache_write %c, %1, %p : (tensor<1x16x8xf32>, tensor<1x2x8xf32>, tensor<i64>) -> tensor<1x16x8xf32>
    // expected-error @+1 {{'arith.addf' op cannot be fused into a 'gemm' kernel of several projections or a cache write}}
    %3 = arith.addf %2, %2 : tensor<1x16x8xf32>
    moe.yield %3 : tensor<1x16x8xf32>
  } : tensor<1x16x8xf32>
  return %0 : tensor<1x16x8xf32>
}

// -----

func.func @wrong_member(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = moe.kernel experts {
    // expected-error @+1 {{'moe.linear' op cannot start a 'experts' kernel}}
    %1 = moe.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    moe.yield %1 : tensor<4x8xf32>
  } : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @absorbs_too_much(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = moe.kernel gemm_grad {
    %1:2 = moe.linear_grad %x, %w, %x : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
    // expected-error @+1 {{'arith.addf' op cannot follow earlier ops in a 'gemm_grad' kernel}}
    %2 = arith.addf %1#0, %x : tensor<4x8xf32>
    moe.yield %2 : tensor<4x8xf32>
  } : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @yields_outside(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = moe.kernel elementwise {
    %1 = arith.addf %x, %x : tensor<4x8xf32>
    // expected-error @+1 {{'moe.yield' op yields a value not computed in its kernel}}
    moe.yield %x : tensor<4x8xf32>
  } : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @yield_types(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.kernel' op yields 'tensor<4x8xf32>' but its results are 'tensor<4x8xf64>'}}
  %0 = moe.kernel elementwise {
    %1 = arith.addf %x, %x : tensor<4x8xf32>
    moe.yield %1 : tensor<4x8xf32>
  } : tensor<4x8xf64>
  return %x : tensor<4x8xf32>
}

// -----

func.func @empty(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.kernel' op has no ops}}
  moe.kernel elementwise {
    moe.yield
  }
  return %x : tensor<4x8xf32>
}

// -----

func.func @nested(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = moe.kernel elementwise {
    // expected-error @+1 {{'moe.kernel' op cannot be nested in another moe.kernel}}
    %1 = moe.kernel elementwise {
      %2 = arith.addf %x, %x : tensor<4x8xf32>
      moe.yield %2 : tensor<4x8xf32>
    } : tensor<4x8xf32>
    moe.yield %1 : tensor<4x8xf32>
  } : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @unknown_kind(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{unknown kernel kind 'fused'}}
  %0 = moe.kernel fused {
    %1 = arith.addf %x, %x : tensor<4x8xf32>
    moe.yield %1 : tensor<4x8xf32>
  } : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A planned kernel (its ops carry moe.step) without tiles.
func.func @planned_without_tiles(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.kernel' op is planned (its ops have moe.step) but has no tiles: run moe-tile-kernels before moe-lower-to-plan}}
  %0 = moe.kernel elementwise {
    %1 = arith.addf %x, %x {moe.step = 0 : i64} : tensor<4x8xf32>
    moe.yield %1 : tensor<4x8xf32>
  } : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @missing_tile(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'gemm' kernel needs the tile 'tile_k'}}
  %0 = moe.kernel gemm tiles <threads = 256, tile_m = 64, tile_n = 64> {
    %1 = moe.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    moe.yield %1 : tensor<4x8xf32>
  } : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @foreign_tile(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'elementwise' kernel does not use the tile 'tile_q'}}
  %0 = moe.kernel elementwise tiles <threads = 256, items = 4, tile_q = 32> {
    %1 = arith.addf %x, %x : tensor<4x8xf32>
    moe.yield %1 : tensor<4x8xf32>
  } : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @bad_threads(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{threads must be 1 or a multiple of 32 up to 1024, got 48}}
  %0 = moe.kernel elementwise tiles <threads = 48, items = 4> {
    %1 = arith.addf %x, %x : tensor<4x8xf32>
    moe.yield %1 : tensor<4x8xf32>
  } : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @bad_tile(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{items must be at least 1, got 0}}
  %0 = moe.kernel elementwise tiles <threads = 256, items = 0> {
    %1 = arith.addf %x, %x : tensor<4x8xf32>
    moe.yield %1 : tensor<4x8xf32>
  } : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @row_scale_takes_no_gradient(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = moe.kernel row_scale {
    // expected-error @+1 {{'moe.normalize_rows_grad' op cannot start a 'row_scale' kernel}}
    %1 = moe.normalize_rows_grad %x, %x : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    moe.yield %1 : tensor<4x16xf32>
  } : tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

func.func @finite_or_min_alone(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = moe.kernel finite_or_min {
    %1 = moe.finite_or_min %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
    // expected-error @+1 {{'arith.addf' op cannot follow earlier ops in a 'finite_or_min' kernel}}
    %2 = arith.addf %1, %1 : tensor<4x8xf32>
    moe.yield %2 : tensor<4x8xf32>
  } : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @row_scale_tiles(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'row_scale' kernel needs the tile 'rows_per_block'}}
  %0 = moe.kernel row_scale tiles <threads = 256> {
    %1 = moe.normalize_rows %x : (tensor<4x16xf32>) -> tensor<4x16xf32>
    moe.yield %1 : tensor<4x16xf32>
  } : tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

func.func @head_mixture_g_in_kernel(%c: tensor<2x5x8xf32>, %g: tensor<2x5x2xf32>) -> tensor<2x5x8xf32> {
  %0 = moe.kernel elementwise {
    %1 = arith.addf %g, %g : tensor<2x5x2xf32>
    // expected-error @+1 {{'moe.head_mixture' op reads g per row and head, so g must come from before its kernel}}
    %2 = moe.head_mixture %c, %1 {num_heads = 2 : i64} : (tensor<2x5x8xf32>, tensor<2x5x2xf32>) -> tensor<2x5x8xf32>
    moe.yield %2 : tensor<2x5x8xf32>
  } : tensor<2x5x8xf32>
  return %0 : tensor<2x5x8xf32>
}

// -----

func.func @window_mean_alone(%x: tensor<2x5x8xf32>) -> tensor<2x5x8xf32> {
  %0 = moe.kernel window_mean {
    %1 = moe.window_mean %x {window = #moe.pool_window<prefix>} : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
    // expected-error @+1 {{'arith.addf' op cannot follow earlier ops in a 'window_mean' kernel}}
    %2 = arith.addf %1, %1 : tensor<2x5x8xf32>
    moe.yield %2 : tensor<2x5x8xf32>
  } : tensor<2x5x8xf32>
  return %0 : tensor<2x5x8xf32>
}

// -----

func.func @gate_stats_tiles(%g: tensor<2x5x4xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{'gate_stats' kernel does not use the tile 'items'}}
  %0 = moe.kernel gate_stats tiles <threads = 256, items = 4> {
    %1 = moe.gate_stats %g : (tensor<2x5x4xf32>) -> tensor<5xf32>
    moe.yield %1 : tensor<5xf32>
  } : tensor<5xf32>
  return %0 : tensor<5xf32>
}
