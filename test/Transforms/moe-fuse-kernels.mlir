// RUN: moec-opt %s -moe-fuse-kernels | FileCheck %s

// A block of the foundation model (pre-norm attention is left out): the
// router's linear, top-k, losses and load form one kernel even though the
// statistics come later in program order; the expert FFN takes its residual
// add; a linear takes its activation and the residual add after it; scalar
// loss arithmetic fuses into one kernel.

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
    // CHECK: %[[L:.*]] = moe.linear {{.*}} {moe.group = 0 : i64, moe.kernel = "router"}
    %logits = moe.linear %x, %wr : (tensor<?x8xf32>, tensor<8x4xf32>) -> tensor<?x4xf32>
    // CHECK-NEXT: moe.topk_router %[[L]] {{{.*}}moe.group = 0 : i64
    %p, %e, %gt, %s = moe.topk_router %logits {k = 2 : i64, gate = #moe.gate<raw>, capacity = #moe.capacity<none>, priority = #moe.priority<token_order>} : (tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x2xi32>, tensor<?x2xf32>, tensor<?x2xi32>)
    // The statistics were moved up into the router's kernel.
    // CHECK-NEXT: moe.expert_load {{.*}}moe.group = 0 : i64
    // CHECK-NEXT: moe.switch_loss {{.*}}moe.group = 0 : i64
    // CHECK-NEXT: moe.z_loss {{.*}}moe.group = 0 : i64
    // CHECK-NEXT: %[[Y:.*]] = moe.expert_ffn {{.*}}moe.group = 1 : i64, moe.kernel = "experts"
    %y = moe.expert_ffn %x, %e, %gt, %s, %w1, %w2 {activation = #moe.activation<silu>} : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x8x16xf32>, tensor<4x16x8xf32>) -> tensor<?x8xf32>
    // CHECK-NEXT: %[[R:.*]] = arith.addf %{{.*}}, %[[Y]] {moe.group = 1 : i64}
    %r = arith.addf %x, %y : tensor<?x8xf32>
    // CHECK-NEXT: %[[N:.*]] = moe.rms_norm %[[R]], {{.*}} {moe.group = 2 : i64, moe.kernel = "norm"}
    %n = moe.rms_norm %r, %g : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
    // CHECK-NEXT: moe.linear %[[N]], {{.*}} {moe.group = 3 : i64, moe.kernel = "gemm"}
    %h = moe.linear %n, %wf : (tensor<?x8xf32>, tensor<8x32xf32>) -> tensor<?x32xf32>
    // CHECK-NEXT: moe.activation {{.*}}moe.group = 3 : i64
    %a = moe.activation %h {kind = #moe.activation<gelu_tanh>} : (tensor<?x32xf32>) -> tensor<?x32xf32>
    // CHECK-NEXT: moe.linear {{.*}} {moe.group = 4 : i64, moe.kernel = "gemm"}
    %o = moe.linear %a, %wg : (tensor<?x32xf32>, tensor<32x8xf32>) -> tensor<?x8xf32>
    // CHECK-NEXT: arith.addf {{.*}} {moe.group = 4 : i64}
    %out = arith.addf %r, %o : tensor<?x8xf32>
    %load = moe.expert_load %e, %s {num_experts = 4 : i64} : (tensor<?x2xi32>, tensor<?x2xi32>) -> tensor<4xf32>
    %sw = moe.switch_loss %p, %e {variant = #moe.balance<all_slots>} : (tensor<?x4xf32>, tensor<?x2xi32>) -> tensor<f32>
    %z = moe.z_loss %logits : (tensor<?x4xf32>) -> tensor<f32>
    // CHECK: arith.constant
    %c1 = arith.constant dense<1.0e-2> : tensor<f32>
    // CHECK-NEXT: arith.mulf {{.*}} {moe.group = 5 : i64, moe.kernel = "scalar"}
    %t1 = arith.mulf %sw, %c1 : tensor<f32>
    // CHECK-NEXT: arith.constant
    %c2 = arith.constant dense<1.0e-3> : tensor<f32>
    // CHECK-NEXT: arith.mulf {{.*}} {moe.group = 5 : i64}
    %t2 = arith.mulf %z, %c2 : tensor<f32>
    // CHECK-NEXT: arith.addf {{.*}} {moe.group = 5 : i64}
    %aux = arith.addf %t1, %t2 : tensor<f32>
    return %out, %aux, %load : tensor<?x8xf32>, tensor<f32>, tensor<4xf32>
  }
}
