// The MAE gate's batch norm on its own: a projection (so that dx is
// needed), moe.batch_norm over the masked rows, a head, tanh and the
// cross-entropy. The running statistics are frozen parameters that `loss`
// (training mode) updates and `eval_loss` / `forward` (eval mode) read.
// STORAGE is f32 or bf16 (the test substitutes it); parameters, running
// statistics and the loss stay f32.

module attributes {
    moe.model = {name = "batch_norm_gate", kind = "decoder", objective = "lm", vocab = 4 : i64, d_model = 8 : i64, max_seq = 40 : i64, dtype = "STORAGE", segments = 0 : i64, blocks = 1 : i64, moe_layers = [], tokenizer = {kind = "bytes", path = "", sha256 = ""}},
    moe.training = {optimizer = "sgd", schedule = "constant", lr = 0.1 : f64, momentum = 0.0 : f64, batch = 2 : i64, seq_len = 37 : i64, steps = 10 : i64, seed = 1 : i64, log_every = 1 : i64},
    moe.data = {kind = "synthetic", task = "copy", paths = [], labels = [], task_seed = 0 : i64, branching = 2 : i64, valid_fraction = 0.1 : f64}} {
  moe.param @proj : tensor<8x8xf32> {init = #moe.init<normal>, scale = 0.5 : f64}
  moe.param @bn.gamma : tensor<8xf32> {init = #moe.init<ones>}
  moe.param @bn.beta : tensor<8xf32> {init = #moe.init<zeros>}
  moe.param @bn.running_mean : tensor<8xf32> {init = #moe.init<zeros>, frozen}
  moe.param @bn.running_var : tensor<8xf32> {init = #moe.init<ones>, frozen}
  moe.param @head : tensor<8x4xf32> {init = #moe.init<normal>, scale = 0.5 : f64}

  func.func @loss(%proj: tensor<8x8xf32> {moe.param = @proj},
                  %g: tensor<8xf32> {moe.param = @bn.gamma},
                  %b: tensor<8xf32> {moe.param = @bn.beta},
                  %rm: tensor<8xf32> {moe.param = @bn.running_mean},
                  %rv: tensor<8xf32> {moe.param = @bn.running_var},
                  %head: tensor<8x4xf32> {moe.param = @head},
                  %x: tensor<?x?x8xSTORAGE> {moe.input = "x", moe.dims = ["B", "S", 8]},
                  %m: tensor<?x?xi32> {moe.input = "mask", moe.dims = ["B", "S"]},
                  %t: tensor<?x?xi32> {moe.input = "targets", moe.dims = ["B", "S"]})
      -> (tensor<f32> {moe.output = "loss"},
          tensor<8xf32> {moe.update = @bn.running_mean},
          tensor<8xf32> {moe.update = @bn.running_var})
      attributes {moe.entry = "loss"} {
    %ps = moe.cast %proj : (tensor<8x8xf32>) -> tensor<8x8xSTORAGE>
    %h = moe.linear %x, %ps : (tensor<?x?x8xSTORAGE>, tensor<8x8xSTORAGE>) -> tensor<?x?x8xSTORAGE>
    %y, %nm, %nv = moe.batch_norm %h, %g, %b, %rm, %rv mask %m {training} : (tensor<?x?x8xSTORAGE>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<?x?xi32>) -> (tensor<?x?x8xSTORAGE>, tensor<8xf32>, tensor<8xf32>)
    %hs = moe.cast %head : (tensor<8x4xf32>) -> tensor<8x4xSTORAGE>
    %l = moe.linear %y, %hs : (tensor<?x?x8xSTORAGE>, tensor<8x4xSTORAGE>) -> tensor<?x?x4xSTORAGE>
    %a = moe.activation %l {kind = #moe.activation<tanh>} : (tensor<?x?x4xSTORAGE>) -> tensor<?x?x4xSTORAGE>
    %af = moe.cast %a : (tensor<?x?x4xSTORAGE>) -> tensor<?x?x4xf32>
    %ce, %count = moe.cross_entropy %af, %t : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> (tensor<f32>, tensor<f32>)
    return %ce, %nm, %nv : tensor<f32>, tensor<8xf32>, tensor<8xf32>
  }

  func.func @eval_loss(%proj: tensor<8x8xf32> {moe.param = @proj},
                       %g: tensor<8xf32> {moe.param = @bn.gamma},
                       %b: tensor<8xf32> {moe.param = @bn.beta},
                       %rm: tensor<8xf32> {moe.param = @bn.running_mean},
                       %rv: tensor<8xf32> {moe.param = @bn.running_var},
                       %head: tensor<8x4xf32> {moe.param = @head},
                       %x: tensor<?x?x8xSTORAGE> {moe.input = "x", moe.dims = ["B", "S", 8]},
                       %t: tensor<?x?xi32> {moe.input = "targets", moe.dims = ["B", "S"]})
      -> (tensor<f32> {moe.output = "loss"}) attributes {moe.entry = "eval_loss"} {
    %ps = moe.cast %proj : (tensor<8x8xf32>) -> tensor<8x8xSTORAGE>
    %h = moe.linear %x, %ps : (tensor<?x?x8xSTORAGE>, tensor<8x8xSTORAGE>) -> tensor<?x?x8xSTORAGE>
    %y, %nm, %nv = moe.batch_norm %h, %g, %b, %rm, %rv : (tensor<?x?x8xSTORAGE>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<?x?x8xSTORAGE>, tensor<8xf32>, tensor<8xf32>)
    %hs = moe.cast %head : (tensor<8x4xf32>) -> tensor<8x4xSTORAGE>
    %l = moe.linear %y, %hs : (tensor<?x?x8xSTORAGE>, tensor<8x4xSTORAGE>) -> tensor<?x?x4xSTORAGE>
    %a = moe.activation %l {kind = #moe.activation<tanh>} : (tensor<?x?x4xSTORAGE>) -> tensor<?x?x4xSTORAGE>
    %af = moe.cast %a : (tensor<?x?x4xSTORAGE>) -> tensor<?x?x4xf32>
    %ce, %count = moe.cross_entropy %af, %t : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> (tensor<f32>, tensor<f32>)
    return %ce : tensor<f32>
  }

  // The projection and its eval-mode normalisation, for the tests to check
  // against the formula; and the gradient op in eval mode (which no
  // program's backward builds) on a given dy.
  func.func @forward(%proj: tensor<8x8xf32> {moe.param = @proj},
                     %g: tensor<8xf32> {moe.param = @bn.gamma},
                     %b: tensor<8xf32> {moe.param = @bn.beta},
                     %rm: tensor<8xf32> {moe.param = @bn.running_mean},
                     %rv: tensor<8xf32> {moe.param = @bn.running_var},
                     %x: tensor<?x?x8xSTORAGE> {moe.input = "x", moe.dims = ["B", "S", 8]},
                     %dy: tensor<?x?x8xSTORAGE> {moe.input = "dy", moe.dims = ["B", "S", 8]})
      -> (tensor<?x?x8xSTORAGE> {moe.output = "h"}, tensor<?x?x8xSTORAGE> {moe.output = "y"},
          tensor<?x?x8xSTORAGE> {moe.output = "dx"}, tensor<8xf32> {moe.output = "dgamma"},
          tensor<8xf32> {moe.output = "dbeta"})
      attributes {moe.entry = "forward"} {
    %ps = moe.cast %proj : (tensor<8x8xf32>) -> tensor<8x8xSTORAGE>
    %h = moe.linear %x, %ps : (tensor<?x?x8xSTORAGE>, tensor<8x8xSTORAGE>) -> tensor<?x?x8xSTORAGE>
    %y, %nm, %nv = moe.batch_norm %h, %g, %b, %rm, %rv : (tensor<?x?x8xSTORAGE>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<?x?x8xSTORAGE>, tensor<8xf32>, tensor<8xf32>)
    %dx, %dg, %db = moe.batch_norm_grad %h, %g, %rm, %rv, %dy : (tensor<?x?x8xSTORAGE>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<?x?x8xSTORAGE>) -> (tensor<?x?x8xSTORAGE>, tensor<8xf32>, tensor<8xf32>)
    return %h, %y, %dx, %dg, %db : tensor<?x?x8xSTORAGE>, tensor<?x?x8xSTORAGE>, tensor<?x?x8xSTORAGE>, tensor<8xf32>, tensor<8xf32>
  }
}
