// RUN: moec-opt %s -split-input-file -moe-lower-to-plan -verify-diagnostics | FileCheck %s

// Buffers: arguments first (bound by name), then constants and temporaries.
// A temporary whose last reader has run is reused by a later value of the
// same dtype and size; a result nobody reads gets no buffer (-1); absent
// optional operands are -1 too.

moe.param @w1 : tensor<4x4xf32> {init = #moe.init<normal>}
moe.param @w2 : tensor<4x4xf32> {init = #moe.init<normal>}

// CHECK-LABEL: func.func @forward
// CHECK-SAME: moe.buffers = [
// CHECK-SAME: {bind = @w1, dims = [4, 4], id = 0 : i64, kind = "param", type = f32}
// CHECK-SAME: {bind = @w2, dims = [4, 4], id = 1 : i64, kind = "param", type = f32}
// CHECK-SAME: {bind = "x", dims = ["B", "S", 4], id = 2 : i64, kind = "input", type = f32}
// CHECK-SAME: {dims = ["B", "S", 4], id = 3 : i64, kind = "temp", type = f32}
// CHECK-SAME: {dims = ["B", "S", 4], id = 4 : i64, kind = "temp", type = f32}
// CHECK-NOT: id = 5
func.func @forward(%w1: tensor<4x4xf32> {moe.param = @w1}, %w2: tensor<4x4xf32> {moe.param = @w2},
                   %x: tensor<?x?x4xf32> {moe.input = "x", moe.dims = ["B", "S", 4]})
    -> (tensor<?x?x4xf32> {moe.output = "y"}) attributes {moe.entry = "forward"} {
  // CHECK: moe.linear {{.*}} {moe.in = array<i64: 2, 0, -1>, moe.out = array<i64: 3>, moe.step = 0 : i64}
  %h = moe.linear %x, %w1 : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
  // The log-sum-exp result is never read.
  // CHECK: moe.attention {{.*}} moe.in = array<i64: 3, 3, 3, -1, -1>, moe.out = array<i64: 4, -1>, moe.step = 1 : i64
  %a, %lse = moe.attention %h, %h, %h {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64, causal} : (tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> (tensor<?x?x4xf32>, tensor<?x2x?xf32>)
  // %h is dead after the attention: its buffer 3 holds %o.
  // CHECK: moe.linear {{.*}} {moe.in = array<i64: 4, 1, -1>, moe.out = array<i64: 3>, moe.step = 2 : i64}
  %o = moe.linear %a, %w2 : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
  // CHECK: return {moe.in = array<i64: 3>}
  return %o : tensor<?x?x4xf32>
}

// -----

// The optimizer updates its parameter and moments in place when it is their
// last reader; constants become buffers with their values.

moe.param @p : tensor<8xf32> {init = #moe.init<normal>}
moe.state @m : tensor<8xf32> {dims = [8], like = @p}
moe.state @v : tensor<8xf32> {dims = [8], like = @p}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: {dims = [], id = 5 : i64, kind = "temp", type = f32}
// CHECK-SAME: {dims = [], id = 6 : i64, kind = "const", type = f32, value = dense<1.000000e+00> : tensor<f32>}
func.func @train_step(%p: tensor<8xf32> {moe.param = @p}, %m: tensor<8xf32> {moe.state = @m},
                      %v: tensor<8xf32> {moe.state = @v}, %g: tensor<8xf32> {moe.input = "grad"},
                      %step: tensor<i64> {moe.input = "step"})
    -> (tensor<8xf32> {moe.update = @p}, tensor<8xf32> {moe.update = @m}, tensor<8xf32> {moe.update = @v})
    attributes {moe.entry = "train_step"} {
  %lr = moe.lr_schedule %step {kind = #moe.schedule<constant>, base_lr = 0.1 : f64} : (tensor<i64>) -> tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  // CHECK: moe.adam_update {{.*}} moe.in = array<i64: 0, 3, 1, 2, 4, 5, 6>, moe.out = array<i64: 0, 1, 2>
  %p1, %m1, %v1 = moe.adam_update %p, %g, %m, %v, %step, %lr, %one {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %p1, %m1, %v1 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A parameter read after its update cannot be overwritten in place: the
// update goes to a temporary that the runtime copies back at the end.

moe.param @p : tensor<8xf32> {init = #moe.init<normal>}
moe.state @m : tensor<8xf32> {dims = [8], like = @p}

// CHECK-LABEL: func.func @late_reader
func.func @late_reader(%p: tensor<8xf32> {moe.param = @p}, %m: tensor<8xf32> {moe.state = @m},
                       %lr: tensor<f32> {moe.input = "lr"})
    -> (tensor<8xf32> {moe.update = @p}, tensor<8xf32> {moe.update = @m}, tensor<f32> {moe.output = "norm"})
    attributes {moe.entry = "late"} {
  // CHECK: moe.sgd_update {{.*}} moe.out = array<i64: 3, 1>
  %p1, %m1 = moe.sgd_update %p, %p, %m, %lr, %lr : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>)
  %n = moe.global_norm %p : (tensor<8xf32>) -> tensor<f32>
  return %p1, %m1, %n : tensor<8xf32>, tensor<8xf32>, tensor<f32>
}

// -----

// A row_norm parameter's step reads it through moe.rescale_rows (in a
// kernel of its own) and updates the rescaled value: nothing reads the
// parameter after the rescale, so the update still writes in place.

moe.param @wg : tensor<4x8xf32> {init = #moe.init<orthogonal>, row_norm = 1.5 : f64}
moe.state @m : tensor<4x8xf32> {dims = [4, 8], like = @wg}

// CHECK-LABEL: func.func @rescaled
func.func @rescaled(%p: tensor<4x8xf32> {moe.param = @wg}, %m: tensor<4x8xf32> {moe.state = @m},
                    %lr: tensor<f32> {moe.input = "lr"})
    -> (tensor<4x8xf32> {moe.update = @wg}, tensor<4x8xf32> {moe.update = @m})
    attributes {moe.entry = "rescaled"} {
  // CHECK: moe.rescale_rows {{.*}}moe.in = array<i64: 0>, moe.out = array<i64: 3>
  %r = moe.kernel row_scale tiles <threads = 256, rows_per_block = 32> {
    %0 = moe.rescale_rows %p {norm = 1.5 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    moe.yield %0 : tensor<4x8xf32>
  } : tensor<4x8xf32>
  // CHECK: moe.sgd_update {{.*}}moe.in = array<i64: 3, 3, 1, 2, 2>, moe.out = array<i64: 0, 1>
  %p1, %m1 = moe.kernel optimizer tiles <threads = 256, items = 4> {
    %1:2 = moe.sgd_update %r, %r, %m, %lr, %lr : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
    moe.yield %1#0, %1#1 : tensor<4x8xf32>, tensor<4x8xf32>
  } : tensor<4x8xf32>, tensor<4x8xf32>
  return %p1, %m1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

moe.param @p : tensor<8xf32> {init = #moe.init<normal>}

// expected-error @+1 {{argument #1 is bound to nothing: it needs moe.param, moe.state or moe.input}}
func.func @unbound(%p: tensor<8xf32> {moe.param = @p}, %q: tensor<8xf32>) -> (tensor<f32> {moe.output = "n"}) attributes {moe.entry = "e"} {
  %n = moe.global_norm %p, %q : (tensor<8xf32>, tensor<8xf32>) -> tensor<f32>
  return %n : tensor<f32>
}

// -----

// A fused group runs as one kernel: the residual add may not take the
// buffer of the linear's input even though the linear read it first, since
// other blocks of the same GEMM still read it. The buffer is free again
// after the kernel. Kernel results share the buffers of what they yield.

moe.param @w : tensor<4x4xf32> {init = #moe.init<normal>}

// CHECK-LABEL: func.func @fused_residual
func.func @fused_residual(%w: tensor<4x4xf32> {moe.param = @w},
                          %x: tensor<?x?x4xf32> {moe.input = "x", moe.dims = ["B", "S", 4]})
    -> (tensor<?x?x4xf32> {moe.output = "y"}) attributes {moe.entry = "forward"} {
  // CHECK: moe.kernel elementwise
  // CHECK-NEXT: arith.addf {{.*}} moe.out = array<i64: 2>
  %h = moe.kernel elementwise tiles <threads = 256, items = 4> {
    %0 = arith.addf %x, %x : tensor<?x?x4xf32>
    moe.yield %0 : tensor<?x?x4xf32>
  } : tensor<?x?x4xf32>
  // CHECK: moe.kernel gemm
  // CHECK-NEXT: moe.linear {{.*}}moe.in = array<i64: 2, 0, -1>{{.*}}moe.out = array<i64: 3>
  // Not buffer 2: the linear of the same kernel still reads it.
  // CHECK-NEXT: arith.addf {{.*}}moe.in = array<i64: 3, 1>, moe.out = array<i64: 4>
  %r = moe.kernel gemm tiles <threads = 256, tile_m = 64, tile_n = 32, tile_k = 16> {
    %l = moe.linear %h, %w : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
    %0 = arith.addf %l, %x : tensor<?x?x4xf32>
    moe.yield %0 : tensor<?x?x4xf32>
  } : tensor<?x?x4xf32>
  // After the gemm kernel, its buffers 2 and 3 are free again (the last
  // freed is taken first).
  // CHECK: moe.kernel elementwise
  // CHECK-NEXT: arith.mulf {{.*}}moe.in = array<i64: 4, 4>{{.*}}moe.out = array<i64: 3>
  %y = moe.kernel elementwise tiles <threads = 256, items = 4> {
    %0 = arith.mulf %r, %r : tensor<?x?x4xf32>
    moe.yield %0 : tensor<?x?x4xf32>
  } : tensor<?x?x4xf32>
  // CHECK: return {moe.in = array<i64: 3>}
  return %y : tensor<?x?x4xf32>
}

// -----

// Views: moe.split_tokens and moe.merge_tokens run no step; their results
// are "view" buffers over the storage of the temporary they view (a view
// of a view names the first), and that temporary stays reserved until the
// last reader of any of its views: %y below may not take buffer 2 while
// the merged view is still to be read.

moe.param @w : tensor<8x8xf32> {init = #moe.init<normal>}

// CHECK-LABEL: func.func @views
// CHECK-SAME: {dims = ["B", "S", 8], id = 2 : i64, kind = "temp", type = f32}
// CHECK-SAME: {dims = ["B", "4*S", 2], id = 3 : i64, kind = "view", of = 2 : i64, type = f32}
// CHECK-SAME: {dims = ["B", "S", 8], id = 4 : i64, kind = "view", of = 2 : i64, type = f32}
// CHECK-SAME: {dims = ["B", "S", 8], id = 5 : i64, kind = "temp", type = f32}
func.func @views(%w: tensor<8x8xf32> {moe.param = @w},
                 %x: tensor<?x?x8xf32> {moe.input = "x", moe.dims = ["B", "S", 8]})
    -> (tensor<?x?x8xf32> {moe.output = "y"}) attributes {moe.entry = "forward"} {
  // CHECK: moe.linear {{.*}} {moe.in = array<i64: 1, 0, -1>, moe.out = array<i64: 2>, moe.step = 0 : i64}
  %h = moe.linear %x, %w : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: moe.split_tokens {{.*}} {moe.out = array<i64: 3>, parts = 4 : i64}
  %s = moe.split_tokens %h {parts = 4 : i64} : (tensor<?x?x8xf32>) -> tensor<?x?x2xf32>
  // CHECK: moe.merge_tokens {{.*}} {moe.out = array<i64: 4>, parts = 4 : i64}
  %m = moe.merge_tokens %s {parts = 4 : i64} : (tensor<?x?x2xf32>) -> tensor<?x?x8xf32>
  // CHECK: moe.linear {{.*}} {moe.in = array<i64: 4, 0, -1>, moe.out = array<i64: 5>, moe.step = 1 : i64}
  %y = moe.linear %m, %w : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}

// -----

// A program updates each target at most once.

moe.param @p : tensor<8xf32> {init = #moe.init<normal>, frozen}

// expected-error @+1 {{results #0 and #1 both update @p; a program updates each target at most once}}
func.func @twice(%p: tensor<8xf32> {moe.param = @p}) -> (tensor<8xf32> {moe.update = @p}, tensor<8xf32> {moe.update = @p}) attributes {moe.entry = "e"} {
  %a = arith.addf %p, %p : tensor<8xf32>
  %b = arith.mulf %p, %p : tensor<8xf32>
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}
