// RUN: moec-opt %s | moec-opt | FileCheck %s
// RUN: moec-opt %s --mlir-print-op-generic | moec-opt | FileCheck %s

// Every op of the dialect parses, verifies and prints back the same.

// CHECK: moe.param @w : tensor<4x8xf32> {init = #moe.init<xavier_uniform>, scale = 5.000000e-01 : f64}
moe.param @w : tensor<4x8xf32> {init = #moe.init<xavier_uniform>, scale = 0.5 : f64}
// CHECK: moe.param @gate : tensor<8x4xf32> {frozen, init = #moe.init<normal>}
moe.param @gate : tensor<8x4xf32> {init = #moe.init<normal>, frozen}
// CHECK: moe.param @wg : tensor<8x16xf32> {init = #moe.init<orthogonal>, row_norm = 1.500000e+00 : f64, scale = 3.200000e-01 : f64}
moe.param @wg : tensor<8x16xf32> {init = #moe.init<orthogonal>, scale = 0.32 : f64, row_norm = 1.5 : f64}
// CHECK: moe.param @router : tensor<8x4xf32> {group = "gate", init = #moe.init<normal>}
moe.param @router : tensor<8x4xf32> {init = #moe.init<normal>, group = "gate"}
// CHECK: moe.state @cache : tensor<?x16x8xf32> {dims = ["B", 16, 8]}
moe.state @cache : tensor<?x16x8xf32> {dims = ["B", 16, 8]}
// CHECK: moe.state @opt.m.w : tensor<4x8xf32> {dims = [4, 8], like = @w}
moe.state @opt.m.w : tensor<4x8xf32> {dims = [4, 8], like = @w}

// CHECK-LABEL: func @embeddings
func.func @embeddings(%ids: tensor<2x3xi32>, %table: tensor<10x4xf32>, %pos: tensor<8x4xf32>, %start: tensor<i64>) -> (tensor<10x4xf32>, tensor<8x4xf32>) {
  // CHECK: moe.embedding %{{.*}}, %{{.*}} : (tensor<2x3xi32>, tensor<10x4xf32>) -> tensor<2x3x4xf32>
  %x = moe.embedding %ids, %table : (tensor<2x3xi32>, tensor<10x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: moe.embedding_grad %{{.*}}, %{{.*}} {vocab = 10 : i64}
  %dt = moe.embedding_grad %ids, %x {vocab = 10 : i64} : (tensor<2x3xi32>, tensor<2x3x4xf32>) -> tensor<10x4xf32>
  // CHECK: moe.add_positions
  %y = moe.add_positions %x, %pos, %start : (tensor<2x3x4xf32>, tensor<8x4xf32>, tensor<i64>) -> tensor<2x3x4xf32>
  // CHECK: moe.add_positions_grad %{{.*}}, %{{.*}} {max_len = 8 : i64}
  %dp = moe.add_positions_grad %y, %start {max_len = 8 : i64} : (tensor<2x3x4xf32>, tensor<i64>) -> tensor<8x4xf32>
  return %dt, %dp : tensor<10x4xf32>, tensor<8x4xf32>
}

// CHECK-LABEL: func @rope
func.func @rope(%q: tensor<?x?x8xf32>, %start: tensor<i64>) -> tensor<?x?x8xf32> {
  // CHECK: moe.rope %{{.*}}, %{{.*}} {head_dim = 4 : i64, num_heads = 2 : i64, rotary_dim = 2 : i64} : (tensor<?x?x8xf32>, tensor<i64>) -> tensor<?x?x8xf32>
  %y = moe.rope %q, %start {num_heads = 2 : i64, head_dim = 4 : i64, rotary_dim = 2 : i64} : (tensor<?x?x8xf32>, tensor<i64>) -> tensor<?x?x8xf32>
  // CHECK: moe.rope %{{.*}}, %{{.*}} {base = 5.000000e+05 : f64, head_dim = 4 : i64, inverse, num_heads = 2 : i64, rotary_dim = 4 : i64}
  %dy = moe.rope %y, %start {num_heads = 2 : i64, head_dim = 4 : i64, rotary_dim = 4 : i64, base = 5.0e5 : f64, inverse} : (tensor<?x?x8xf32>, tensor<i64>) -> tensor<?x?x8xf32>
  return %dy : tensor<?x?x8xf32>
}

// CHECK-LABEL: func @dense
func.func @dense(%x: tensor<?x?x4xf32>, %w: tensor<4x6xf32>, %b: tensor<6xf32>, %g: tensor<4xf32>, %seed: tensor<i64>) -> tensor<?x?x4xf32> {
  // CHECK: moe.linear %{{.*}}, %{{.*}} bias %{{.*}} : (tensor<?x?x4xf32>, tensor<4x6xf32>, tensor<6xf32>) -> tensor<?x?x6xf32>
  %y = moe.linear %x, %w bias %b : (tensor<?x?x4xf32>, tensor<4x6xf32>, tensor<6xf32>) -> tensor<?x?x6xf32>
  // CHECK: moe.linear %{{.*}}, %{{.*}} {transpose_weight}
  %t = moe.linear %y, %w {transpose_weight} : (tensor<?x?x6xf32>, tensor<4x6xf32>) -> tensor<?x?x4xf32>
  // CHECK: moe.linear_grad %{{.*}}, %{{.*}}, %{{.*}} {has_bias}
  %dx, %dw, %db = moe.linear_grad %x, %w, %y {has_bias} : (tensor<?x?x4xf32>, tensor<4x6xf32>, tensor<?x?x6xf32>) -> (tensor<?x?x4xf32>, tensor<4x6xf32>, tensor<6xf32>)
  // CHECK: moe.layer_norm %{{.*}} {eps = 9.9999999999999995E-7 : f64}
  %n = moe.layer_norm %t, %g, %g {eps = 1.0e-6 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  // CHECK: moe.layer_norm_grad
  %n1, %n2, %n3 = moe.layer_norm_grad %t, %g, %n : (tensor<?x?x4xf32>, tensor<4xf32>, tensor<?x?x4xf32>) -> (tensor<?x?x4xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: moe.rms_norm
  %r = moe.rms_norm %n1, %g : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  // CHECK: moe.rms_norm_grad
  %r1, %r2 = moe.rms_norm_grad %n1, %g, %r : (tensor<?x?x4xf32>, tensor<4xf32>, tensor<?x?x4xf32>) -> (tensor<?x?x4xf32>, tensor<4xf32>)
  // CHECK: moe.activation %{{.*}} {kind = #moe.activation<silu>}
  %a = moe.activation %r1 {kind = #moe.activation<silu>} : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  // CHECK: moe.activation_grad %{{.*}}, %{{.*}} {kind = #moe.activation<gelu_erf>}
  %da = moe.activation_grad %r1, %a {kind = #moe.activation<gelu_erf>} : (tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  // CHECK: moe.cast %{{.*}} : (tensor<?x?x4xf32>) -> tensor<?x?x4xbf16>
  %h = moe.cast %a : (tensor<?x?x4xf32>) -> tensor<?x?x4xbf16>
  // CHECK: moe.cast %{{.*}} : (tensor<?x?x4xbf16>) -> tensor<*xf32>
  %f = moe.cast %h : (tensor<?x?x4xbf16>) -> tensor<*xf32>
  // CHECK: moe.dropout %{{.*}}, %{{.*}} {rate = 1.000000e-01 : f64, stream = 3 : i64}
  %d = moe.dropout %da, %seed {rate = 0.1 : f64, stream = 3 : i64} : (tensor<?x?x4xf32>, tensor<i64>) -> tensor<?x?x4xf32>
  // CHECK: moe.dropout_grad
  %dd = moe.dropout_grad %d, %seed {rate = 0.1 : f64, stream = 3 : i64} : (tensor<?x?x4xf32>, tensor<i64>) -> tensor<?x?x4xf32>
  return %dd : tensor<?x?x4xf32>
}

// CHECK-LABEL: func @attention
func.func @attention(%q: tensor<2x5x8xf32>, %kv: tensor<2x5x4xf32>, %cache: tensor<2x16x4xf32>, %past: tensor<i64>) -> (tensor<2x5x8xf32>, tensor<2x16x4xf32>) {
  // CHECK: moe.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 5.000000e-01 : f64}
  %o, %lse = moe.attention %q, %kv, %kv {num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64, causal} : (tensor<2x5x8xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> (tensor<2x5x8xf32>, tensor<2x4x5xf32>)
  // CHECK: moe.attention_grad
  %dq, %dk, %dv = moe.attention_grad %q, %kv, %kv, %o, %lse, %o {num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64, causal} : (tensor<2x5x8xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>, tensor<2x5x8xf32>, tensor<2x4x5xf32>, tensor<2x5x8xf32>) -> (tensor<2x5x8xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>)
  // CHECK: moe.kv_cache_write
  %c = moe.kv_cache_write %cache, %dk, %past : (tensor<2x16x4xf32>, tensor<2x5x4xf32>, tensor<i64>) -> tensor<2x16x4xf32>
  // CHECK: moe.attention %{{.*}}, %{{.*}}, %{{.*}} past %{{.*}}
  %o2, %lse2 = moe.attention %q, %c, %c past %past {num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64, causal} : (tensor<2x5x8xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>, tensor<i64>) -> (tensor<2x5x8xf32>, tensor<2x4x5xf32>)
  return %o2, %c : tensor<2x5x8xf32>, tensor<2x16x4xf32>
}

// CHECK-LABEL: func @attention_key_mask
func.func @attention_key_mask(%q: tensor<2x3x8xf32>, %kv: tensor<2x5x4xf32>, %mask: tensor<2x5xi32>) -> tensor<2x5x4xf32> {
  // CHECK: moe.attention %{{.*}}, %{{.*}}, %{{.*}} key_mask %{{.*}} {num_heads = 2 : i64
  %o, %lse = moe.attention %q, %kv, %kv key_mask %mask {num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 0.5 : f64} : (tensor<2x3x8xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>, tensor<2x5xi32>) -> (tensor<2x3x8xf32>, tensor<2x2x3xf32>)
  // CHECK: moe.attention_grad {{.*}} key_mask %{{.*}} {num_heads = 2 : i64
  %dq, %dk, %dv = moe.attention_grad %q, %kv, %kv, %o, %lse, %o key_mask %mask {num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 0.5 : f64} : (tensor<2x3x8xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>, tensor<2x3x8xf32>, tensor<2x2x3xf32>, tensor<2x3x8xf32>, tensor<2x5xi32>) -> (tensor<2x3x8xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>)
  return %dk : tensor<2x5x4xf32>
}

// CHECK-LABEL: func @masked_sampled_routing
func.func @masked_sampled_routing(%logits: tensor<2x3x4xf32>, %mask: tensor<2x3xi32>, %seed: tensor<i64>) -> tensor<2x3x2xi32> {
  // CHECK: moe.topk_router %{{.*}} mask %{{.*}} seed %{{.*}} {{.*}}sample = 1 : i64, stream = 7 : i64}
  %p, %e, %g, %s = moe.topk_router %logits mask %mask seed %seed {k = 2 : i64, gate = #moe.gate<raw>, capacity = #moe.capacity<none>, priority = #moe.priority<token_order>, sample = 1 : i64, stream = 7 : i64} : (tensor<2x3x4xf32>, tensor<2x3xi32>, tensor<i64>) -> (tensor<2x3x4xf32>, tensor<2x3x2xi32>, tensor<2x3x2xf32>, tensor<2x3x2xi32>)
  return %e : tensor<2x3x2xi32>
}

// CHECK-LABEL: func @routing
func.func @routing(%x: tensor<6x4xf32>, %logits: tensor<6x3xf32>, %w1: tensor<3x4x5xf32>, %b1: tensor<3x5xf32>, %w2: tensor<3x5x4xf32>, %b2: tensor<3x4xf32>, %tgt: tensor<6xi32>) -> tensor<f32> {
  // CHECK: moe.topk_router %{{.*}} {capacity = #moe.capacity<tutel>, capacity_factor = 1.500000e+00 : f64, gate = #moe.gate<renorm_detached>, k = 2 : i64, min_capacity = 1 : i64, priority = #moe.priority<bpr>}
  %p, %e, %g, %s = moe.topk_router %logits {k = 2 : i64, gate = #moe.gate<renorm_detached>, capacity = #moe.capacity<tutel>, capacity_factor = 1.5 : f64, min_capacity = 1 : i64, priority = #moe.priority<bpr>} : (tensor<6x3xf32>) -> (tensor<6x3xf32>, tensor<6x2xi32>, tensor<6x2xf32>, tensor<6x2xi32>)
  // CHECK: moe.expert_ffn %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} b1 %{{.*}}, %{{.*}} b2 %{{.*}} w3 %{{.*}} {activation = #moe.activation<silu>}
  %y = moe.expert_ffn %x, %e, %g, %s, %w1 b1 %b1, %w2 b2 %b2 w3 %w1 {activation = #moe.activation<silu>} : (tensor<6x4xf32>, tensor<6x2xi32>, tensor<6x2xf32>, tensor<6x2xi32>, tensor<3x4x5xf32>, tensor<3x5xf32>, tensor<3x5x4xf32>, tensor<3x4xf32>, tensor<3x4x5xf32>) -> tensor<6x4xf32>
  // CHECK: moe.expert_ffn_grad
  %dx, %dg, %dw1, %db1, %dw2, %db2, %dw3 = moe.expert_ffn_grad %x, %e, %g, %s, %w1 b1 %b1, %w2 b2 %b2 w3 %w1, %y {activation = #moe.activation<silu>} : (tensor<6x4xf32>, tensor<6x2xi32>, tensor<6x2xf32>, tensor<6x2xi32>, tensor<3x4x5xf32>, tensor<3x5xf32>, tensor<3x5x4xf32>, tensor<3x4xf32>, tensor<3x4x5xf32>, tensor<6x4xf32>) -> (tensor<6x4xf32>, tensor<6x2xf32>, tensor<3x4x5xf32>, tensor<3x5xf32>, tensor<3x5x4xf32>, tensor<3x4xf32>, tensor<3x4x5xf32>)
  // CHECK: moe.topk_router_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} gates_grad %{{.*}} probs_grad %{{.*}}
  %dl = moe.topk_router_grad %p, %e, %g, %s gates_grad %dg probs_grad %p {gate = #moe.gate<renorm_detached>} : (tensor<6x3xf32>, tensor<6x2xi32>, tensor<6x2xf32>, tensor<6x2xi32>, tensor<6x2xf32>, tensor<6x3xf32>) -> tensor<6x3xf32>
  // CHECK: moe.expert_load %{{.*}}, %{{.*}} {num_experts = 3 : i64}
  %load = moe.expert_load %e, %s {num_experts = 3 : i64} : (tensor<6x2xi32>, tensor<6x2xi32>) -> tensor<3xf32>
  // CHECK: moe.switch_loss %{{.*}}, %{{.*}} {variant = #moe.balance<any_topk>}
  %sw = moe.switch_loss %p, %e {variant = #moe.balance<any_topk>} : (tensor<6x3xf32>, tensor<6x2xi32>) -> tensor<f32>
  // CHECK: moe.switch_loss_grad
  %dsw = moe.switch_loss_grad %p, %e, %sw {variant = #moe.balance<top1>} : (tensor<6x3xf32>, tensor<6x2xi32>, tensor<f32>) -> tensor<6x3xf32>
  // CHECK: moe.z_loss
  %z = moe.z_loss %logits : (tensor<6x3xf32>) -> tensor<f32>
  // CHECK: moe.z_loss_grad
  %dz = moe.z_loss_grad %logits, %z : (tensor<6x3xf32>, tensor<f32>) -> tensor<6x3xf32>
  // CHECK: moe.cross_entropy %{{.*}}, %{{.*}} {label_smoothing = 1.000000e-01 : f64}
  %ce, %count = moe.cross_entropy %logits, %tgt {label_smoothing = 0.1 : f64} : (tensor<6x3xf32>, tensor<6xi32>) -> (tensor<f32>, tensor<f32>)
  // CHECK: moe.cross_entropy %{{.*}}, %{{.*}} : (tensor<6x3xf32>, tensor<6xi32>) -> (tensor<f32>, tensor<f32>, tensor<f32>)
  %ce3:3 = moe.cross_entropy %logits, %tgt : (tensor<6x3xf32>, tensor<6xi32>) -> (tensor<f32>, tensor<f32>, tensor<f32>)
  // CHECK: moe.cross_entropy_grad
  %dce = moe.cross_entropy_grad %logits, %tgt, %ce : (tensor<6x3xf32>, tensor<6xi32>, tensor<f32>) -> tensor<6x3xf32>
  return %ce : tensor<f32>
}

// CHECK-LABEL: func @optimizers
func.func @optimizers(%p: tensor<4x8xf32>, %step: tensor<i64>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK: moe.lr_schedule %{{.*}} {base_lr = 1.000000e-03 : f64, kind = #moe.schedule<cosine>, total_steps = 100 : i64, warmup = 10 : i64}
  %lr = moe.lr_schedule %step {kind = #moe.schedule<cosine>, base_lr = 1.0e-3 : f64, warmup = 10 : i64, total_steps = 100 : i64} : (tensor<i64>) -> tensor<f32>
  // CHECK: moe.lr_schedule %{{.*}} {base_lr = 1.000000e-03 : f64, final_lr = 1.000000e-05 : f64, kind = #moe.schedule<polynomial>, power = 2.000000e+00 : f64, total_steps = 100 : i64, warmup = 10 : i64}
  %lr2 = moe.lr_schedule %step {kind = #moe.schedule<polynomial>, base_lr = 1.0e-3 : f64, warmup = 10 : i64, total_steps = 100 : i64, final_lr = 1.0e-5 : f64, power = 2.0 : f64} : (tensor<i64>) -> tensor<f32>
  // CHECK: moe.global_norm
  %n = moe.global_norm %p, %p : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
  // CHECK: moe.adam_update {{.*}} decoupled
  %p1, %m1, %v1 = moe.adam_update %p, %p, %p, %p, %step, %lr, %n {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64, decoupled} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<i64>, tensor<f32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  // CHECK: moe.sgd_update {{.*}}momentum = 9.000000e-01
  %p2, %m2 = moe.sgd_update %p1, %p, %m1, %lr, %n {momentum = 0.9 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  return %p2, %m2 : tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func @fused_kernel
func.func @fused_kernel(%x: tensor<4x8xf32>, %w: tensor<8x32xf32>) -> tensor<4x32xf32> {
  // CHECK: %[[K:.*]] = moe.kernel gemm tiles <threads = 256, tile_m = 64, tile_n = 32, tile_k = 16> {
  // CHECK-NEXT: %[[H:.*]] = moe.linear
  // CHECK-NEXT: %[[A:.*]] = moe.activation %[[H]]
  // CHECK-NEXT: moe.yield %[[A]] : tensor<4x32xf32>
  // CHECK-NEXT: } : tensor<4x32xf32>
  %y = moe.kernel gemm tiles <threads = 256, tile_m = 64, tile_n = 32, tile_k = 16> {
    %h = moe.linear %x, %w : (tensor<4x8xf32>, tensor<8x32xf32>) -> tensor<4x32xf32>
    %a = moe.activation %h {kind = #moe.activation<gelu_tanh>} : (tensor<4x32xf32>) -> tensor<4x32xf32>
    moe.yield %a : tensor<4x32xf32>
  } : tensor<4x32xf32>
  // CHECK: return %[[K]]
  return %y : tensor<4x32xf32>
}

// CHECK-LABEL: func @gate_scores
func.func @gate_scores(%x: tensor<?x?x16xf32>, %wg: tensor<8x16xf32>, %l: tensor<?x8xbf16>) -> (tensor<8x16xf32>, tensor<?x8xbf16>) {
  // CHECK: moe.rescale_rows %{{.*}} {norm = 1.500000e+00 : f64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %r = moe.rescale_rows %wg {norm = 1.5 : f64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  // The default eps is not printed.
  // CHECK: moe.normalize_rows %{{.*}} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %n = moe.normalize_rows %r : (tensor<8x16xf32>) -> tensor<8x16xf32>
  // CHECK: moe.normalize_rows %{{.*}} {eps = 1.000000e-02 : f64} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %nx = moe.normalize_rows %x {eps = 1.0e-2 : f64} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  // CHECK: moe.normalize_rows_grad %{{.*}}, %{{.*}} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %dn = moe.normalize_rows_grad %r, %n : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  // CHECK: moe.finite_or_min %{{.*}} : (tensor<?x8xbf16>) -> tensor<?x8xbf16>
  %f = moe.finite_or_min %l : (tensor<?x8xbf16>) -> tensor<?x8xbf16>
  // CHECK: moe.finite_or_min_grad %{{.*}}, %{{.*}} : (tensor<?x8xbf16>, tensor<?x8xbf16>) -> tensor<?x8xbf16>
  %df = moe.finite_or_min_grad %l, %f : (tensor<?x8xbf16>, tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return %dn, %df : tensor<8x16xf32>, tensor<?x8xbf16>
}

// MH-MoE's token split and merge: [B, S, 8] as [B, 4*S, 2] and back.
// CHECK-LABEL: func.func @split_and_merge
// CHECK: moe.split_tokens %{{.*}} {parts = 4 : i64} : (tensor<?x?x8xf32>) -> tensor<?x?x2xf32>
// CHECK: moe.merge_tokens %{{.*}} {parts = 4 : i64} : (tensor<?x?x2xf32>) -> tensor<?x?x8xf32>
func.func @split_and_merge(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %s = moe.split_tokens %x {parts = 4 : i64} : (tensor<?x?x8xf32>) -> tensor<?x?x2xf32>
  %m = moe.merge_tokens %s {parts = 4 : i64} : (tensor<?x?x2xf32>) -> tensor<?x?x8xf32>
  return %m : tensor<?x?x8xf32>
}

// Batch norm: training with a padding mask (defaults eps 1e-5 and momentum
// 0.1 stay implicit), eval in bf16 with f32 statistics, and the gradient.
// CHECK-LABEL: func.func @batch_norm
// CHECK: moe.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {training} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<?x?xi32>) -> (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK: moe.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-03 : f64, momentum = 5.000000e-01 : f64} : (tensor<?x8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<?x8xbf16>, tensor<8xf32>, tensor<8xf32>)
// CHECK: moe.batch_norm_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {training} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<?x?x8xf32>, tensor<?x?xi32>) -> (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>)
func.func @batch_norm(%x: tensor<?x?x8xf32>, %xb: tensor<?x8xbf16>, %g: tensor<8xf32>, %b: tensor<8xf32>, %rm: tensor<8xf32>, %rv: tensor<8xf32>, %mask: tensor<?x?xi32>) -> (tensor<?x?x8xf32>, tensor<?x8xbf16>, tensor<8xf32>, tensor<8xf32>) {
  %y, %nm, %nv = moe.batch_norm %x, %g, %b, %rm, %rv mask %mask {training} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<?x?xi32>) -> (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %e, %em, %ev = moe.batch_norm %xb, %g, %b, %rm, %rv {eps = 1.0e-3 : f64, momentum = 0.5 : f64} : (tensor<?x8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<?x8xbf16>, tensor<8xf32>, tensor<8xf32>)
  %dx, %dg, %db = moe.batch_norm_grad %x, %g, %rm, %rv, %y mask %mask {training} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<?x?x8xf32>, tensor<?x?xi32>) -> (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %dx, %e, %nm, %dg : tensor<?x?x8xf32>, tensor<?x8xbf16>, tensor<8xf32>, tensor<8xf32>
}

// The MAE layer: the pooled summary over each window (with a mask, and over
// a decoding history), the head mixture with one gate per sequence and per
// position, expert sampling and the gate statistics.
// CHECK-LABEL: func.func @mae
func.func @mae(%x: tensor<?x?x16xf32>, %h: tensor<?x64x16xf32>, %past: tensor<i64>,
               %mask: tensor<?x?xi32>, %c: tensor<?x?x16xbf16>, %g1: tensor<?x1x4xf32>,
               %gs: tensor<2x5x4xf32>, %cs: tensor<2x5x16xf32>, %seed: tensor<i64>) {
  // CHECK: moe.window_mean %{{.*}} mask %{{.*}} {window = #moe.pool_window<sequence>} : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<?x1x16xf32>
  %m = moe.window_mean %x mask %mask {window = #moe.pool_window<sequence>} : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<?x1x16xf32>
  // CHECK: moe.window_mean %{{.*}} {window = #moe.pool_window<prefix>} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %p = moe.window_mean %x {window = #moe.pool_window<prefix>} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  // CHECK: moe.window_mean %{{.*}} history %{{.*}} past %{{.*}} {size = 8 : i64, window = #moe.pool_window<last>} : (tensor<?x?x16xf32>, tensor<?x64x16xf32>, tensor<i64>) -> tensor<?x?x16xf32>
  %l = moe.window_mean %x history %h past %past {window = #moe.pool_window<last>, size = 8 : i64} : (tensor<?x?x16xf32>, tensor<?x64x16xf32>, tensor<i64>) -> tensor<?x?x16xf32>
  // CHECK: moe.window_mean_grad %{{.*}}, %{{.*}} mask %{{.*}} {window = #moe.pool_window<sequence>} : (tensor<?x?x16xf32>, tensor<?x1x16xf32>, tensor<?x?xi32>) -> tensor<?x?x16xf32>
  %dm = moe.window_mean_grad %x, %m mask %mask {window = #moe.pool_window<sequence>} : (tensor<?x?x16xf32>, tensor<?x1x16xf32>, tensor<?x?xi32>) -> tensor<?x?x16xf32>
  // CHECK: moe.window_mean_grad %{{.*}}, %{{.*}} {size = 3 : i64, window = #moe.pool_window<last>} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %dl = moe.window_mean_grad %x, %p {window = #moe.pool_window<last>, size = 3 : i64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  // CHECK: moe.head_mixture %{{.*}}, %{{.*}} {num_heads = 4 : i64} : (tensor<?x?x16xbf16>, tensor<?x1x4xf32>) -> tensor<?x?x16xbf16>
  %y = moe.head_mixture %c, %g1 {num_heads = 4 : i64} : (tensor<?x?x16xbf16>, tensor<?x1x4xf32>) -> tensor<?x?x16xbf16>
  // CHECK: moe.head_mixture_grad %{{.*}}, %{{.*}}, %{{.*}} {num_heads = 4 : i64} : (tensor<2x5x16xf32>, tensor<2x5x16xf32>, tensor<2x5x4xf32>) -> (tensor<2x5x16xf32>, tensor<2x5x4xf32>)
  %dc, %dg = moe.head_mixture_grad %cs, %cs, %gs {num_heads = 4 : i64} : (tensor<2x5x16xf32>, tensor<2x5x16xf32>, tensor<2x5x4xf32>) -> (tensor<2x5x16xf32>, tensor<2x5x4xf32>)
  // CHECK: moe.sample_expert %{{.*}}, %{{.*}} {num_experts = 4 : i64, stream = 7 : i64} : (tensor<2x5x4xf32>, tensor<i64>) -> tensor<2x5x4xf32>
  %e = moe.sample_expert %gs, %seed {num_experts = 4 : i64, stream = 7 : i64} : (tensor<2x5x4xf32>, tensor<i64>) -> tensor<2x5x4xf32>
  // CHECK: moe.sample_expert %{{.*}}, %{{.*}} {num_experts = 3 : i64, stream = 8 : i64, uniform} : (tensor<?x1x4xf32>, tensor<i64>) -> tensor<?x1x3xf32>
  %u = moe.sample_expert %g1, %seed {num_experts = 3 : i64, stream = 8 : i64, uniform} : (tensor<?x1x4xf32>, tensor<i64>) -> tensor<?x1x3xf32>
  // CHECK: moe.gate_stats %{{.*}} : (tensor<2x5x4xf32>) -> tensor<5xf32>
  %s = moe.gate_stats %gs : (tensor<2x5x4xf32>) -> tensor<5xf32>
  return
}
