// RUN: moec-opt %s -split-input-file -verify-diagnostics

// One case per verifier error of the moe dialect.

// expected-error @+1 {{parameter type must be a statically shaped tensor, got 'tensor<?x4xf32>'}}
moe.param @p : tensor<?x4xf32> {init = #moe.init<zeros>}

// -----

// expected-error @+1 {{parameter element type must be a float type, got 'i32'}}
moe.param @p : tensor<4xi32> {init = #moe.init<zeros>}

// -----

// expected-error @+1 {{xavier_uniform needs a parameter of rank >= 2, got 'tensor<4xf32>'}}
moe.param @p : tensor<4xf32> {init = #moe.init<xavier_uniform>}

// -----

// expected-error @+1 {{orthogonal needs a parameter of rank >= 2, got 'tensor<4xf32>'}}
moe.param @p : tensor<4xf32> {init = #moe.init<orthogonal>}

// -----

// expected-error @+1 {{row_norm must be a finite number > 0, got 0}}
moe.param @p : tensor<4x16xf32> {init = #moe.init<orthogonal>, row_norm = 0.0 : f64}

// -----

// expected-error @+1 {{row_norm needs a [rows, width] parameter, got 'tensor<2x4x16xf32>'}}
moe.param @p : tensor<2x4x16xf32> {init = #moe.init<normal>, row_norm = 1.5 : f64}

// -----

// expected-error @+1 {{row_norm needs a trainable parameter: a frozen one is never written back}}
moe.param @p : tensor<4x16xf32> {init = #moe.init<normal>, row_norm = 1.5 : f64, frozen}

// -----

// expected-error @+1 {{init scale must be >= 0, got -1}}
moe.param @p : tensor<4xf32> {init = #moe.init<normal>, scale = -1.0 : f64}

// -----

// expected-error @+1 {{state type must be a ranked tensor, got 'tensor<*xf32>'}}
moe.state @s : tensor<*xf32> {dims = []}

// -----

// expected-error @+1 {{dims has 1 entries for a tensor of rank 2}}
moe.state @s : tensor<?x4xf32> {dims = ["B"]}

// -----

// expected-error @+1 {{dims entry #0 must be a size or a symbol expression, got "2*"}}
moe.state @s : tensor<?x4xf32> {dims = ["2*", 4]}

// -----

// expected-error @+1 {{dims entry #1 (5) does not match the type 'tensor<?x4xf32>'}}
moe.state @s : tensor<?x4xf32> {dims = ["B", 5]}

// -----

func.func @embedding_table_rank(%ids: tensor<2xi32>, %t: tensor<8xf32>) {
  // expected-error @+1 {{table must have rank 2, got [8]}}
  %0 = moe.embedding %ids, %t : (tensor<2xi32>, tensor<8xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @embedding_result(%ids: tensor<2xi32>, %t: tensor<8x4xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<2x5xf32>' but its operands imply shape [2, 4]}}
  %0 = moe.embedding %ids, %t : (tensor<2xi32>, tensor<8x4xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @embedding_grad_dy(%ids: tensor<2x3xi32>, %dy: tensor<2x4x8xf32>) {
  // expected-error @+1 {{dy must have shape [2, 3, 8], got [2, 4, 8]}}
  %0 = moe.embedding_grad %ids, %dy {vocab = 10 : i64} : (tensor<2x3xi32>, tensor<2x4x8xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @positions_too_long(%x: tensor<2x9x4xf32>, %t: tensor<8x4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{sequence length 9 exceeds the position table length 8}}
  %0 = moe.add_positions %x, %t, %s : (tensor<2x9x4xf32>, tensor<8x4xf32>, tensor<i64>) -> tensor<*xf32>
  return
}

// -----

func.func @positions_width(%x: tensor<2x3x4xf32>, %t: tensor<8x5xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{table width must be 4, got 5}}
  %0 = moe.add_positions %x, %t, %s : (tensor<2x3x4xf32>, tensor<8x5xf32>, tensor<i64>) -> tensor<*xf32>
  return
}

// -----

func.func @rope_odd(%x: tensor<2x3x8xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{rotary_dim (3) must be even and at most head_dim (4)}}
  %0 = moe.rope %x, %s {num_heads = 2 : i64, head_dim = 4 : i64, rotary_dim = 3 : i64} : (tensor<2x3x8xf32>, tensor<i64>) -> tensor<*xf32>
  return
}

// -----

func.func @rope_too_wide(%x: tensor<2x3x8xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{rotary_dim (6) must be even and at most head_dim (4)}}
  %0 = moe.rope %x, %s {num_heads = 2 : i64, head_dim = 4 : i64, rotary_dim = 6 : i64} : (tensor<2x3x8xf32>, tensor<i64>) -> tensor<*xf32>
  return
}

// -----

func.func @rope_width(%x: tensor<2x3x8xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{x width (num_heads * head_dim) must be 12, got 8}}
  %0 = moe.rope %x, %s {num_heads = 3 : i64, head_dim = 4 : i64, rotary_dim = 4 : i64} : (tensor<2x3x8xf32>, tensor<i64>) -> tensor<*xf32>
  return
}

// -----

func.func @rope_rank(%x: tensor<6x8xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{x must have rank 3, got [6, 8]}}
  %0 = moe.rope %x, %s {num_heads = 2 : i64, head_dim = 4 : i64, rotary_dim = 4 : i64} : (tensor<6x8xf32>, tensor<i64>) -> tensor<*xf32>
  return
}

// -----

func.func @rope_base(%x: tensor<2x3x8xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{base must be a finite number > 0, got 0}}
  %0 = moe.rope %x, %s {num_heads = 2 : i64, head_dim = 4 : i64, rotary_dim = 4 : i64, base = 0.0 : f64} : (tensor<2x3x8xf32>, tensor<i64>) -> tensor<*xf32>
  return
}

// -----

func.func @linear_k(%x: tensor<?x4xf32>, %w: tensor<5x6xf32>) {
  // expected-error @+1 {{weight input dimension must be 4, got 5}}
  %0 = moe.linear %x, %w : (tensor<?x4xf32>, tensor<5x6xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @linear_bias(%x: tensor<?x4xf32>, %w: tensor<4x6xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{bias must have shape [6], got [4]}}
  %0 = moe.linear %x, %w bias %b : (tensor<?x4xf32>, tensor<4x6xf32>, tensor<4xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @linear_rank(%x: tensor<f32>, %w: tensor<4x6xf32>) {
  // expected-error @+1 {{x must have rank >= 1, got []}}
  %0 = moe.linear %x, %w : (tensor<f32>, tensor<4x6xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @linear_grad_missing_bias(%x: tensor<3x4xf32>, %w: tensor<4x6xf32>, %dy: tensor<3x6xf32>) {
  // expected-error @+1 {{has_bias is set but there is no dbias result}}
  %0:2 = moe.linear_grad %x, %w, %dy {has_bias} : (tensor<3x4xf32>, tensor<4x6xf32>, tensor<3x6xf32>) -> (tensor<3x4xf32>, tensor<4x6xf32>)
  return
}

// -----

func.func @linear_grad_extra_bias(%x: tensor<3x4xf32>, %w: tensor<4x6xf32>, %dy: tensor<3x6xf32>) {
  // expected-error @+1 {{has a dbias result without has_bias}}
  %0:3 = moe.linear_grad %x, %w, %dy : (tensor<3x4xf32>, tensor<4x6xf32>, tensor<3x6xf32>) -> (tensor<3x4xf32>, tensor<4x6xf32>, tensor<6xf32>)
  return
}

// -----

func.func @layer_norm_eps(%x: tensor<3x4xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{eps must be > 0, got 0}}
  %0 = moe.layer_norm %x, %g, %g {eps = 0.0 : f64} : (tensor<3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @layer_norm_gamma(%x: tensor<3x4xf32>, %g: tensor<5xf32>) {
  // expected-error @+1 {{gamma must have shape [4], got [5]}}
  %0 = moe.rms_norm %x, %g : (tensor<3x4xf32>, tensor<5xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @cast_shape(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<3x5xbf16>' but its operands imply shape [3, 4]}}
  %0 = moe.cast %x : (tensor<3x4xf32>) -> tensor<3x5xbf16>
  return
}

// -----

func.func @cast_integers(%x: tensor<3x4xi32>) {
  // expected-error @+1 {{operand #0 must be tensor of 32-bit float or 64-bit float or bfloat16 type or 16-bit float values, but got 'tensor<3x4xi32>'}}
  %0 = moe.cast %x : (tensor<3x4xi32>) -> tensor<3x4xbf16>
  return
}

// -----

func.func @activation_grad_shape(%x: tensor<3x4xf32>, %dy: tensor<3x5xf32>) {
  // expected-error @+1 {{dy must have shape [3, 4], got [3, 5]}}
  %0 = moe.activation_grad %x, %dy {kind = #moe.activation<relu>} : (tensor<3x4xf32>, tensor<3x5xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @dropout_rate(%x: tensor<3x4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{rate must be in [0, 1), got 1}}
  %0 = moe.dropout %x, %s {rate = 1.0 : f64, stream = 0 : i64} : (tensor<3x4xf32>, tensor<i64>) -> tensor<*xf32>
  return
}

// -----

func.func @attention_groups(%q: tensor<1x2x12xf32>, %k: tensor<1x2x8xf32>) {
  // expected-error @+1 {{num_heads (3) must be a multiple of num_kv_heads (2)}}
  %0:2 = moe.attention %q, %k, %k {num_heads = 3 : i64, num_kv_heads = 2 : i64, scale = 1.0 : f64} : (tensor<1x2x12xf32>, tensor<1x2x8xf32>, tensor<1x2x8xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return
}

// -----

func.func @attention_key_mask(%q: tensor<2x3x8xf32>, %k: tensor<2x5x4xf32>, %mask: tensor<2x3xi32>) {
  // expected-error @+1 {{key_mask must have shape [2, 5], got [2, 3]}}
  %0:2 = moe.attention %q, %k, %k key_mask %mask {num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 1.0 : f64} : (tensor<2x3x8xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>, tensor<2x3xi32>) -> (tensor<*xf32>, tensor<*xf32>)
  return
}

// -----

func.func @attention_heads(%q: tensor<1x2x10xf32>, %k: tensor<1x2x10xf32>) {
  // expected-error @+1 {{q width 10 is not divisible by num_heads (4)}}
  %0:2 = moe.attention %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 1.0 : f64} : (tensor<1x2x10xf32>, tensor<1x2x10xf32>, tensor<1x2x10xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return
}

// -----

func.func @attention_kv_width(%q: tensor<1x2x8xf32>, %k: tensor<1x2x8xf32>) {
  // expected-error @+1 {{k width (num_kv_heads * head_dim) must be 4, got 8}}
  %0:2 = moe.attention %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 1.0 : f64} : (tensor<1x2x8xf32>, tensor<1x2x8xf32>, tensor<1x2x8xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return
}

// -----

func.func @attention_v(%q: tensor<1x2x8xf32>, %k: tensor<1x2x8xf32>, %v: tensor<1x3x8xf32>) {
  // expected-error @+1 {{v must have shape [1, 2, 8], got [1, 3, 8]}}
  %0:2 = moe.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 1.0 : f64} : (tensor<1x2x8xf32>, tensor<1x2x8xf32>, tensor<1x3x8xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return
}

// -----

func.func @attention_batch(%q: tensor<1x2x8xf32>, %k: tensor<2x2x8xf32>) {
  // expected-error @+1 {{k batch dimension must be 1, got 2}}
  %0:2 = moe.attention %q, %k, %k {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 1.0 : f64} : (tensor<1x2x8xf32>, tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return
}

// -----

func.func @attention_grad_lse(%q: tensor<1x2x8xf32>, %lse: tensor<1x2x3xf32>) {
  // expected-error @+1 {{lse must have shape [1, 2, 2], got [1, 2, 3]}}
  %0:3 = moe.attention_grad %q, %q, %q, %q, %lse, %q {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 1.0 : f64} : (tensor<1x2x8xf32>, tensor<1x2x8xf32>, tensor<1x2x8xf32>, tensor<1x2x8xf32>, tensor<1x2x3xf32>, tensor<1x2x8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return
}

// -----

func.func @cache_width(%c: tensor<1x16x8xf32>, %u: tensor<1x2x4xf32>, %p: tensor<i64>) {
  // expected-error @+1 {{update width must be 8, got 4}}
  %0 = moe.kv_cache_write %c, %u, %p : (tensor<1x16x8xf32>, tensor<1x2x4xf32>, tensor<i64>) -> tensor<*xf32>
  return
}

// -----

func.func @cache_past_rank(%c: tensor<1x16x8xf32>, %u: tensor<1x2x8xf32>, %p: tensor<1xi64>) {
  // expected-error @+1 {{operand #2 must be 0D tensor of 64-bit signless integer values}}
  %0 = moe.kv_cache_write %c, %u, %p : (tensor<1x16x8xf32>, tensor<1x2x8xf32>, tensor<1xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @router_k(%l: tensor<4x3xf32>) {
  // expected-error @+1 {{k (4) exceeds the number of experts (3)}}
  %0:4 = moe.topk_router %l {k = 4 : i64, gate = #moe.gate<raw>, capacity = #moe.capacity<none>, priority = #moe.priority<token_order>} : (tensor<4x3xf32>) -> (tensor<*xf32>, tensor<*xi32>, tensor<*xf32>, tensor<*xi32>)
  return
}

// -----

func.func @router_factor(%l: tensor<4x3xf32>) {
  // expected-error @+1 {{capacity_factor must be > 0, got 0}}
  %0:4 = moe.topk_router %l {k = 1 : i64, gate = #moe.gate<raw>, capacity = #moe.capacity<switch>, capacity_factor = 0.0 : f64, priority = #moe.priority<token_order>} : (tensor<4x3xf32>) -> (tensor<*xf32>, tensor<*xi32>, tensor<*xf32>, tensor<*xi32>)
  return
}

// -----

func.func @router_min_capacity(%l: tensor<4x3xf32>) {
  // expected-error @+1 {{min_capacity must be >= 0, got -1}}
  %0:4 = moe.topk_router %l {k = 1 : i64, gate = #moe.gate<raw>, capacity = #moe.capacity<tutel>, min_capacity = -1 : i64, priority = #moe.priority<bpr>} : (tensor<4x3xf32>) -> (tensor<*xf32>, tensor<*xi32>, tensor<*xf32>, tensor<*xi32>)
  return
}

// -----

func.func @router_result_type(%l: tensor<4x3xf32>) {
  // expected-error @+1 {{result #1 has type 'tensor<4x1xi32>' but its operands imply shape [4, 2]}}
  %0:4 = moe.topk_router %l {k = 2 : i64, gate = #moe.gate<raw>, capacity = #moe.capacity<none>, priority = #moe.priority<token_order>} : (tensor<4x3xf32>) -> (tensor<*xf32>, tensor<4x1xi32>, tensor<*xf32>, tensor<*xi32>)
  return
}

// -----

func.func @router_grad_nothing(%p: tensor<4x3xf32>, %e: tensor<4x2xi32>, %g: tensor<4x2xf32>) {
  // expected-error @+1 {{needs at least one of dgates and dprobs}}
  %0 = moe.topk_router_grad %p, %e, %g, %e {gate = #moe.gate<raw>} : (tensor<4x3xf32>, tensor<4x2xi32>, tensor<4x2xf32>, tensor<4x2xi32>) -> tensor<*xf32>
  return
}

// -----

func.func @router_grad_slot(%p: tensor<4x3xf32>, %e: tensor<4x2xi32>, %g: tensor<4x2xf32>, %s: tensor<4x1xi32>) {
  // expected-error @+1 {{slot must have shape [4, 2], got [4, 1]}}
  %0 = moe.topk_router_grad %p, %e, %g, %s gates_grad %g {gate = #moe.gate<raw>} : (tensor<4x3xf32>, tensor<4x2xi32>, tensor<4x2xf32>, tensor<4x1xi32>, tensor<4x2xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @expert_w2(%x: tensor<4x8xf32>, %e: tensor<4x2xi32>, %g: tensor<4x2xf32>, %w1: tensor<3x8x16xf32>, %w2: tensor<3x8x16xf32>) {
  // expected-error @+1 {{w2 must have shape [3, 16, 8], got [3, 8, 16]}}
  %0 = moe.expert_ffn %x, %e, %g, %e, %w1, %w2 {activation = #moe.activation<relu>} : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4x2xf32>, tensor<4x2xi32>, tensor<3x8x16xf32>, tensor<3x8x16xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @expert_w1_width(%x: tensor<4x8xf32>, %e: tensor<4x2xi32>, %g: tensor<4x2xf32>, %w1: tensor<3x6x16xf32>, %w2: tensor<3x16x8xf32>) {
  // expected-error @+1 {{w1 must have shape [3, 8, 16], got [3, 6, 16]}}
  %0 = moe.expert_ffn %x, %e, %g, %e, %w1, %w2 {activation = #moe.activation<relu>} : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4x2xf32>, tensor<4x2xi32>, tensor<3x6x16xf32>, tensor<3x16x8xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @expert_gates(%x: tensor<4x8xf32>, %e: tensor<4x2xi32>, %g: tensor<5x2xf32>, %w1: tensor<3x8x16xf32>, %w2: tensor<3x16x8xf32>) {
  // expected-error @+1 {{gates must have shape [4, 2], got [5, 2]}}
  %0 = moe.expert_ffn %x, %e, %g, %e, %w1, %w2 {activation = #moe.activation<relu>} : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<5x2xf32>, tensor<4x2xi32>, tensor<3x8x16xf32>, tensor<3x16x8xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @expert_b1(%x: tensor<4x8xf32>, %e: tensor<4x2xi32>, %g: tensor<4x2xf32>, %w1: tensor<3x8x16xf32>, %b1: tensor<3x8xf32>, %w2: tensor<3x16x8xf32>) {
  // expected-error @+1 {{b1 must have shape [3, 16], got [3, 8]}}
  %0 = moe.expert_ffn %x, %e, %g, %e, %w1 b1 %b1, %w2 {activation = #moe.activation<relu>} : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4x2xf32>, tensor<4x2xi32>, tensor<3x8x16xf32>, tensor<3x8xf32>, tensor<3x16x8xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @expert_grad_count(%x: tensor<4x8xf32>, %e: tensor<4x2xi32>, %g: tensor<4x2xf32>, %w1: tensor<3x8x16xf32>, %w2: tensor<3x16x8xf32>) {
  // expected-error @+1 {{has 1 weight gradients for 2 weight operands}}
  %0:3 = moe.expert_ffn_grad %x, %e, %g, %e, %w1, %w2, %x {activation = #moe.activation<relu>} : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4x2xf32>, tensor<4x2xi32>, tensor<3x8x16xf32>, tensor<3x16x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<3x8x16xf32>)
  return
}

// -----

func.func @load_slot(%e: tensor<4x2xi32>, %s: tensor<4x1xi32>) {
  // expected-error @+1 {{slot must have shape [4, 2], got [4, 1]}}
  %0 = moe.expert_load %e, %s {num_experts = 3 : i64} : (tensor<4x2xi32>, tensor<4x1xi32>) -> tensor<*xf32>
  return
}

// -----

func.func @switch_tokens(%p: tensor<4x3xf32>, %e: tensor<5x2xi32>) {
  // expected-error @+1 {{expert must have shape [4, 2], got [5, 2]}}
  %0 = moe.switch_loss %p, %e {variant = #moe.balance<top1>} : (tensor<4x3xf32>, tensor<5x2xi32>) -> tensor<*xf32>
  return
}

// -----

func.func @switch_grad_dloss(%p: tensor<4x3xf32>, %e: tensor<4x2xi32>, %d: tensor<1xf32>) {
  // expected-error @+1 {{dloss must have rank 0, got [1]}}
  %0 = moe.switch_loss_grad %p, %e, %d {variant = #moe.balance<top1>} : (tensor<4x3xf32>, tensor<4x2xi32>, tensor<1xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @z_loss_rank(%l: tensor<f32>) {
  // expected-error @+1 {{logits must have rank >= 1, got []}}
  %0 = moe.z_loss %l : (tensor<f32>) -> tensor<*xf32>
  return
}

// -----

func.func @ce_targets(%l: tensor<4x10xf32>, %t: tensor<5xi32>) {
  // expected-error @+1 {{targets must have shape [4], got [5]}}
  %0:2 = moe.cross_entropy %l, %t : (tensor<4x10xf32>, tensor<5xi32>) -> (tensor<*xf32>, tensor<*xf32>)
  return
}

// -----

func.func @ce_smoothing(%l: tensor<4x10xf32>, %t: tensor<4xi32>) {
  // expected-error @+1 {{label_smoothing must be in [0, 1), got 1.5}}
  %0:2 = moe.cross_entropy %l, %t {label_smoothing = 1.5 : f64} : (tensor<4x10xf32>, tensor<4xi32>) -> (tensor<*xf32>, tensor<*xf32>)
  return
}

// -----

func.func @lr_base(%s: tensor<i64>) {
  // expected-error @+1 {{base_lr must be > 0, got 0}}
  %0 = moe.lr_schedule %s {kind = #moe.schedule<constant>, base_lr = 0.0 : f64} : (tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @lr_warmup(%s: tensor<i64>) {
  // expected-error @+1 {{warmup and total_steps must be >= 0}}
  %0 = moe.lr_schedule %s {kind = #moe.schedule<inverse_sqrt>, base_lr = 1.0 : f64, warmup = -1 : i64} : (tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @lr_decay(%s: tensor<i64>) {
  // expected-error @+1 {{total_steps (10) must exceed warmup (10) for a decaying schedule}}
  %0 = moe.lr_schedule %s {kind = #moe.schedule<linear>, base_lr = 1.0 : f64, warmup = 10 : i64, total_steps = 10 : i64} : (tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @lr_polynomial_decay(%s: tensor<i64>) {
  // expected-error @+1 {{total_steps (5) must exceed warmup (10) for a decaying schedule}}
  %0 = moe.lr_schedule %s {kind = #moe.schedule<polynomial>, base_lr = 1.0 : f64, warmup = 10 : i64, total_steps = 5 : i64} : (tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @lr_power(%s: tensor<i64>) {
  // expected-error @+1 {{power must be a finite number > 0, got -1}}
  %0 = moe.lr_schedule %s {kind = #moe.schedule<polynomial>, base_lr = 1.0 : f64, total_steps = 5 : i64, power = -1.0 : f64} : (tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @global_norm_empty() {
  // expected-error @+1 {{needs at least one input}}
  %0 = moe.global_norm : () -> tensor<f32>
  return
}

// -----

func.func @adam_betas(%p: tensor<4xf32>, %s: tensor<i64>, %lr: tensor<f32>) {
  // expected-error @+1 {{beta1 and beta2 must be in [0, 1), got 1.000000e+00 and 9.990000e-01}}
  %0:3 = moe.adam_update %p, %p, %p, %p, %s, %lr, %lr {beta1 = 1.0 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adam_eps(%p: tensor<4xf32>, %s: tensor<i64>, %lr: tensor<f32>) {
  // expected-error @+1 {{eps must be > 0}}
  %0:3 = moe.adam_update %p, %p, %p, %p, %s, %lr, %lr {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adam_moment_shape(%p: tensor<4xf32>, %m: tensor<5xf32>, %s: tensor<i64>, %lr: tensor<f32>) {
  // expected-error @+1 {{m must have shape [4], got [5]}}
  %0:3 = moe.adam_update %p, %p, %m, %p, %s, %lr, %lr {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<5xf32>, tensor<4xf32>, tensor<i64>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @sgd_momentum(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{momentum must be >= 0}}
  %0:2 = moe.sgd_update %p, %p, %p, %lr, %lr {momentum = -0.5 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @router_sample_needs_seed(%logits: tensor<3x4xf32>) {
  // expected-error @+1 {{sample > 0 draws experts at random and needs a seed}}
  %p, %e, %g, %s = moe.topk_router %logits {k = 2 : i64, gate = #moe.gate<raw>, capacity = #moe.capacity<none>, priority = #moe.priority<token_order>, sample = 1 : i64} : (tensor<3x4xf32>) -> (tensor<*xf32>, tensor<*xi32>, tensor<*xf32>, tensor<*xi32>)
  return
}

// -----

func.func @router_sample_exceeds_k(%logits: tensor<3x4xf32>, %seed: tensor<i64>) {
  // expected-error @+1 {{sample must be in [0, k = 2], got 3}}
  %p, %e, %g, %s = moe.topk_router %logits seed %seed {k = 2 : i64, gate = #moe.gate<raw>, capacity = #moe.capacity<none>, priority = #moe.priority<token_order>, sample = 3 : i64} : (tensor<3x4xf32>, tensor<i64>) -> (tensor<*xf32>, tensor<*xi32>, tensor<*xf32>, tensor<*xi32>)
  return
}

// -----

func.func @router_mask_shape(%logits: tensor<3x4xf32>, %mask: tensor<4xi32>) {
  // expected-error @+1 {{mask must have shape [3], got [4]}}
  %p, %e, %g, %s = moe.topk_router %logits mask %mask {k = 2 : i64, gate = #moe.gate<raw>, capacity = #moe.capacity<none>, priority = #moe.priority<token_order>} : (tensor<3x4xf32>, tensor<4xi32>) -> (tensor<*xf32>, tensor<*xi32>, tensor<*xf32>, tensor<*xi32>)
  return
}

// -----

func.func @normalize_rows_eps(%x: tensor<4x16xf32>) {
  // expected-error @+1 {{eps must be > 0, got 0}}
  %y = moe.normalize_rows %x {eps = 0.0 : f64} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @normalize_rows_scalar(%x: tensor<f32>) {
  // expected-error @+1 {{x must have rank >= 1, got []}}
  %y = moe.normalize_rows %x : (tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @normalize_rows_result(%x: tensor<4x16xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<4x8xf32>' but its operands imply shape [4, 16]}}
  %y = moe.normalize_rows %x : (tensor<4x16xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @normalize_rows_grad_dy(%x: tensor<4x16xf32>, %dy: tensor<4x8xf32>) {
  // expected-error @+1 {{dy must have shape [4, 16], got [4, 8]}}
  %dx = moe.normalize_rows_grad %x, %dy : (tensor<4x16xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @rescale_rows_norm(%x: tensor<4x16xf32>) {
  // expected-error @+1 {{norm must be a finite number > 0, got -1.5}}
  %y = moe.rescale_rows %x {norm = -1.5 : f64} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @finite_or_min_result(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<8x4xf32>' but its operands imply shape [4, 8]}}
  %y = moe.finite_or_min %x : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @finite_or_min_grad_dy(%x: tensor<4x8xf32>, %dy: tensor<4x7xf32>) {
  // expected-error @+1 {{dy must have shape [4, 8], got [4, 7]}}
  %dx = moe.finite_or_min_grad %x, %dy : (tensor<4x8xf32>, tensor<4x7xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @split_width(%x: tensor<2x3x10xf32>) {
  // expected-error @+1 {{the feature width 10 of x [2, 3, 10] is not a multiple of parts = 4}}
  %0 = moe.split_tokens %x {parts = 4 : i64} : (tensor<2x3x10xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @merge_rows(%x: tensor<2x6x4xf32>) {
  // expected-error @+1 {{the row count 6 of x [2, 6, 4] is not a multiple of parts = 4}}
  %0 = moe.merge_tokens %x {parts = 4 : i64} : (tensor<2x6x4xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @split_result(%x: tensor<2x3x8xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<2x6x4xf32>' but its operands imply shape [2, 12, 2]}}
  %0 = moe.split_tokens %x {parts = 4 : i64} : (tensor<2x3x8xf32>) -> tensor<2x6x4xf32>
  return
}

// -----

func.func @split_rank(%x: tensor<8xf32>) {
  // expected-error @+1 {{x must have rank >= 2, got [8]}}
  %0 = moe.split_tokens %x {parts = 4 : i64} : (tensor<8xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @routing_stats_parts(%e: tensor<6x2xi32>, %s: tensor<6x2xi32>) {
  // expected-error @+1 {{the rows 6 of expert [6, 2] are not a multiple of parts = 4}}
  %0 = moe.routing_stats %e, %s {parts = 4 : i64, num_experts = 3 : i64} : (tensor<6x2xi32>, tensor<6x2xi32>) -> tensor<*xf32>
  return
}

// -----

// expected-error @+1 {{a frozen parameter is trained by no group, got group "gate"}}
moe.param @p : tensor<4x4xf32> {init = #moe.init<zeros>, frozen, group = "gate"}

// -----

// expected-error @+1 {{group must be a non-empty name}}
moe.param @p : tensor<4x4xf32> {init = #moe.init<zeros>, group = ""}

// -----

func.func @batch_norm_rank(%x: tensor<8xf32>, %v: tensor<8xf32>) {
  // expected-error @+1 {{x must have rank >= 2, got [8]}}
  %0:3 = moe.batch_norm %x, %v, %v, %v, %v {training} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return
}

// -----

func.func @window_mean_rank(%x: tensor<?x16xf32>) {
  // expected-error @+1 {{x must have rank 3, got [?, 16]}}
  %y = moe.window_mean %x {window = #moe.pool_window<prefix>} : (tensor<?x16xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @batch_norm_gamma(%x: tensor<?x8xf32>, %v: tensor<8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{gamma must have shape [8], got [4]}}
  %0:3 = moe.batch_norm %x, %g, %v, %v, %v : (tensor<?x8xf32>, tensor<4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @window_mean_history_needs_past(%x: tensor<2x1x16xf32>, %h: tensor<2x8x16xf32>) {
  // expected-error @+1 {{history needs past, the number of positions before x's first}}
  %y = moe.window_mean %x history %h {window = #moe.pool_window<prefix>} : (tensor<2x1x16xf32>, tensor<2x8x16xf32>) -> tensor<2x1x16xf32>
  return
}

// -----

func.func @batch_norm_running_var(%x: tensor<?x8xf32>, %v: tensor<8xf32>, %rv: tensor<8x1xf32>) {
  // expected-error @+1 {{running_var must have shape [8], got [8, 1]}}
  %0:3 = moe.batch_norm %x, %v, %v, %v, %rv : (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x1xf32>) -> (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @window_mean_past_needs_history(%x: tensor<2x1x16xf32>, %past: tensor<i64>) {
  // expected-error @+1 {{past goes with history only}}
  %y = moe.window_mean %x past %past {window = #moe.pool_window<prefix>} : (tensor<2x1x16xf32>, tensor<i64>) -> tensor<2x1x16xf32>
  return
}

// -----

func.func @batch_norm_mask(%x: tensor<2x3x8xf32>, %v: tensor<8xf32>, %m: tensor<2x4xi32>) {
  // expected-error @+1 {{mask must have shape [2, 3], got [2, 4]}}
  %0:3 = moe.batch_norm %x, %v, %v, %v, %v mask %m {training} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x4xi32>) -> (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @window_mean_sequence_history(%x: tensor<2x1x16xf32>, %h: tensor<2x8x16xf32>, %past: tensor<i64>) {
  // expected-error @+1 {{history goes with the prefix and last windows only}}
  %y = moe.window_mean %x history %h past %past {window = #moe.pool_window<sequence>} : (tensor<2x1x16xf32>, tensor<2x8x16xf32>, tensor<i64>) -> tensor<2x1x16xf32>
  return
}

// -----

func.func @batch_norm_momentum(%x: tensor<?x8xf32>, %v: tensor<8xf32>) {
  // expected-error @+1 {{momentum must be in (0, 1], got 0}}
  %0:3 = moe.batch_norm %x, %v, %v, %v, %v {momentum = 0.0 : f64, training} : (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @window_mean_mask_window(%x: tensor<2x5x16xf32>, %mask: tensor<2x5xi32>) {
  // expected-error @+1 {{mask goes with window sequence only, not prefix}}
  %y = moe.window_mean %x mask %mask {window = #moe.pool_window<prefix>} : (tensor<2x5x16xf32>, tensor<2x5xi32>) -> tensor<2x5x16xf32>
  return
}

// -----

func.func @batch_norm_momentum_above_one(%x: tensor<?x8xf32>, %v: tensor<8xf32>) {
  // expected-error @+1 {{momentum must be in (0, 1], got 1.5}}
  %0:3 = moe.batch_norm %x, %v, %v, %v, %v {momentum = 1.5 : f64} : (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @window_mean_last_size(%x: tensor<2x5x16xf32>) {
  // expected-error @+1 {{window last needs size >= 1, got 0}}
  %y = moe.window_mean %x {window = #moe.pool_window<last>} : (tensor<2x5x16xf32>) -> tensor<2x5x16xf32>
  return
}

// -----

func.func @batch_norm_eps(%x: tensor<?x8xf32>, %v: tensor<8xf32>) {
  // expected-error @+1 {{eps must be > 0, got 0}}
  %0:3 = moe.batch_norm %x, %v, %v, %v, %v {eps = 0.0 : f64} : (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @window_mean_prefix_size(%x: tensor<2x5x16xf32>) {
  // expected-error @+1 {{size is the length of a last window; window prefix needs 0, got 2}}
  %y = moe.window_mean %x {window = #moe.pool_window<prefix>, size = 2 : i64} : (tensor<2x5x16xf32>) -> tensor<2x5x16xf32>
  return
}

// -----

func.func @batch_norm_stats_type(%x: tensor<?x8xf32>, %v: tensor<8xf32>, %h: tensor<8xbf16>) {
  // expected-error @+1 {{running_mean must have the element type of gamma ('f32'), got 'bf16'}}
  %0:3 = moe.batch_norm %x, %v, %v, %h, %v : (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xbf16>, tensor<8xf32>) -> (tensor<?x8xf32>, tensor<8xbf16>, tensor<8xf32>)
  return
}

// -----

func.func @window_mean_history_width(%x: tensor<2x1x16xf32>, %h: tensor<2x8x8xf32>, %past: tensor<i64>) {
  // expected-error @+1 {{history width must be 16, got 8}}
  %y = moe.window_mean %x history %h past %past {window = #moe.pool_window<prefix>} : (tensor<2x1x16xf32>, tensor<2x8x8xf32>, tensor<i64>) -> tensor<2x1x16xf32>
  return
}

// -----

func.func @batch_norm_param_type(%x: tensor<?x8xf32>, %v: tensor<8xf64>) {
  // expected-error @+1 {{gamma, beta and the running statistics must be 'f32' like x, got 'f64'}}
  %0:3 = moe.batch_norm %x, %v, %v, %v, %v : (tensor<?x8xf32>, tensor<8xf64>, tensor<8xf64>, tensor<8xf64>, tensor<8xf64>) -> (tensor<?x8xf32>, tensor<8xf64>, tensor<8xf64>)
  return
}

// -----

func.func @window_mean_history_batch(%x: tensor<2x1x16xf32>, %h: tensor<3x8x16xf32>, %past: tensor<i64>) {
  // expected-error @+1 {{history batch dimension must be 2, got 3}}
  %y = moe.window_mean %x history %h past %past {window = #moe.pool_window<prefix>} : (tensor<2x1x16xf32>, tensor<3x8x16xf32>, tensor<i64>) -> tensor<2x1x16xf32>
  return
}

// -----

func.func @batch_norm_result_type(%x: tensor<?x8xbf16>, %v: tensor<8xf32>) {
  // expected-error @+1 {{result #1 must have element type 'f32', got 'bf16'}}
  %0:3 = moe.batch_norm %x, %v, %v, %v, %v : (tensor<?x8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<?x8xbf16>, tensor<8xbf16>, tensor<8xf32>)
  return
}

// -----

func.func @window_mean_history_type(%x: tensor<2x1x16xf32>, %h: tensor<2x8x16xbf16>, %past: tensor<i64>) {
  // expected-error @+1 {{history must have x's element type 'f32', got 'bf16'}}
  %y = moe.window_mean %x history %h past %past {window = #moe.pool_window<prefix>} : (tensor<2x1x16xf32>, tensor<2x8x16xbf16>, tensor<i64>) -> tensor<2x1x16xf32>
  return
}

// -----

func.func @batch_norm_result_shape(%x: tensor<4x8xf32>, %v: tensor<8xf32>) {
  // expected-error @+1 {{result #1 has type 'tensor<4xf32>' but its operands imply shape [8]}}
  %0:3 = moe.batch_norm %x, %v, %v, %v, %v : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<8xf32>)
  return
}

// -----

func.func @window_mean_mask_shape(%x: tensor<2x5x16xf32>, %mask: tensor<2x4xi32>) {
  // expected-error @+1 {{mask must have shape [2, 5], got [2, 4]}}
  %y = moe.window_mean %x mask %mask {window = #moe.pool_window<sequence>} : (tensor<2x5x16xf32>, tensor<2x4xi32>) -> tensor<2x1x16xf32>
  return
}

// -----

func.func @batch_norm_grad_dy(%x: tensor<4x8xf32>, %v: tensor<8xf32>, %dy: tensor<4x7xf32>) {
  // expected-error @+1 {{dy must have shape [4, 8], got [4, 7]}}
  %0:3 = moe.batch_norm_grad %x, %v, %v, %v, %dy {training} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<4x7xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @window_mean_sequence_result(%x: tensor<2x5x16xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<2x5x16xf32>' but its operands imply shape [2, 1, 16]}}
  %y = moe.window_mean %x {window = #moe.pool_window<sequence>} : (tensor<2x5x16xf32>) -> tensor<2x5x16xf32>
  return
}

// -----

func.func @batch_norm_grad_dy_type(%x: tensor<4x8xbf16>, %v: tensor<8xf32>, %dy: tensor<4x8xf32>) {
  // expected-error @+1 {{dy must have x's element type 'bf16', got 'f32'}}
  %0:3 = moe.batch_norm_grad %x, %v, %v, %v, %dy : (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @window_mean_grad_dy(%x: tensor<2x5x16xf32>, %dy: tensor<2x5x16xf32>) {
  // expected-error @+1 {{dy must have shape [2, 1, 16], got [2, 5, 16]}}
  %dx = moe.window_mean_grad %x, %dy {window = #moe.pool_window<sequence>} : (tensor<2x5x16xf32>, tensor<2x5x16xf32>) -> tensor<2x5x16xf32>
  return
}

// -----

func.func @window_mean_grad_mask(%x: tensor<2x5x16xf32>, %dy: tensor<2x5x16xf32>, %mask: tensor<2x5xi32>) {
  // expected-error @+1 {{mask goes with window sequence only, not last}}
  %dx = moe.window_mean_grad %x, %dy mask %mask {window = #moe.pool_window<last>, size = 2 : i64} : (tensor<2x5x16xf32>, tensor<2x5x16xf32>, tensor<2x5xi32>) -> tensor<2x5x16xf32>
  return
}

// -----

func.func @head_mixture_width(%c: tensor<2x5x15xf32>, %g: tensor<2x1x4xf32>) {
  // expected-error @+1 {{context width 15 is not divisible by num_heads (4)}}
  %y = moe.head_mixture %c, %g {num_heads = 4 : i64} : (tensor<2x5x15xf32>, tensor<2x1x4xf32>) -> tensor<2x5x15xf32>
  return
}

// -----

func.func @head_mixture_heads(%c: tensor<2x5x16xf32>, %g: tensor<2x1x3xf32>) {
  // expected-error @+1 {{g width (num_heads) must be 4, got 3}}
  %y = moe.head_mixture %c, %g {num_heads = 4 : i64} : (tensor<2x5x16xf32>, tensor<2x1x3xf32>) -> tensor<2x5x16xf32>
  return
}

// -----

func.func @head_mixture_groups(%c: tensor<2x5x16xf32>, %g: tensor<2x3x4xf32>) {
  // expected-error @+1 {{g must have one row per sequence (1) or per position (5), got 3}}
  %y = moe.head_mixture %c, %g {num_heads = 4 : i64} : (tensor<2x5x16xf32>, tensor<2x3x4xf32>) -> tensor<2x5x16xf32>
  return
}

// -----

func.func @head_mixture_batch(%c: tensor<2x5x16xf32>, %g: tensor<3x1x4xf32>) {
  // expected-error @+1 {{g batch dimension must be 2, got 3}}
  %y = moe.head_mixture %c, %g {num_heads = 4 : i64} : (tensor<2x5x16xf32>, tensor<3x1x4xf32>) -> tensor<2x5x16xf32>
  return
}

// -----

func.func @head_mixture_one_head(%c: tensor<2x5x16xf32>, %g: tensor<2x1x1xf32>) {
  // expected-error @+1 {{attribute 'num_heads' failed to satisfy constraint}}
  %y = moe.head_mixture %c, %g {num_heads = 1 : i64} : (tensor<2x5x16xf32>, tensor<2x1x1xf32>) -> tensor<2x5x16xf32>
  return
}

// -----

func.func @head_mixture_result_type(%c: tensor<2x5x16xbf16>, %g: tensor<2x1x4xf32>) {
  // expected-error @+1 {{the result must have context's element type 'bf16', got 'f32'}}
  %y = moe.head_mixture %c, %g {num_heads = 4 : i64} : (tensor<2x5x16xbf16>, tensor<2x1x4xf32>) -> tensor<2x5x16xf32>
  return
}

// -----

func.func @head_mixture_grad_dy(%dy: tensor<2x4x16xf32>, %c: tensor<2x5x16xf32>, %g: tensor<2x5x4xf32>) {
  // expected-error @+1 {{dy must have shape [2, 5, 16], got [2, 4, 16]}}
  %dc, %dg = moe.head_mixture_grad %dy, %c, %g {num_heads = 4 : i64} : (tensor<2x4x16xf32>, tensor<2x5x16xf32>, tensor<2x5x4xf32>) -> (tensor<2x5x16xf32>, tensor<2x5x4xf32>)
  return
}

// -----

func.func @head_mixture_grad_dg_type(%dy: tensor<2x5x16xbf16>, %c: tensor<2x5x16xbf16>, %g: tensor<2x5x4xf32>) {
  // expected-error @+1 {{dg must have g's element type 'f32', got 'bf16'}}
  %dc, %dg = moe.head_mixture_grad %dy, %c, %g {num_heads = 4 : i64} : (tensor<2x5x16xbf16>, tensor<2x5x16xbf16>, tensor<2x5x4xf32>) -> (tensor<2x5x16xbf16>, tensor<2x5x4xbf16>)
  return
}

// -----

func.func @sample_expert_width(%p: tensor<2x5x3xf32>, %seed: tensor<i64>) {
  // expected-error @+1 {{p width (num_experts) must be 4, got 3}}
  %e = moe.sample_expert %p, %seed {num_experts = 4 : i64, stream = 0 : i64} : (tensor<2x5x3xf32>, tensor<i64>) -> tensor<2x5x4xf32>
  return
}

// -----

func.func @sample_expert_rank(%p: tensor<10x4xf32>, %seed: tensor<i64>) {
  // expected-error @+1 {{p must have rank 3, got [10, 4]}}
  %e = moe.sample_expert %p, %seed {num_experts = 4 : i64, stream = 0 : i64} : (tensor<10x4xf32>, tensor<i64>) -> tensor<10x4xf32>
  return
}

// -----

func.func @sample_expert_one(%p: tensor<2x5x1xf32>, %seed: tensor<i64>) {
  // expected-error @+1 {{attribute 'num_experts' failed to satisfy constraint}}
  %e = moe.sample_expert %p, %seed {num_experts = 1 : i64, stream = 0 : i64} : (tensor<2x5x1xf32>, tensor<i64>) -> tensor<2x5x1xf32>
  return
}

// -----

func.func @sample_expert_result(%p: tensor<2x5x3xf32>, %seed: tensor<i64>) {
  // expected-error @+1 {{result #0 has type 'tensor<2x5x3xf32>' but its operands imply shape [2, 5, 4]}}
  %e = moe.sample_expert %p, %seed {num_experts = 4 : i64, stream = 0 : i64, uniform} : (tensor<2x5x3xf32>, tensor<i64>) -> tensor<2x5x3xf32>
  return
}

// -----

func.func @gate_stats_heads(%g: tensor<2x5x?xf32>) {
  // expected-error @+1 {{g needs a static number of experts, got ?}}
  %s = moe.gate_stats %g : (tensor<2x5x?xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @gate_stats_result(%g: tensor<?x?x4xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<4xf32>' but its operands imply shape [5]}}
  %s = moe.gate_stats %g : (tensor<?x?x4xf32>) -> tensor<4xf32>
  return
}
