// RUN: moec-opt %s -split-input-file -moe-build-backward -verify-diagnostics | FileCheck %s

// The gradient program of a two-layer model: gradients are built in reverse
// program order, a value read twice sums its gradients, and a frozen
// parameter gets none.

moe.param @emb : tensor<10x4xf32> {init = #moe.init<normal>}
moe.param @w : tensor<4x4xf32> {init = #moe.init<normal>}
moe.param @head : tensor<4x10xf32> {init = #moe.init<normal>, frozen}

func.func @loss(%emb: tensor<10x4xf32> {moe.param = @emb},
                %w: tensor<4x4xf32> {moe.param = @w},
                %head: tensor<4x10xf32> {moe.param = @head},
                %ids: tensor<?x?xi32> {moe.input = "tokens", moe.dims = ["B", "S"]},
                %tgt: tensor<?x?xi32> {moe.input = "targets", moe.dims = ["B", "S"]})
    -> (tensor<f32> {moe.output = "loss"}) attributes {moe.entry = "loss"} {
  %x = moe.embedding %ids, %emb : (tensor<?x?xi32>, tensor<10x4xf32>) -> tensor<?x?x4xf32>
  %h = moe.linear %x, %w : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
  %r = arith.addf %x, %h : tensor<?x?x4xf32>
  %logits = moe.linear %r, %head : (tensor<?x?x4xf32>, tensor<4x10xf32>) -> tensor<?x?x10xf32>
  %ce, %count = moe.cross_entropy %logits, %tgt : (tensor<?x?x10xf32>, tensor<?x?xi32>) -> (tensor<f32>, tensor<f32>)
  return %ce : tensor<f32>
}

// The objective is untouched.
// CHECK-LABEL: func.func @loss
// CHECK: return %{{.*}} : tensor<f32>

// CHECK-LABEL: func.func @backward
// CHECK-SAME: -> (tensor<f32> {moe.output = "loss"}, tensor<10x4xf32> {moe.output = "grad:emb"}, tensor<4x4xf32> {moe.output = "grad:w"})
// CHECK-SAME: moe.entry = "backward"
// CHECK:      %[[X:.*]] = moe.embedding
// CHECK:      %[[H:.*]] = moe.linear %[[X]]
// CHECK:      %[[R:.*]] = arith.addf %[[X]], %[[H]]
// CHECK:      %[[LOGITS:.*]] = moe.linear %[[R]]
// CHECK:      %[[CE:[a-z0-9_]*]], %{{.*}} = moe.cross_entropy %[[LOGITS]]
// CHECK:      %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK:      %[[DLOGITS:.*]] = moe.cross_entropy_grad %[[LOGITS]], %{{.*}}, %[[ONE]]
// CHECK:      %[[DR:.*]], %{{.*}} = moe.linear_grad %[[R]], %{{.*}}, %[[DLOGITS]]
// CHECK:      %[[DX1:.*]], %[[DW:.*]] = moe.linear_grad %[[X]], %{{.*}}, %[[DR]]
// CHECK:      %[[DX:.*]] = arith.addf %[[DR]], %[[DX1]]
// CHECK:      %[[DEMB:.*]] = moe.embedding_grad %{{.*}}, %[[DX]] {vocab = 10 : i64}
// CHECK:      return %[[CE]], %[[DEMB]], %[[DW]]

// -----

// MoE routing: the router gets gradients through the gate weights and, from
// the balance loss, through the probabilities; expert indices get none.

moe.param @router : tensor<4x3xf32> {init = #moe.init<normal>}
moe.param @w1 : tensor<3x4x8xf32> {init = #moe.init<normal>}
moe.param @w2 : tensor<3x8x4xf32> {init = #moe.init<normal>}

func.func @loss(%wr: tensor<4x3xf32> {moe.param = @router},
                %w1: tensor<3x4x8xf32> {moe.param = @w1},
                %w2: tensor<3x8x4xf32> {moe.param = @w2},
                %x: tensor<?x4xf32> {moe.input = "x", moe.dims = ["T", 4]})
    -> (tensor<f32> {moe.output = "loss"}) attributes {moe.entry = "loss"} {
  %logits = moe.linear %x, %wr : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
  %p, %e, %g, %s = moe.topk_router %logits {k = 2 : i64, gate = #moe.gate<raw>, capacity = #moe.capacity<none>, priority = #moe.priority<token_order>} : (tensor<?x3xf32>) -> (tensor<?x3xf32>, tensor<?x2xi32>, tensor<?x2xf32>, tensor<?x2xi32>)
  %y = moe.expert_ffn %x, %e, %g, %s, %w1, %w2 {activation = #moe.activation<gelu_tanh>} : (tensor<?x4xf32>, tensor<?x2xi32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<3x4x8xf32>, tensor<3x8x4xf32>) -> tensor<?x4xf32>
  %l1 = moe.z_loss %y : (tensor<?x4xf32>) -> tensor<f32>
  %l2 = moe.switch_loss %p, %e {variant = #moe.balance<all_slots>} : (tensor<?x3xf32>, tensor<?x2xi32>) -> tensor<f32>
  %l = arith.addf %l1, %l2 : tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @backward
// CHECK:      %[[P:.*]], %[[E:.*]], %[[G:.*]], %[[S:.*]] = moe.topk_router
// CHECK:      %[[DP:.*]] = moe.switch_loss_grad %[[P]], %[[E]]
// CHECK:      %[[DY:.*]] = moe.z_loss_grad
// CHECK:      %{{.*}}, %[[DG:.*]], %[[DW:.*]]:2 = moe.expert_ffn_grad {{.*}}, %[[DY]] {activation = #moe.activation<gelu_tanh>}
// CHECK:      %[[DL:.*]] = moe.topk_router_grad %[[P]], %[[E]], %[[G]], %[[S]] gates_grad %[[DG]] probs_grad %[[DP]] {gate = #moe.gate<raw>}
// CHECK:      %{{.*}}, %[[DWR:.*]] = moe.linear_grad %{{.*}}, %{{.*}}, %[[DL]]
// CHECK:      return %{{.*}}, %[[DWR]], %[[DW]]#0, %[[DW]]#1

// -----

// Mixed precision: an f32 parameter cast to bf16 gets the bf16 gradient cast
// back to f32, and a bf16 value cast up to f32 for the loss gets its gradient
// cast down.

moe.param @w : tensor<4x4xf32> {init = #moe.init<normal>}

func.func @loss(%w: tensor<4x4xf32> {moe.param = @w},
                %x: tensor<?x4xbf16> {moe.input = "x", moe.dims = ["T", 4]},
                %tgt: tensor<?xi32> {moe.input = "targets", moe.dims = ["T"]})
    -> (tensor<f32> {moe.output = "loss"}) attributes {moe.entry = "loss"} {
  %wb = moe.cast %w : (tensor<4x4xf32>) -> tensor<4x4xbf16>
  %h = moe.linear %x, %wb : (tensor<?x4xbf16>, tensor<4x4xbf16>) -> tensor<?x4xbf16>
  %hf = moe.cast %h : (tensor<?x4xbf16>) -> tensor<?x4xf32>
  %ce, %count = moe.cross_entropy %hf, %tgt : (tensor<?x4xf32>, tensor<?xi32>) -> (tensor<f32>, tensor<f32>)
  return %ce : tensor<f32>
}

// CHECK-LABEL: func.func @backward
// CHECK-SAME: -> (tensor<f32> {moe.output = "loss"}, tensor<4x4xf32> {moe.output = "grad:w"})
// CHECK:      %[[DHF:.*]] = moe.cross_entropy_grad {{.*}} -> tensor<?x4xf32>
// CHECK:      %[[DH:.*]] = moe.cast %[[DHF]] : (tensor<?x4xf32>) -> tensor<?x4xbf16>
// CHECK:      %{{.*}}, %[[DWB:.*]] = moe.linear_grad %{{.*}}, %{{.*}}, %[[DH]] : {{.*}} -> (tensor<?x4xbf16>, tensor<4x4xbf16>)
// CHECK:      %[[DW:.*]] = moe.cast %[[DWB]] : (tensor<4x4xbf16>) -> tensor<4x4xf32>
// CHECK:      return %{{.*}}, %[[DW]] : tensor<f32>, tensor<4x4xf32>

// -----

// The X-MoE gate's scores: cosine logits against normalised expert
// embeddings, non-finite logits replaced by the finite minimum. Each gets
// its grad op, with normalize_rows' eps carried over.

moe.param @wg : tensor<4x16xf32> {init = #moe.init<orthogonal>, scale = 0.32 : f64, row_norm = 1.5 : f64}

func.func @loss(%wg: tensor<4x16xf32> {moe.param = @wg}, %x: tensor<?x16xf32> {moe.input = "x", moe.dims = ["T", 16]})
    -> (tensor<f32> {moe.output = "loss"}) attributes {moe.entry = "loss"} {
  %n = moe.normalize_rows %wg {eps = 1.0e-3 : f64} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %l = moe.linear %x, %n {transpose_weight} : (tensor<?x16xf32>, tensor<4x16xf32>) -> tensor<?x4xf32>
  %f = moe.finite_or_min %l : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %z = moe.z_loss %f : (tensor<?x4xf32>) -> tensor<f32>
  return %z : tensor<f32>
}

// CHECK-LABEL: func.func @backward
// CHECK:      %[[N:.*]] = moe.normalize_rows %[[WG:[^ ]*]] {eps
// CHECK:      %[[L:.*]] = moe.linear %[[X:[^,]*]], %[[N]] {transpose_weight}
// CHECK:      %[[F:.*]] = moe.finite_or_min %[[L]]
// CHECK:      %[[DF:.*]] = moe.z_loss_grad %[[F]]
// CHECK:      %[[DL:.*]] = moe.finite_or_min_grad %[[L]], %[[DF]] : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK:      %{{.*}}, %[[DN:.*]] = moe.linear_grad %[[X]], %[[N]], %[[DL]] {transpose_weight}
// CHECK:      %[[DWG:.*]] = moe.normalize_rows_grad %[[WG]], %[[DN]] {eps = 1.000000e-03 : f64} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK:      return %{{.*}}, %[[DWG]]

// -----

// The objective must be a scalar.

moe.param @w : tensor<4xf32> {init = #moe.init<normal>}

func.func @loss(%w: tensor<4xf32> {moe.param = @w}) -> (tensor<4xf32> {moe.output = "loss"}) attributes {moe.entry = "loss"} {
  return %w : tensor<4xf32>
}
// expected-error @-3 {{the objective (result #0) must be a 0-d float tensor, got 'tensor<4xf32>'}}

// -----

// An op on the path from a parameter to the objective without a gradient
// rule is an error.

moe.param @w : tensor<f32> {init = #moe.init<normal>}

func.func @loss(%w: tensor<f32> {moe.param = @w}) -> (tensor<f32> {moe.output = "loss"}) attributes {moe.entry = "loss"} {
  // expected-error @+1 {{'arith.maximumf' op has no gradient rule}}
  %m = arith.maximumf %w, %w : tensor<f32>
  return %m : tensor<f32>
}

// -----

// expected-error @+1 {{no objective function: expected a function with moe.entry = "loss"}}
module {
}

// -----

// A rotation's gradient is the rotation back (moe.rope with `inverse`) from
// the same start; the start itself gets no gradient.

moe.param @wq : tensor<4x8xf32> {init = #moe.init<normal>}

func.func @loss(%wq: tensor<4x8xf32> {moe.param = @wq},
                %x: tensor<?x?x4xf32> {moe.input = "x", moe.dims = ["B", "S", 4]})
    -> (tensor<f32> {moe.output = "loss"}) attributes {moe.entry = "loss"} {
  %start = arith.constant dense<0> : tensor<i64>
  %q = moe.linear %x, %wq : (tensor<?x?x4xf32>, tensor<4x8xf32>) -> tensor<?x?x8xf32>
  %rq = moe.rope %q, %start {num_heads = 2 : i64, head_dim = 4 : i64, rotary_dim = 2 : i64, base = 100.0 : f64} : (tensor<?x?x8xf32>, tensor<i64>) -> tensor<?x?x8xf32>
  %l = moe.z_loss %rq : (tensor<?x?x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @backward
// CHECK:      %[[START:.*]] = arith.constant dense<0> : tensor<i64>
// CHECK:      %[[Q:.*]] = moe.linear
// CHECK:      %[[RQ:.*]] = moe.rope %[[Q]], %[[START]] {base = 1.000000e+02 : f64, head_dim = 4 : i64, num_heads = 2 : i64, rotary_dim = 2 : i64}
// CHECK:      %[[DRQ:.*]] = moe.z_loss_grad %[[RQ]]
// CHECK:      %[[DQ:.*]] = moe.rope %[[DRQ]], %[[START]] {base = 1.000000e+02 : f64, head_dim = 4 : i64, inverse, num_heads = 2 : i64, rotary_dim = 2 : i64}
// CHECK:      moe.linear_grad %{{.*}}, %{{.*}}, %[[DQ]]

// -----

// Batch norm in training mode: the gradient op recomputes the batch
// statistics (mask included); the running statistics get no gradient and
// the objective's updates of them stay results of backward.

moe.param @g : tensor<4xf32> {init = #moe.init<ones>}
moe.param @b : tensor<4xf32> {init = #moe.init<zeros>}
moe.param @rm : tensor<4xf32> {init = #moe.init<zeros>, frozen}
moe.param @rv : tensor<4xf32> {init = #moe.init<ones>, frozen}

func.func @loss(%g: tensor<4xf32> {moe.param = @g}, %b: tensor<4xf32> {moe.param = @b},
                %rm: tensor<4xf32> {moe.param = @rm}, %rv: tensor<4xf32> {moe.param = @rv},
                %x: tensor<?x4xf32> {moe.input = "x", moe.dims = ["T", 4]},
                %m: tensor<?xi32> {moe.input = "mask", moe.dims = ["T"]},
                %t: tensor<?xi32> {moe.input = "targets", moe.dims = ["T"]})
    -> (tensor<f32> {moe.output = "loss"}, tensor<4xf32> {moe.update = @rm}, tensor<4xf32> {moe.update = @rv})
    attributes {moe.entry = "loss"} {
  %y, %nm, %nv = moe.batch_norm %x, %g, %b, %rm, %rv mask %m {momentum = 0.25 : f64, training} : (tensor<?x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<?xi32>) -> (tensor<?x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %ce, %count = moe.cross_entropy %y, %t : (tensor<?x4xf32>, tensor<?xi32>) -> (tensor<f32>, tensor<f32>)
  return %ce, %nm, %nv : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @backward
// CHECK-SAME: %[[G:[^:]*]]: tensor<4xf32> {moe.param = @g}
// CHECK-SAME: %[[RM:[^:]*]]: tensor<4xf32> {moe.param = @rm}, %[[RV:[^:]*]]: tensor<4xf32> {moe.param = @rv}
// CHECK-SAME: %[[X:[^:]*]]: tensor<?x4xf32> {moe.dims = ["T", 4], moe.input = "x"}
// CHECK-SAME: %[[M:[^:]*]]: tensor<?xi32> {moe.dims = ["T"], moe.input = "mask"}
// CHECK-SAME: -> (tensor<f32> {moe.output = "loss"}, tensor<4xf32> {moe.update = @rm}, tensor<4xf32> {moe.update = @rv}, tensor<4xf32> {moe.output = "grad:g"}, tensor<4xf32> {moe.output = "grad:b"})
// CHECK:      %[[Y:.*]], %[[NM:.*]], %[[NV:.*]] = moe.batch_norm
// CHECK:      %{{.*}}, %[[DG:.*]], %[[DB:.*]] = moe.batch_norm_grad %[[X]], %[[G]], %[[RM]], %[[RV]], %{{.*}} mask %[[M]] {training}
// CHECK:      return %{{.*}}, %[[NM]], %[[NV]], %[[DG]], %[[DB]]

// -----

// The MAE layer: the window mean and the head mixture get their grad ops
// (the gate's dg flows back through the router's probabilities); the
// sampled expert is piecewise constant in p, so no gradient flows through
// it, and the head mixture it scales passes gradient to the context only.

moe.param @wg : tensor<4x4xf32> {init = #moe.init<normal>}
moe.param @wc : tensor<4x8xf32> {init = #moe.init<normal>}

func.func @loss(%wg: tensor<4x4xf32> {moe.param = @wg}, %wc: tensor<4x8xf32> {moe.param = @wc},
                %x: tensor<?x?x4xf32> {moe.input = "x", moe.dims = ["B", "S", 4]},
                %mask: tensor<?x?xi32> {moe.input = "mask", moe.dims = ["B", "S"]},
                %seed: tensor<i64> {moe.input = "rng"})
    -> (tensor<f32> {moe.output = "loss"}, tensor<5xf32> {moe.output = "stats"}) attributes {moe.entry = "loss"} {
  %m = moe.window_mean %x mask %mask {window = #moe.pool_window<sequence>} : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<?x1x4xf32>
  %l = moe.linear %m, %wg : (tensor<?x1x4xf32>, tensor<4x4xf32>) -> tensor<?x1x4xf32>
  %p, %e, %g, %s = moe.topk_router %l {k = 1 : i64, gate = #moe.gate<raw>, capacity = #moe.capacity<none>, priority = #moe.priority<token_order>} : (tensor<?x1x4xf32>) -> (tensor<?x1x4xf32>, tensor<?x1x1xi32>, tensor<?x1x1xf32>, tensor<?x1x1xi32>)
  %p2 = moe.window_mean %p {window = #moe.pool_window<last>, size = 2 : i64} : (tensor<?x1x4xf32>) -> tensor<?x1x4xf32>
  %c = moe.linear %x, %wc : (tensor<?x?x4xf32>, tensor<4x8xf32>) -> tensor<?x?x8xf32>
  %y = moe.head_mixture %c, %p2 {num_heads = 4 : i64} : (tensor<?x?x8xf32>, tensor<?x1x4xf32>) -> tensor<?x?x8xf32>
  %one = moe.sample_expert %p2, %seed {num_experts = 4 : i64, stream = 1 : i64} : (tensor<?x1x4xf32>, tensor<i64>) -> tensor<?x1x4xf32>
  %f = moe.head_mixture %y, %one {num_heads = 4 : i64} : (tensor<?x?x8xf32>, tensor<?x1x4xf32>) -> tensor<?x?x8xf32>
  %z = moe.z_loss %f : (tensor<?x?x8xf32>) -> tensor<f32>
  %stats = moe.gate_stats %p2 : (tensor<?x1x4xf32>) -> tensor<5xf32>
  return %z, %stats : tensor<f32>, tensor<5xf32>
}

// CHECK-LABEL: func.func @backward
// CHECK:      %[[M:.*]] = moe.window_mean %[[X:[^ ]*]] mask %[[MASK:[^ ]*]] {window = #moe.pool_window<sequence>}
// CHECK:      %[[L:.*]] = moe.linear %[[M]], %[[WG:[^ ]*]] :
// CHECK:      %[[P:[a-z0-9_]*]], %{{.*}} = moe.topk_router %[[L]]
// CHECK:      %[[P2:.*]] = moe.window_mean %[[P]] {size = 2 : i64, window = #moe.pool_window<last>}
// CHECK:      %[[C:.*]] = moe.linear %[[X]], %{{.*}} :
// CHECK:      %[[Y:.*]] = moe.head_mixture %[[C]], %[[P2]]
// CHECK:      %[[ONE:.*]] = moe.sample_expert %[[P2]]
// CHECK:      %[[F:.*]] = moe.head_mixture %[[Y]], %[[ONE]]
// CHECK:      %[[DF:.*]] = moe.z_loss_grad %[[F]]
// CHECK:      %[[DY:[a-z0-9_]*]], %{{.*}} = moe.head_mixture_grad %[[DF]], %[[Y]], %[[ONE]] {num_heads = 4 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x1x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x4xf32>)
// CHECK:      %[[DC:[a-z0-9_]*]], %[[DP2:.*]] = moe.head_mixture_grad %[[DY]], %[[C]], %[[P2]]
// CHECK:      moe.linear_grad %[[X]], %{{.*}}, %[[DC]]
// CHECK:      %[[DP:.*]] = moe.window_mean_grad %[[P]], %[[DP2]] {size = 2 : i64, window = #moe.pool_window<last>} : (tensor<?x1x4xf32>, tensor<?x1x4xf32>) -> tensor<?x1x4xf32>
// CHECK:      %[[DL:.*]] = moe.topk_router_grad %{{.*}} probs_grad %[[DP]]
// CHECK:      %[[DM:[a-z0-9_]*]], %[[DWG:.*]] = moe.linear_grad %[[M]], %[[WG]], %[[DL]]
// CHECK-NOT:  moe.window_mean_grad
// CHECK:      return

// -----

// The decoding form of the window mean (with history) has no gradient.

moe.param @w : tensor<4x4xf32> {init = #moe.init<normal>}

func.func @loss(%w: tensor<4x4xf32> {moe.param = @w},
                %x: tensor<?x?x4xf32> {moe.input = "x", moe.dims = ["B", "S", 4]},
                %h: tensor<?x8x4xf32> {moe.input = "history", moe.dims = ["B", 8, 4]},
                %past: tensor<i64> {moe.input = "past"})
    -> (tensor<f32> {moe.output = "loss"}) attributes {moe.entry = "loss"} {
  %y = moe.linear %x, %w : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
  // expected-error @+1 {{'moe.window_mean' op has no gradient with history (a decoding form)}}
  %m = moe.window_mean %y history %h past %past {window = #moe.pool_window<prefix>} : (tensor<?x?x4xf32>, tensor<?x8x4xf32>, tensor<i64>) -> tensor<?x?x4xf32>
  %z = moe.z_loss %m : (tensor<?x?x4xf32>) -> tensor<f32>
  return %z : tensor<f32>
}
