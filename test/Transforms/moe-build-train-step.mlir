// RUN: moec-opt %s -split-input-file -moe-build-backward -moe-build-train-step -verify-diagnostics | FileCheck %s

// AdamW with gradient clipping: one pair of moments per trainable parameter,
// the learning rate from the schedule, the clipping factor from the global
// gradient norm, and in-place-updatable results.

module attributes {moe.training = {optimizer = "adamw", schedule = "linear", lr = 1.0e-3 : f64, warmup = 10 : i64, total_steps = 100 : i64, final_lr = 1.0e-5 : f64, clip_norm = 0.5 : f64, beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64}} {
  moe.param @w : tensor<4x3xf32> {init = #moe.init<normal>}
  moe.param @b : tensor<3xf32> {init = #moe.init<zeros>}
  moe.param @frozen : tensor<3xf32> {init = #moe.init<ones>, frozen}

  func.func @loss(%w: tensor<4x3xf32> {moe.param = @w}, %b: tensor<3xf32> {moe.param = @b},
                  %g: tensor<3xf32> {moe.param = @frozen},
                  %x: tensor<?x4xf32> {moe.input = "x", moe.dims = ["T", 4]},
                  %t: tensor<?xi32> {moe.input = "targets", moe.dims = ["T"]})
      -> (tensor<f32> {moe.output = "loss"}) attributes {moe.entry = "loss"} {
    %y = moe.linear %x, %w bias %b : (tensor<?x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
    %n = moe.rms_norm %y, %g : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
    %ce, %count = moe.cross_entropy %n, %t : (tensor<?x3xf32>, tensor<?xi32>) -> (tensor<f32>, tensor<f32>)
    return %ce : tensor<f32>
  }
}

// CHECK: moe.param @w
// CHECK-NEXT: moe.state @opt.m.w : tensor<4x3xf32> {dims = [4, 3], like = @w}
// CHECK-NEXT: moe.state @opt.v.w : tensor<4x3xf32> {dims = [4, 3], like = @w}
// CHECK-NEXT: moe.param @b
// CHECK-NEXT: moe.state @opt.m.b
// CHECK-NEXT: moe.state @opt.v.b
// CHECK-NEXT: moe.param @frozen
// CHECK-NOT: moe.state

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x3xf32> {moe.param = @w}
// CHECK-SAME: %[[MW:[^:]*]]: tensor<4x3xf32> {moe.state = @opt.m.w}, %[[VW:[^:]*]]: tensor<4x3xf32> {moe.state = @opt.v.w}
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<i64> {moe.input = "step"}
// CHECK-SAME: -> (tensor<f32> {moe.output = "loss"}, tensor<f32> {moe.output = "lr"}, tensor<f32> {moe.output = "grad_norm"}, tensor<4x3xf32> {moe.update = @w}, tensor<4x3xf32> {moe.update = @opt.m.w}, tensor<4x3xf32> {moe.update = @opt.v.w}, tensor<3xf32> {moe.update = @b}, tensor<3xf32> {moe.update = @opt.m.b}, tensor<3xf32> {moe.update = @opt.v.b})
// CHECK-SAME: moe.entry = "train_step"
// CHECK:      %[[DX:.*]], %[[DW:.*]], %[[DB:.*]] = moe.linear_grad
// CHECK:      %[[LR:.*]] = moe.lr_schedule %[[STEP]] {base_lr = 1.000000e-03 : f64, final_lr = 1.000000e-05 : f64, kind = #moe.schedule<linear>, total_steps = 100 : i64, warmup = 10 : i64}
// CHECK:      %[[NORM:.*]] = moe.global_norm %[[DW]], %[[DB]]
// CHECK:      %[[SUM:.*]] = arith.addf %[[NORM]], %{{.*}}
// CHECK:      %[[RATIO:.*]] = arith.divf %{{.*}}, %[[SUM]]
// CHECK:      %[[SCALE:.*]] = arith.minimumf %[[RATIO]], %{{.*}}
// CHECK:      moe.adam_update %[[W]], %[[DW]], %[[MW]], %[[VW]], %[[STEP]], %[[LR]], %[[SCALE]] {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, decoupled, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64}
// CHECK:      moe.adam_update
// CHECK-NOT:  moe.adam_update
// CHECK:      return

// -----

// SGD with momentum keeps one moment per parameter; without clipping the
// gradient scale is 1.

module attributes {moe.training = {optimizer = "sgd", schedule = "constant", lr = 0.1 : f64, momentum = 0.9 : f64}} {
  moe.param @w : tensor<4x3xf32> {init = #moe.init<normal>}
  func.func @loss(%w: tensor<4x3xf32> {moe.param = @w}, %x: tensor<?x4xf32> {moe.input = "x", moe.dims = ["T", 4]}, %t: tensor<?xi32> {moe.input = "targets", moe.dims = ["T"]})
      -> (tensor<f32> {moe.output = "loss"}) attributes {moe.entry = "loss"} {
    %y = moe.linear %x, %w : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
    %ce, %count = moe.cross_entropy %y, %t : (tensor<?x3xf32>, tensor<?xi32>) -> (tensor<f32>, tensor<f32>)
    return %ce : tensor<f32>
  }
}

// CHECK: moe.state @opt.m.w
// CHECK-NOT: moe.state @opt.v.w
// CHECK-LABEL: func.func @train_step
// CHECK: moe.global_norm
// CHECK-NEXT: %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK: moe.sgd_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ONE]] {momentum = 9.000000e-01 : f64}

// -----

// A row_norm parameter (the X-MoE gate's expert embeddings) is rescaled at
// the start of the step; the forward, the backward and the optimizer update
// read the rescaled value, and the update writes it back.

module attributes {moe.training = {optimizer = "sgd", schedule = "constant", lr = 0.1 : f64}} {
  moe.param @wg : tensor<4x16xf32> {init = #moe.init<orthogonal>, scale = 0.32 : f64, row_norm = 1.5 : f64}
  moe.param @w : tensor<16x4xf32> {init = #moe.init<normal>}
  func.func @loss(%wg: tensor<4x16xf32> {moe.param = @wg}, %w: tensor<16x4xf32> {moe.param = @w},
                  %x: tensor<?x16xf32> {moe.input = "x", moe.dims = ["T", 16]},
                  %t: tensor<?xi32> {moe.input = "targets", moe.dims = ["T"]})
      -> (tensor<f32> {moe.output = "loss"}) attributes {moe.entry = "loss"} {
    %n = moe.normalize_rows %wg : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %l = moe.linear %x, %n {transpose_weight} : (tensor<?x16xf32>, tensor<4x16xf32>) -> tensor<?x4xf32>
    %f = moe.finite_or_min %l : (tensor<?x4xf32>) -> tensor<?x4xf32>
    %h = moe.linear %x, %w : (tensor<?x16xf32>, tensor<16x4xf32>) -> tensor<?x4xf32>
    %s = arith.addf %f, %h : tensor<?x4xf32>
    %ce, %count = moe.cross_entropy %s, %t : (tensor<?x4xf32>, tensor<?xi32>) -> (tensor<f32>, tensor<f32>)
    return %ce : tensor<f32>
  }
}

// The backward program reads the parameter as it is.
// CHECK-LABEL: func.func @backward
// CHECK-NOT:  moe.rescale_rows
// CHECK:      return
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[WG:[^:]*]]: tensor<4x16xf32> {moe.param = @wg}
// CHECK-SAME: %[[W:[^:]*]]: tensor<16x4xf32> {moe.param = @w}
// CHECK-NEXT: %[[R:.*]] = moe.rescale_rows %[[WG]] {norm = 1.500000e+00 : f64} : (tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NOT:  moe.rescale_rows
// CHECK-NEXT: %[[N:.*]] = moe.normalize_rows %[[R]]
// CHECK:      moe.finite_or_min_grad
// CHECK:      %[[DN:.*]] = moe.normalize_rows_grad %[[R]], %{{.*}} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK:      %[[NEW:.*]], %{{.*}} = moe.sgd_update %[[R]], %[[DN]],
// CHECK:      moe.sgd_update %[[W]],
// CHECK:      return {{.*}}%[[NEW]]

// -----

// expected-error @+1 {{unknown optimizer 'lion' (adam, adamw, sgd)}}
module attributes {moe.training = {optimizer = "lion", schedule = "constant", lr = 0.1 : f64}} {
  moe.param @w : tensor<3xf32> {init = #moe.init<normal>}
  func.func @loss(%w: tensor<3xf32> {moe.param = @w}) -> (tensor<f32> {moe.output = "loss"}) attributes {moe.entry = "loss"} {
    %z = moe.z_loss %w : (tensor<3xf32>) -> tensor<f32>
    return %z : tensor<f32>
  }
}

// -----

// Block coordinate descent: train_step trains the parameters outside the
// phases' group with the main optimizer, counted by the input "step";
// train_step_g trains only the group's with its own, counted by
// "step:gate" and reported as "lr:gate". Each parameter has one set of
// moments, and neither step builds the other block's weight gradient into
// its results.

module attributes {moe.training = {optimizer = "adam", schedule = "constant", lr = 1.0e-3 : f64, total_steps = 6 : i64,
    groups = [{name = "gate", patterns = ["r"], optimizer = "sgd", schedule = "constant", lr = 1.0 : f64, total_steps = 4 : i64}],
    phases = {kind = "coordinate_descent", group = "gate", g_steps = "every", period = 5 : i64, length = 2 : i64, offset = 0 : i64}}} {
  moe.param @w : tensor<4x3xf32> {init = #moe.init<normal>}
  moe.param @r : tensor<4x3xf32> {init = #moe.init<normal>, group = "gate"}
  func.func @loss(%w: tensor<4x3xf32> {moe.param = @w}, %r: tensor<4x3xf32> {moe.param = @r},
                  %x: tensor<?x4xf32> {moe.input = "x", moe.dims = ["T", 4]},
                  %t: tensor<?xi32> {moe.input = "targets", moe.dims = ["T"]})
      -> (tensor<f32> {moe.output = "loss"}) attributes {moe.entry = "loss"} {
    %a = moe.linear %x, %w : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
    %b = moe.linear %x, %r : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
    %s = arith.addf %a, %b : tensor<?x3xf32>
    %ce, %count = moe.cross_entropy %s, %t : (tensor<?x3xf32>, tensor<?xi32>) -> (tensor<f32>, tensor<f32>)
    return %ce : tensor<f32>
  }
  func.func @loss_g(%w: tensor<4x3xf32> {moe.param = @w}, %r: tensor<4x3xf32> {moe.param = @r},
                    %x: tensor<?x4xf32> {moe.input = "x", moe.dims = ["T", 4]},
                    %t: tensor<?xi32> {moe.input = "targets", moe.dims = ["T"]})
      -> (tensor<f32> {moe.output = "loss"}) attributes {moe.entry = "loss_g"} {
    %a = moe.linear %x, %w : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
    %b = moe.linear %x, %r : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
    %s = arith.addf %a, %b : tensor<?x3xf32>
    %ce, %count = moe.cross_entropy %s, %t : (tensor<?x3xf32>, tensor<?xi32>) -> (tensor<f32>, tensor<f32>)
    return %ce : tensor<f32>
  }
}

// CHECK: moe.param @w
// CHECK-NEXT: moe.state @opt.m.w : tensor<4x3xf32> {dims = [4, 3], like = @w}
// CHECK-NEXT: moe.state @opt.v.w : tensor<4x3xf32> {dims = [4, 3], like = @w}
// CHECK-NEXT: moe.param @r : tensor<4x3xf32> {group = "gate", init = #moe.init<normal>}
// CHECK-NEXT: moe.state @opt.m.r : tensor<4x3xf32> {dims = [4, 3], like = @r}
// CHECK-NEXT: func.func @loss(

// CHECK-LABEL: func.func @backward(
// CHECK-SAME: -> (tensor<f32> {moe.output = "loss"}, tensor<4x3xf32> {moe.output = "grad:w"})
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x3xf32> {moe.param = @w}
// CHECK-SAME: {moe.state = @opt.m.w}, %{{[^:]*}}: tensor<4x3xf32> {moe.state = @opt.v.w}, %[[STEP:[^:]*]]: tensor<i64> {moe.input = "step"})
// CHECK-SAME: -> (tensor<f32> {moe.output = "loss"}, tensor<f32> {moe.output = "lr"}, tensor<f32> {moe.output = "grad_norm"}, tensor<4x3xf32> {moe.update = @w}, tensor<4x3xf32> {moe.update = @opt.m.w}, tensor<4x3xf32> {moe.update = @opt.v.w})
// CHECK:      %[[LR:.*]] = moe.lr_schedule %[[STEP]] {base_lr = 1.000000e-03 : f64, kind = #moe.schedule<constant>, total_steps = 6 : i64}
// CHECK:      moe.adam_update %[[W]], %{{.*}}, %{{.*}}, %{{.*}}, %[[STEP]], %[[LR]],
// CHECK-NOT:  moe.sgd_update
// CHECK:      return

// CHECK-LABEL: func.func @backward_g(
// CHECK-SAME: -> (tensor<f32> {moe.output = "loss"}, tensor<4x3xf32> {moe.output = "grad:r"})
// CHECK-LABEL: func.func @train_step_g(
// CHECK-SAME: %[[R:[^:]*]]: tensor<4x3xf32> {moe.param = @r}
// CHECK-SAME: {moe.state = @opt.m.r}, %[[GSTEP:[^:]*]]: tensor<i64> {moe.input = "step:gate"})
// CHECK-SAME: -> (tensor<f32> {moe.output = "loss"}, tensor<f32> {moe.output = "lr:gate"}, tensor<f32> {moe.output = "grad_norm"}, tensor<4x3xf32> {moe.update = @r}, tensor<4x3xf32> {moe.update = @opt.m.r})
// CHECK-SAME: moe.entry = "train_step_g"
// CHECK:      %[[GLR:.*]] = moe.lr_schedule %[[GSTEP]] {base_lr = 1.000000e+00 : f64, kind = #moe.schedule<constant>, total_steps = 4 : i64}
// CHECK:      moe.sgd_update %[[R]], %{{.*}}, %{{.*}}, %[[GLR]],
// CHECK-NOT:  moe.adam_update
// CHECK:      return

// -----

// Parameter groups without phases: one train step updates every group with
// its own optimizer, each counted by its own input.

module attributes {moe.training = {optimizer = "adam", schedule = "constant", lr = 1.0e-3 : f64, total_steps = 6 : i64,
    groups = [{name = "gate", patterns = ["r"], optimizer = "sgd", schedule = "linear", lr = 0.5 : f64, warmup = 2 : i64, total_steps = 6 : i64, momentum = 0.9 : f64}]}} {
  moe.param @w : tensor<4x3xf32> {init = #moe.init<normal>}
  moe.param @r : tensor<4x3xf32> {init = #moe.init<normal>, group = "gate"}
  func.func @loss(%w: tensor<4x3xf32> {moe.param = @w}, %r: tensor<4x3xf32> {moe.param = @r},
                  %x: tensor<?x4xf32> {moe.input = "x", moe.dims = ["T", 4]},
                  %t: tensor<?xi32> {moe.input = "targets", moe.dims = ["T"]})
      -> (tensor<f32> {moe.output = "loss"}) attributes {moe.entry = "loss"} {
    %a = moe.linear %x, %w : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
    %b = moe.linear %x, %r : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
    %s = arith.addf %a, %b : tensor<?x3xf32>
    %ce, %count = moe.cross_entropy %s, %t : (tensor<?x3xf32>, tensor<?xi32>) -> (tensor<f32>, tensor<f32>)
    return %ce : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<i64> {moe.input = "step"}, %[[GSTEP:[^:]*]]: tensor<i64> {moe.input = "step:gate"})
// CHECK-SAME: -> (tensor<f32> {moe.output = "loss"}, tensor<f32> {moe.output = "lr"}, tensor<f32> {moe.output = "lr:gate"}, tensor<f32> {moe.output = "grad_norm"}, tensor<4x3xf32> {moe.update = @w}, tensor<4x3xf32> {moe.update = @opt.m.w}, tensor<4x3xf32> {moe.update = @opt.v.w}, tensor<4x3xf32> {moe.update = @r}, tensor<4x3xf32> {moe.update = @opt.m.r})
// CHECK:      %[[LR:.*]] = moe.lr_schedule %[[STEP]] {base_lr = 1.000000e-03 : f64
// CHECK:      %[[GLR:.*]] = moe.lr_schedule %[[GSTEP]] {base_lr = 5.000000e-01 : f64, kind = #moe.schedule<linear>, total_steps = 6 : i64, warmup = 2 : i64}
// CHECK:      moe.adam_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[STEP]], %[[LR]],
// CHECK:      moe.sgd_update %{{.*}}, %{{.*}}, %{{.*}}, %[[GLR]], %{{.*}} {momentum = 9.000000e-01 : f64}
// CHECK-NOT:  train_step_g

// -----

// Batch norm's running statistics: frozen parameters the objective updates
// (moe.update results). train_step keeps those updates next to the
// optimizer's, and the statistics get neither a gradient nor a moment.

module attributes {moe.training = {optimizer = "sgd", schedule = "constant", lr = 0.1 : f64}} {
  moe.param @bn.gamma : tensor<4xf32> {init = #moe.init<ones>}
  moe.param @bn.beta : tensor<4xf32> {init = #moe.init<zeros>}
  moe.param @bn.mean : tensor<4xf32> {init = #moe.init<zeros>, frozen}
  moe.param @bn.var : tensor<4xf32> {init = #moe.init<ones>, frozen}
  func.func @loss(%g: tensor<4xf32> {moe.param = @bn.gamma}, %b: tensor<4xf32> {moe.param = @bn.beta},
                  %rm: tensor<4xf32> {moe.param = @bn.mean}, %rv: tensor<4xf32> {moe.param = @bn.var},
                  %x: tensor<?x4xf32> {moe.input = "x", moe.dims = ["T", 4]},
                  %m: tensor<?xi32> {moe.input = "mask", moe.dims = ["T"]},
                  %t: tensor<?xi32> {moe.input = "targets", moe.dims = ["T"]})
      -> (tensor<f32> {moe.output = "loss"}, tensor<4xf32> {moe.update = @bn.mean}, tensor<4xf32> {moe.update = @bn.var})
      attributes {moe.entry = "loss"} {
    %y, %nm, %nv = moe.batch_norm %x, %g, %b, %rm, %rv mask %m {training} : (tensor<?x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<?xi32>) -> (tensor<?x4xf32>, tensor<4xf32>, tensor<4xf32>)
    %ce, %count = moe.cross_entropy %y, %t : (tensor<?x4xf32>, tensor<?xi32>) -> (tensor<f32>, tensor<f32>)
    return %ce, %nm, %nv : tensor<f32>, tensor<4xf32>, tensor<4xf32>
  }
}

// CHECK: moe.param @bn.gamma
// CHECK-NEXT: moe.state @opt.m.bn.gamma
// CHECK-NEXT: moe.param @bn.beta
// CHECK-NEXT: moe.state @opt.m.bn.beta
// CHECK-NEXT: moe.param @bn.mean
// CHECK-NEXT: moe.param @bn.var
// CHECK-NOT: moe.state
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {moe.output = "loss"}, tensor<4xf32> {moe.update = @bn.mean}, tensor<4xf32> {moe.update = @bn.var}, tensor<f32> {moe.output = "lr"}, tensor<f32> {moe.output = "grad_norm"}, tensor<4xf32> {moe.update = @bn.gamma}, tensor<4xf32> {moe.update = @opt.m.bn.gamma}, tensor<4xf32> {moe.update = @bn.beta}, tensor<4xf32> {moe.update = @opt.m.bn.beta})
// CHECK:      %[[Y:.*]], %[[NM:.*]], %[[NV:.*]] = moe.batch_norm {{.*}} {training}
// CHECK:      moe.batch_norm_grad {{.*}} mask {{.*}} {training}
// CHECK:      return %{{[^,]*}}, %[[NM]], %[[NV]],

// -----

// An objective may update frozen parameters and state only: a trainable
// one would be written twice, by the objective and by the optimizer.

module attributes {moe.training = {optimizer = "sgd", schedule = "constant", lr = 0.1 : f64}} {
  moe.param @w : tensor<3xf32> {init = #moe.init<normal>}
  // expected-error @+1 {{result #1 updates the trainable parameter @w, which the optimizer updates too; only frozen parameters and state may be updated by the objective}}
  func.func @loss(%w: tensor<3xf32> {moe.param = @w}) -> (tensor<f32> {moe.output = "loss"}, tensor<3xf32> {moe.update = @w}) attributes {moe.entry = "loss"} {
    %z = moe.z_loss %w : (tensor<3xf32>) -> tensor<f32>
    %h = arith.addf %w, %w : tensor<3xf32>
    return %z, %h : tensor<f32>, tensor<3xf32>
  }
}
