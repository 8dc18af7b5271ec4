// RUN: moec-opt %s -moe-fuse-kernels | FileCheck %s

// A block of the foundation model (pre-norm attention is left out): the
// router's linear, top-k, losses and load form one kernel even though the
// statistics come later in program order; the expert FFN takes its residual
// add; a linear takes its activation and the residual add after it; scalar
// loss arithmetic fuses into one kernel. Each group is outlined into a
// moe.kernel region whose results are what later ops read.

module {
  func.func @loss(%x: tensor<?x8xf32> {moe.input = "x", moe.dims = ["T", 8]},
                  %wr: tensor<8x4xf32> {moe.input = "wr"},
                  %w1: tensor<4x8x16xf32> {moe.input = "w1"},
                  %w2: tensor<4x16x8xf32> {moe.input = "w2"},
                  %wf: tensor<8x32xf32> {moe.input = "wf"},
                  %wg: tensor<32x8xf32> {moe.input = "wg"},
                  %g: tensor<8xf32> {moe.input = "g"})
      -> (tensor<?x8xf32> {moe.output = "y"}, tensor<f32> {moe.output = "aux"}, tensor<4xf32> {moe.output = "load"})
      attributes {moe.entry = "loss"} {
    // CHECK: %[[R:.*]]:6 = moe.kernel router {
    // CHECK-NEXT: %[[L:.*]] = moe.linear
    %logits = moe.linear %x, %wr : (tensor<?x8xf32>, tensor<8x4xf32>) -> tensor<?x4xf32>
    // CHECK-NEXT: moe.topk_router %[[L]]
    %p, %e, %gt, %s = moe.topk_router %logits {k = 2 : i64, gate = #moe.gate<raw>, capacity = #moe.capacity<none>, priority = #moe.priority<token_order>} : (tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x2xi32>, tensor<?x2xf32>, tensor<?x2xi32>)
    // The statistics were moved up into the router's kernel.
    // CHECK-NEXT: moe.expert_load
    // CHECK-NEXT: moe.switch_loss
    // CHECK-NEXT: moe.z_loss
    // CHECK-NEXT: moe.yield
    // CHECK-NEXT: }
    // CHECK-NEXT: %[[E:.*]] = moe.kernel experts {
    // CHECK-NEXT: %[[Y:.*]] = moe.expert_ffn %{{.*}}, %[[R]]#0, %[[R]]#1, %[[R]]#2
    %y = moe.expert_ffn %x, %e, %gt, %s, %w1, %w2 {activation = #moe.activation<silu>} : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x8x16xf32>, tensor<4x16x8xf32>) -> tensor<?x8xf32>
    // CHECK-NEXT: %[[S:.*]] = arith.addf %{{.*}}, %[[Y]]
    // CHECK-NEXT: moe.yield %[[S]]
    %r = arith.addf %x, %y : tensor<?x8xf32>
    // CHECK: %[[NK:.*]] = moe.kernel norm {
    // CHECK-NEXT: moe.rms_norm %[[E]],
    %n = moe.rms_norm %r, %g : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
    // CHECK: moe.kernel gemm {
    // CHECK-NEXT: moe.linear %[[NK]],
    %h = moe.linear %n, %wf : (tensor<?x8xf32>, tensor<8x32xf32>) -> tensor<?x32xf32>
    // CHECK-NEXT: moe.activation
    // CHECK-NEXT: moe.yield
    %a = moe.activation %h {kind = #moe.activation<gelu_tanh>} : (tensor<?x32xf32>) -> tensor<?x32xf32>
    // CHECK: moe.kernel gemm {
    // CHECK-NEXT: moe.linear
    %o = moe.linear %a, %wg : (tensor<?x32xf32>, tensor<32x8xf32>) -> tensor<?x8xf32>
    // CHECK-NEXT: arith.addf %[[E]],
    %out = arith.addf %r, %o : tensor<?x8xf32>
    %load = moe.expert_load %e, %s {num_experts = 4 : i64} : (tensor<?x2xi32>, tensor<?x2xi32>) -> tensor<4xf32>
    %sw = moe.switch_loss %p, %e {variant = #moe.balance<all_slots>} : (tensor<?x4xf32>, tensor<?x2xi32>) -> tensor<f32>
    %z = moe.z_loss %logits : (tensor<?x4xf32>) -> tensor<f32>
    // A constant before the group stays outside; one among its ops that
    // only the group reads moves in.
    // CHECK: arith.constant
    %c1 = arith.constant dense<1.0e-2> : tensor<f32>
    // CHECK-NEXT: moe.kernel scalar {
    // CHECK-NEXT: arith.mulf %[[R]]#4,
    %t1 = arith.mulf %sw, %c1 : tensor<f32>
    // CHECK-NEXT: arith.constant
    %c2 = arith.constant dense<1.0e-3> : tensor<f32>
    // CHECK-NEXT: arith.mulf %[[R]]#5,
    %t2 = arith.mulf %z, %c2 : tensor<f32>
    // CHECK-NEXT: arith.addf
    // CHECK-NEXT: moe.yield
    %aux = arith.addf %t1, %t2 : tensor<f32>
    return %out, %aux, %load : tensor<?x8xf32>, tensor<f32>, tensor<4xf32>
  }

  // The X-MoE gate's ops are kernels of their own: row scaling (either op)
  // and the finite fill take no elementwise neighbours.
  // CHECK-LABEL: func.func @gate
  func.func @gate(%wg: tensor<4x8xf32> {moe.input = "wg"},
                  %x: tensor<?x8xf32> {moe.input = "x", moe.dims = ["T", 8]})
      -> (tensor<?x4xf32> {moe.output = "s"}, tensor<4x8xf32> {moe.output = "dwg"})
      attributes {moe.entry = "gate"} {
    // CHECK: moe.kernel row_scale {
    // CHECK-NEXT: moe.rescale_rows
    // CHECK-NEXT: moe.yield
    %r = moe.rescale_rows %wg {norm = 1.5 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    // CHECK: moe.kernel row_scale {
    // CHECK-NEXT: moe.normalize_rows
    // CHECK-NEXT: moe.yield
    %n = moe.normalize_rows %r : (tensor<4x8xf32>) -> tensor<4x8xf32>
    // CHECK: moe.kernel gemm {
    %l = moe.linear %x, %n {transpose_weight} : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<?x4xf32>
    // CHECK: moe.kernel finite_or_min {
    // CHECK-NEXT: moe.finite_or_min
    // CHECK-NEXT: moe.yield
    %f = moe.finite_or_min %l : (tensor<?x4xf32>) -> tensor<?x4xf32>
    // CHECK: moe.kernel elementwise {
    // CHECK-NEXT: arith.addf
    %s = arith.addf %f, %f : tensor<?x4xf32>
    // CHECK: moe.kernel finite_or_min_grad {
    // CHECK-NEXT: moe.finite_or_min_grad
    // CHECK-NEXT: moe.yield
    %df = moe.finite_or_min_grad %l, %s : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
    %dx, %dn = moe.linear_grad %x, %n, %df {transpose_weight} : (tensor<?x8xf32>, tensor<4x8xf32>, tensor<?x4xf32>) -> (tensor<?x8xf32>, tensor<4x8xf32>)
    // CHECK: moe.kernel row_scale_grad {
    // CHECK-NEXT: moe.normalize_rows_grad
    // CHECK-NEXT: moe.yield
    %dwg = moe.normalize_rows_grad %r, %dn : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    return %s, %dwg : tensor<?x4xf32>, tensor<4x8xf32>
  }

  // moe.rope joins an elementwise run, the queries' and the keys' side by
  // side, but only when its x comes from before the run: a rope of a value
  // the run computes starts a kernel of its own.
  // CHECK-LABEL: func.func @rotary
  func.func @rotary(%q: tensor<?x?x8xf32> {moe.input = "q", moe.dims = ["B", "S", 8]},
                    %k: tensor<?x?x8xf32> {moe.input = "k", moe.dims = ["B", "S", 8]},
                    %start: tensor<i64> {moe.input = "start"})
      -> (tensor<?x?x8xf32> {moe.output = "q"}, tensor<?x?x8xf32> {moe.output = "k"})
      attributes {moe.entry = "rotary"} {
    // CHECK: %[[QK:.*]]:2 = moe.kernel elementwise {
    // CHECK-NEXT: moe.rope %{{.*}}, %{{.*}} {head_dim = 4 : i64, num_heads = 2
    %rq = moe.rope %q, %start {num_heads = 2 : i64, head_dim = 4 : i64, rotary_dim = 4 : i64} : (tensor<?x?x8xf32>, tensor<i64>) -> tensor<?x?x8xf32>
    // CHECK-NEXT: moe.rope %{{.*}}, %{{.*}} {head_dim = 8 : i64, num_heads = 1
    %rk = moe.rope %k, %start {num_heads = 1 : i64, head_dim = 8 : i64, rotary_dim = 4 : i64} : (tensor<?x?x8xf32>, tensor<i64>) -> tensor<?x?x8xf32>
    // CHECK-NEXT: %[[S:.*]] = arith.addf
    // CHECK-NEXT: moe.yield
    %sum = arith.addf %rq, %rk : tensor<?x?x8xf32>
    // CHECK: moe.kernel elementwise {
    // CHECK-NEXT: moe.rope %[[QK]]#1, %{{.*}} {head_dim = 4 : i64, inverse
    %back = moe.rope %sum, %start {num_heads = 2 : i64, head_dim = 4 : i64, rotary_dim = 4 : i64, inverse} : (tensor<?x?x8xf32>, tensor<i64>) -> tensor<?x?x8xf32>
    return %back, %rq : tensor<?x?x8xf32>, tensor<?x?x8xf32>
  }

  // The MAE layer: moe.head_mixture joins an elementwise run when its g
  // comes from before the run (the window means and the sampling are
  // kernels of their own); one whose g the run computes starts a new run.
  // CHECK-LABEL: func.func @mae
  func.func @mae(%c: tensor<?x?x8xf32> {moe.input = "c", moe.dims = ["B", "S", 8]},
                 %seed: tensor<i64> {moe.input = "rng"},
                 %gs: tensor<?x?x2xf32> {moe.input = "gs", moe.dims = ["B", "S", 2]})
      -> (tensor<?x?x8xf32> {moe.output = "y"}, tensor<3xf32> {moe.output = "stats"},
          tensor<?x?x8xf32> {moe.output = "dc"}, tensor<?x?x2xf32> {moe.output = "dw"})
      attributes {moe.entry = "mae"} {
    // CHECK: moe.kernel window_mean {
    // CHECK-NEXT: moe.window_mean
    // CHECK-NEXT: moe.yield
    %m = moe.window_mean %c {window = #moe.pool_window<sequence>} : (tensor<?x?x8xf32>) -> tensor<?x1x8xf32>
    // CHECK: moe.kernel window_mean {
    %w = moe.window_mean %gs {window = #moe.pool_window<last>, size = 4 : i64} : (tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
    // CHECK: moe.kernel sample_expert {
    // CHECK-NEXT: moe.sample_expert
    // CHECK-NEXT: moe.yield
    %e = moe.sample_expert %w, %seed {num_experts = 2 : i64, stream = 0 : i64} : (tensor<?x?x2xf32>, tensor<i64>) -> tensor<?x?x2xf32>
    // CHECK: moe.kernel elementwise {
    // CHECK-NEXT: moe.head_mixture
    // CHECK-NEXT: moe.head_mixture
    // CHECK-NEXT: arith.addf
    // CHECK-NEXT: moe.yield
    %y1 = moe.head_mixture %c, %w {num_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x2xf32>) -> tensor<?x?x8xf32>
    %y2 = moe.head_mixture %c, %e {num_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x2xf32>) -> tensor<?x?x8xf32>
    %y = arith.addf %y1, %y2 : tensor<?x?x8xf32>
    // CHECK: moe.kernel gate_stats {
    // CHECK-NEXT: moe.gate_stats
    %stats = moe.gate_stats %w : (tensor<?x?x2xf32>) -> tensor<3xf32>
    // CHECK: moe.kernel head_mixture_grad {
    // CHECK-NEXT: moe.head_mixture_grad
    // CHECK-NEXT: moe.yield
    %dc, %dg = moe.head_mixture_grad %y, %c, %w {num_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x2xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x2xf32>)
    // CHECK: moe.kernel window_mean_grad {
    // CHECK-NEXT: moe.window_mean_grad
    // CHECK-NEXT: moe.yield
    %dw = moe.window_mean_grad %gs, %dg {window = #moe.pool_window<last>, size = 4 : i64} : (tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
    return %y, %stats, %dc, %dw : tensor<?x?x8xf32>, tensor<3xf32>, tensor<?x?x8xf32>, tensor<?x?x2xf32>
  }
  // A decoding layer's key and value cache writes share one kernel, and a
  // later write of the same position whose operands are ready (an MAE
  // layer's pool, after its attention) moves up into it; a write of a
  // cache another write produced starts a kernel of its own.
  // CHECK-LABEL: func.func @decode_caches
  func.func @decode_caches(%ck: tensor<2x16x8xf32> {moe.input = "ck"},
                           %cv: tensor<2x16x8xf32> {moe.input = "cv"},
                           %cp: tensor<2x16x8xf32> {moe.input = "cp"},
                           %k: tensor<2x?x8xf32> {moe.input = "k", moe.dims = [2, "S", 8]},
                           %v: tensor<2x?x8xf32> {moe.input = "v", moe.dims = [2, "S", 8]},
                           %past: tensor<i64> {moe.input = "past"})
      -> (tensor<2x16x8xf32> {moe.output = "ck"}, tensor<2x16x8xf32> {moe.output = "cv"},
          tensor<2x?x8xf32> {moe.output = "sum"}, tensor<2x16x8xf32> {moe.output = "cp"},
          tensor<2x16x8xf32> {moe.output = "again"})
      attributes {moe.entry = "decode_caches"} {
    // CHECK: %[[KV:.*]]:3 = moe.kernel kv_write {
    // CHECK-NEXT: moe.kv_cache_write %arg0, %arg3, %arg5
    // CHECK-NEXT: moe.kv_cache_write %arg1, %arg4, %arg5
    // CHECK-NEXT: moe.kv_cache_write %arg2, %arg3, %arg5
    // CHECK-NEXT: moe.yield
    %nk = moe.kv_cache_write %ck, %k, %past : (tensor<2x16x8xf32>, tensor<2x?x8xf32>, tensor<i64>) -> tensor<2x16x8xf32>
    %nv = moe.kv_cache_write %cv, %v, %past : (tensor<2x16x8xf32>, tensor<2x?x8xf32>, tensor<i64>) -> tensor<2x16x8xf32>
    // CHECK: moe.kernel elementwise {
    // CHECK-NEXT: arith.addf
    %sum = arith.addf %k, %v : tensor<2x?x8xf32>
    %np = moe.kv_cache_write %cp, %k, %past : (tensor<2x16x8xf32>, tensor<2x?x8xf32>, tensor<i64>) -> tensor<2x16x8xf32>
    // CHECK: moe.kernel kv_write {
    // CHECK-NEXT: moe.kv_cache_write %[[KV]]#1,
    // CHECK-NEXT: moe.yield
    %again = moe.kv_cache_write %nv, %k, %past : (tensor<2x16x8xf32>, tensor<2x?x8xf32>, tensor<i64>) -> tensor<2x16x8xf32>
    return %nk, %nv, %sum, %np, %again : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x?x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>
  }
  // A decoding layer's key projection stores into the cache from its GEMM's
  // epilogue: the write moves up next to the linear that computes its rows
  // and joins its kernel.
  // CHECK-LABEL: func.func @decode_projection
  func.func @decode_projection(%x: tensor<2x?x8xf32> {moe.input = "x", moe.dims = [2, "S", 8]},
                               %wk: tensor<8x8xf32> {moe.input = "wk"},
                               %wq: tensor<8x8xf32> {moe.input = "wq"},
                               %ck: tensor<2x16x8xf32> {moe.input = "ck"},
                               %past: tensor<i64> {moe.input = "past"})
      -> (tensor<2x16x8xf32> {moe.output = "ck"}, tensor<2x?x8xf32> {moe.output = "q"})
      attributes {moe.entry = "decode_projection"} {
    // CHECK: moe.kernel gemm {
    // CHECK-NEXT: %[[K:.*]] = moe.linear %arg0, %arg1
    // CHECK-NEXT: %[[C:.*]] = moe.kv_cache_write %arg3, %[[K]], %arg4
    // CHECK-NEXT: moe.yield %[[C]]
    // CHECK: moe.kernel gemm {
    // CHECK-NEXT: moe.linear %arg0, %arg2
    // CHECK-NEXT: moe.yield
    %k = moe.linear %x, %wk : (tensor<2x?x8xf32>, tensor<8x8xf32>) -> tensor<2x?x8xf32>
    %q = moe.linear %x, %wq : (tensor<2x?x8xf32>, tensor<8x8xf32>) -> tensor<2x?x8xf32>
    %nk = moe.kv_cache_write %ck, %k, %past : (tensor<2x16x8xf32>, tensor<2x?x8xf32>, tensor<i64>) -> tensor<2x16x8xf32>
    return %nk, %q : tensor<2x16x8xf32>, tensor<2x?x8xf32>
  }
  // Decoding's query, key and value projections of one input share one
  // GEMM launch when the key and value products go into caches (their
  // writes move up next to them); without cache writes (a training
  // program's projections) each linear is a launch of its own, cuBLASLt's.
  // CHECK-LABEL: func.func @decode_qkv
  func.func @decode_qkv(%x: tensor<2x?x8xf32> {moe.input = "x", moe.dims = [2, "S", 8]},
                        %wq: tensor<8x8xf32> {moe.input = "wq"},
                        %wk: tensor<8x4xf32> {moe.input = "wk"},
                        %wv: tensor<8x4xf32> {moe.input = "wv"},
                        %bv: tensor<4xf32> {moe.input = "bv"},
                        %ck: tensor<2x16x4xf32> {moe.input = "ck"},
                        %cv: tensor<2x16x4xf32> {moe.input = "cv"},
                        %past: tensor<i64> {moe.input = "past"})
      -> (tensor<2x?x8xf32> {moe.output = "q"}, tensor<2x16x4xf32> {moe.output = "ck"},
          tensor<2x16x4xf32> {moe.output = "cv"}, tensor<2x?x4xf32> {moe.output = "k2"})
      attributes {moe.entry = "decode_qkv"} {
    // CHECK: moe.kernel gemm {
    // CHECK-NEXT: %[[Q:.*]] = moe.linear %arg0, %arg1
    // CHECK-NEXT: %[[K:.*]] = moe.linear %arg0, %arg2
    // CHECK-NEXT: moe.kv_cache_write %arg5, %[[K]], %arg7
    // CHECK-NEXT: %[[V:.*]] = moe.linear %arg0, %arg3 bias %arg4
    // CHECK-NEXT: moe.kv_cache_write %arg6, %[[V]], %arg7
    // CHECK-NEXT: moe.yield
    // CHECK: moe.kernel gemm {
    // CHECK-NEXT: moe.linear %arg0, %arg2
    // CHECK-NEXT: moe.yield
    %q = moe.linear %x, %wq : (tensor<2x?x8xf32>, tensor<8x8xf32>) -> tensor<2x?x8xf32>
    %k = moe.linear %x, %wk : (tensor<2x?x8xf32>, tensor<8x4xf32>) -> tensor<2x?x4xf32>
    %v = moe.linear %x, %wv bias %bv : (tensor<2x?x8xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<2x?x4xf32>
    %k2 = moe.linear %x, %wk : (tensor<2x?x8xf32>, tensor<8x4xf32>) -> tensor<2x?x4xf32>
    %nk = moe.kv_cache_write %ck, %k, %past : (tensor<2x16x4xf32>, tensor<2x?x4xf32>, tensor<i64>) -> tensor<2x16x4xf32>
    %nv = moe.kv_cache_write %cv, %v, %past : (tensor<2x16x4xf32>, tensor<2x?x4xf32>, tensor<i64>) -> tensor<2x16x4xf32>
    return %q, %nk, %nv, %k2 : tensor<2x?x8xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>, tensor<2x?x4xf32>
  }
}
