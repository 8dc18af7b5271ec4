// RUN: moec-opt %s -split-input-file -moe-infer-shapes -verify-diagnostics | FileCheck %s

// Unranked results become ranked; dimensions named by moe.dims propagate as
// `?`, static ones are checked.

// CHECK-LABEL: func @mlp
// CHECK-SAME: -> tensor<?x?x3xf32>
func.func @mlp(%x: tensor<?x?x4xf32> {moe.dims = ["B", "S", 4]}, %w1: tensor<4x8xf32>, %w2: tensor<8x3xf32>) -> tensor<*xf32> {
  // CHECK: moe.linear {{.*}} -> tensor<?x?x8xf32>
  %h = moe.linear %x, %w1 : (tensor<?x?x4xf32>, tensor<4x8xf32>) -> tensor<*xf32>
  // CHECK: moe.activation {{.*}} -> tensor<?x?x8xf32>
  %a = moe.activation %h {kind = #moe.activation<relu>} : (tensor<*xf32>) -> tensor<*xf32>
  // CHECK: moe.linear {{.*}} -> tensor<?x?x3xf32>
  %y = moe.linear %a, %w2 : (tensor<*xf32>, tensor<8x3xf32>) -> tensor<*xf32>
  return %y : tensor<*xf32>
}

// -----

// CHECK-LABEL: func @router
func.func @router(%l: tensor<?x5xf32> {moe.dims = ["T", 5]}, %x: tensor<?x4xf32> {moe.dims = ["T", 4]}, %w1: tensor<5x4x6xf32>, %w2: tensor<5x6x4xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  // CHECK: moe.topk_router {{.*}} -> (tensor<?x5xf32>, tensor<?x2xi32>, tensor<?x2xf32>, tensor<?x2xi32>)
  %p, %e, %g, %s = moe.topk_router %l {k = 2 : i64, gate = #moe.gate<raw>, capacity = #moe.capacity<none>, priority = #moe.priority<token_order>} : (tensor<?x5xf32>) -> (tensor<*xf32>, tensor<*xi32>, tensor<*xf32>, tensor<*xi32>)
  // CHECK: moe.expert_ffn {{.*}} -> tensor<?x4xf32>
  %y = moe.expert_ffn %x, %e, %g, %s, %w1, %w2 {activation = #moe.activation<relu>} : (tensor<?x4xf32>, tensor<*xi32>, tensor<*xf32>, tensor<*xi32>, tensor<5x4x6xf32>, tensor<5x6x4xf32>) -> tensor<*xf32>
  // CHECK: moe.expert_load {{.*}} -> tensor<5xf32>
  %load = moe.expert_load %e, %s {num_experts = 5 : i64} : (tensor<*xi32>, tensor<*xi32>) -> tensor<*xf32>
  return %y, %load : tensor<*xf32>, tensor<*xf32>
}

// -----

// Attention's log-sum-exp result is [B, heads, S].
// CHECK-LABEL: func @attention
func.func @attention(%q: tensor<?x?x8xf32> {moe.dims = ["B", "S", 8]}) -> tensor<*xf32> {
  // CHECK: moe.attention {{.*}} -> (tensor<?x?x8xf32>, tensor<?x2x?xf32>)
  %o, %lse = moe.attention %q, %q, %q {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64, causal} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %lse : tensor<*xf32>
}

// -----

// A static mismatch found only once shapes are known is reported at its op.
func.func @late_mismatch(%x: tensor<?x4xf32> {moe.dims = ["T", 4]}, %w: tensor<4x6xf32>, %v: tensor<5x2xf32>) -> tensor<*xf32> {
  %h = moe.linear %x, %w : (tensor<?x4xf32>, tensor<4x6xf32>) -> tensor<*xf32>
  // expected-error @+1 {{weight input dimension must be 6, got 5}}
  %y = moe.linear %h, %v : (tensor<*xf32>, tensor<5x2xf32>) -> tensor<*xf32>
  return %y : tensor<*xf32>
}

// -----

// expected-error @+1 {{argument #0: moe.dims entry 5 : i64 does not fit dimension 1 of 'tensor<?x4xf32>'}}
func.func @bad_dims(%x: tensor<?x4xf32> {moe.dims = ["T", 5]}) {
  return
}

// -----

func.func @unsupported(%x: tensor<4xf32>) -> tensor<4xi1> {
  // expected-error @+1 {{'arith.cmpf' op is not supported in moe programs}}
  %c = arith.cmpf olt, %x, %x : tensor<4xf32>
  return %c : tensor<4xi1>
}
