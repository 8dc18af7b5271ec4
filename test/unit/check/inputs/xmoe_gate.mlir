// The X-MoE gate's scores on their own, for the kernel check: sub-tokens
// reduced to 16 (W_red), cosine logits against the row-normalised expert
// embeddings (moe.normalize_rows; wg rescaled to norm 1.5 by train_step),
// then +-inf and NaN planted in the logits and replaced by the global
// finite minimum (moe.finite_or_min). STORAGE is f32 or bf16 (the test
// substitutes it); parameters and the planted mask stay f32.
//
// The mask is exactly 0, +inf (z > 1), -inf (z < -1) or NaN (w > 1.5),
// from constants through GEMMs (elementwise ops take no constants of
// other shapes): a = relu(H (z - 1)) with H = 2e38 is 0 for z <= 1 and at
// least 2e31 (z's spacing near 1 times H) above, so a * a is 0 or +inf.
//
// `kinks` runs the ops where random inputs never go: rows of norm below
// eps (about 4 against eps = 1e4), and a tensor with no finite entry.

module attributes {
    moe.model = {name = "xmoe_gate", kind = "decoder", objective = "lm", vocab = 4 : i64, d_model = 16 : i64, max_seq = 40 : i64, dtype = "STORAGE", segments = 0 : i64, blocks = 1 : i64, moe_layers = [], tokenizer = {kind = "bytes", path = "", sha256 = ""}},
    moe.training = {optimizer = "sgd", schedule = "constant", lr = 0.1 : f64, momentum = 0.0 : f64, batch = 2 : i64, seq_len = 37 : i64, steps = 10 : i64, seed = 1 : i64, log_every = 1 : i64},
    moe.data = {kind = "synthetic", task = "copy", paths = [], labels = [], task_seed = 0 : i64, branching = 2 : i64, valid_fraction = 0.1 : f64}} {
  moe.param @gate.wg : tensor<4x16xf32> {init = #moe.init<orthogonal>, scale = 0.32 : f64, row_norm = 1.5 : f64}
  moe.param @gate.wred : tensor<16x16xf32> {init = #moe.init<normal>, scale = 0.25 : f64}

  func.func @loss(%wg: tensor<4x16xf32> {moe.param = @gate.wg},
                  %wred: tensor<16x16xf32> {moe.param = @gate.wred},
                  %x: tensor<?x?x16xSTORAGE> {moe.input = "x", moe.dims = ["B", "S", 16]},
                  %z: tensor<?x?x4xf32> {moe.input = "z", moe.dims = ["B", "S", 4]},
                  %w: tensor<?x?x4xf32> {moe.input = "w", moe.dims = ["B", "S", 4]},
                  %t: tensor<?x?xi32> {moe.input = "targets", moe.dims = ["B", "S"]})
      -> (tensor<f32> {moe.output = "loss"}, tensor<?x?x4xSTORAGE> {moe.output = "planted"},
          tensor<?x?x4xSTORAGE> {moe.output = "scores"}) attributes {moe.entry = "loss"} {
    %wgs = moe.cast %wg : (tensor<4x16xf32>) -> tensor<4x16xSTORAGE>
    %wreds = moe.cast %wred : (tensor<16x16xf32>) -> tensor<16x16xSTORAGE>
    %h = moe.linear %x, %wreds : (tensor<?x?x16xSTORAGE>, tensor<16x16xSTORAGE>) -> tensor<?x?x16xSTORAGE>
    %hn = moe.normalize_rows %h : (tensor<?x?x16xSTORAGE>) -> tensor<?x?x16xSTORAGE>
    %n = moe.normalize_rows %wgs : (tensor<4x16xSTORAGE>) -> tensor<4x16xSTORAGE>
    %l = moe.linear %hn, %n {transpose_weight} : (tensor<?x?x16xSTORAGE>, tensor<4x16xSTORAGE>) -> tensor<?x?x4xSTORAGE>
    %hdiag = arith.constant dense<[[2.0e38, 0.0, 0.0, 0.0], [0.0, 2.0e38, 0.0, 0.0], [0.0, 0.0, 2.0e38, 0.0], [0.0, 0.0, 0.0, 2.0e38]]> : tensor<4x4xf32>
    %mhdiag = arith.constant dense<[[-2.0e38, 0.0, 0.0, 0.0], [0.0, -2.0e38, 0.0, 0.0], [0.0, 0.0, -2.0e38, 0.0], [0.0, 0.0, 0.0, -2.0e38]]> : tensor<4x4xf32>
    %at1 = arith.constant dense<-2.0e38> : tensor<4xf32>
    %at15 = arith.constant dense<-3.0e38> : tensor<4xf32>
    %za = moe.linear %z, %hdiag bias %at1 : (tensor<?x?x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %zb = moe.activation %za {kind = #moe.activation<relu>} : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
    %zc = moe.linear %z, %mhdiag bias %at1 : (tensor<?x?x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %zd = moe.activation %zc {kind = #moe.activation<relu>} : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
    %wa = moe.linear %w, %hdiag bias %at15 : (tensor<?x?x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %wb = moe.activation %wa {kind = #moe.activation<relu>} : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
    // One elementwise kernel from here to the planted logits.
    %pos = arith.mulf %zb, %zb : tensor<?x?x4xf32>
    %ze = arith.mulf %zd, %zd : tensor<?x?x4xf32>
    %neg = arith.negf %ze : tensor<?x?x4xf32>
    %wc = arith.mulf %wb, %wb : tensor<?x?x4xf32>
    %nan = arith.subf %wc, %wc : tensor<?x?x4xf32>
    %m1 = arith.addf %pos, %neg : tensor<?x?x4xf32>
    %mask = arith.addf %m1, %nan : tensor<?x?x4xf32>
    %masks = moe.cast %mask : (tensor<?x?x4xf32>) -> tensor<?x?x4xSTORAGE>
    %planted = arith.addf %l, %masks : tensor<?x?x4xSTORAGE>
    %f = moe.finite_or_min %planted : (tensor<?x?x4xSTORAGE>) -> tensor<?x?x4xSTORAGE>
    %f32 = moe.cast %f : (tensor<?x?x4xSTORAGE>) -> tensor<?x?x4xf32>
    %ce, %count = moe.cross_entropy %f32, %t : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> (tensor<f32>, tensor<f32>)
    return %ce, %planted, %f : tensor<f32>, tensor<?x?x4xSTORAGE>, tensor<?x?x4xSTORAGE>
  }

  func.func @kinks(%x: tensor<?x?x16xSTORAGE> {moe.input = "x", moe.dims = ["B", "S", 16]},
                   %dy: tensor<?x?x16xSTORAGE> {moe.input = "dy", moe.dims = ["B", "S", 16]},
                   %z: tensor<?x?x4xf32> {moe.input = "z", moe.dims = ["B", "S", 4]},
                   %dz: tensor<?x?x4xSTORAGE> {moe.input = "dz", moe.dims = ["B", "S", 4]})
      -> (tensor<?x?x16xSTORAGE> {moe.output = "small"}, tensor<?x?x16xSTORAGE> {moe.output = "dsmall"},
          tensor<?x?x4xSTORAGE> {moe.output = "none"}, tensor<?x?x4xSTORAGE> {moe.output = "dnone"},
          tensor<?x?x4xf32> {moe.output = "twice"})
      attributes {moe.entry = "kinks"} {
    // Rows of norm about 4, below eps: y = x / eps.
    %tiny = moe.normalize_rows %x {eps = 1.0e4 : f64} : (tensor<?x?x16xSTORAGE>) -> tensor<?x?x16xSTORAGE>
    %dtiny = moe.normalize_rows_grad %x, %dy {eps = 1.0e4 : f64} : (tensor<?x?x16xSTORAGE>, tensor<?x?x16xSTORAGE>) -> tensor<?x?x16xSTORAGE>
    // z / (z - z) is +-inf or NaN everywhere; `twice` gives the kernel that
    // computes it a finite value to be compared by.
    %zero = arith.subf %z, %z : tensor<?x?x4xf32>
    %inf = arith.divf %z, %zero : tensor<?x?x4xf32>
    %infs = moe.cast %inf : (tensor<?x?x4xf32>) -> tensor<?x?x4xSTORAGE>
    %twice = arith.addf %z, %z : tensor<?x?x4xf32>
    %none = moe.finite_or_min %infs : (tensor<?x?x4xSTORAGE>) -> tensor<?x?x4xSTORAGE>
    %dnone = moe.finite_or_min_grad %infs, %dz : (tensor<?x?x4xSTORAGE>, tensor<?x?x4xSTORAGE>) -> tensor<?x?x4xSTORAGE>
    return %tiny, %dtiny, %none, %dnone, %twice : tensor<?x?x16xSTORAGE>, tensor<?x?x16xSTORAGE>, tensor<?x?x4xSTORAGE>, tensor<?x?x4xSTORAGE>, tensor<?x?x4xf32>
  }
}
