// The MAE layer's ops on their own, for the kernel check (no .moe syntax
// reaches them yet): a context of 4 heads of 4 from x, its pooled
// summaries (the whole masked sequence, the prefix, the last 3 positions),
// gates from them (one per sequence and one per position, softmax through
// moe.topk_router's probabilities), the head mixture with each gate, with
// a sampled expert per sequence and with the uniform baseline, a
// cross-entropy on top, and the gate statistics. STORAGE is f32 or bf16
// (the test substitutes it); parameters, gates and samples stay f32.
//
// `decode_means` reads the windows of a decoding step from a history of
// the layer's inputs (MAXSEQ positions, past before the S new ones).
// MAXSEQ is the model's max_seq (the test substitutes it too).

module attributes {
    moe.model = {name = "mae_ops", kind = "decoder", objective = "lm", vocab = 4 : i64, d_model = 16 : i64, max_seq = MAXSEQ : i64, dtype = "STORAGE", segments = 0 : i64, blocks = 1 : i64, moe_layers = [], tokenizer = {kind = "bytes", path = "", sha256 = ""}},
    moe.training = {optimizer = "sgd", schedule = "constant", lr = 0.1 : f64, momentum = 0.0 : f64, batch = 2 : i64, seq_len = 37 : i64, steps = 10 : i64, seed = 1 : i64, log_every = 1 : i64},
    moe.data = {kind = "synthetic", task = "copy", paths = [], labels = [], task_seed = 0 : i64, branching = 2 : i64, valid_fraction = 0.1 : f64}} {
  moe.param @mae.wc : tensor<16x16xf32> {init = #moe.init<normal>, scale = 0.25 : f64}
  moe.param @mae.wg : tensor<16x4xf32> {init = #moe.init<normal>, scale = 0.5 : f64}
  moe.param @mae.wo : tensor<16x4xf32> {init = #moe.init<normal>, scale = 0.25 : f64}

  func.func @loss(%wc: tensor<16x16xf32> {moe.param = @mae.wc},
                  %wg: tensor<16x4xf32> {moe.param = @mae.wg},
                  %wo: tensor<16x4xf32> {moe.param = @mae.wo},
                  %x: tensor<?x?x16xSTORAGE> {moe.input = "x", moe.dims = ["B", "S", 16]},
                  %mask: tensor<?x?xi32> {moe.input = "mask", moe.dims = ["B", "S"]},
                  %seed: tensor<i64> {moe.input = "rng"},
                  %t: tensor<?x?xi32> {moe.input = "targets", moe.dims = ["B", "S"]})
      -> (tensor<f32> {moe.output = "loss"}, tensor<5xf32> {moe.output = "gate_stats"},
          tensor<?x?x4xf32> {moe.output = "expert"}, tensor<?x1x4xf32> {moe.output = "uniform_expert"})
      attributes {moe.entry = "loss"} {
    %wcs = moe.cast %wc : (tensor<16x16xf32>) -> tensor<16x16xSTORAGE>
    %c = moe.linear %x, %wcs : (tensor<?x?x16xSTORAGE>, tensor<16x16xSTORAGE>) -> tensor<?x?x16xSTORAGE>
    %seq = moe.window_mean %c mask %mask {window = #moe.pool_window<sequence>} : (tensor<?x?x16xSTORAGE>, tensor<?x?xi32>) -> tensor<?x1x16xSTORAGE>
    %pre = moe.window_mean %c {window = #moe.pool_window<prefix>} : (tensor<?x?x16xSTORAGE>) -> tensor<?x?x16xSTORAGE>
    %lst = moe.window_mean %c {window = #moe.pool_window<last>, size = 3 : i64} : (tensor<?x?x16xSTORAGE>) -> tensor<?x?x16xSTORAGE>
    %seq32 = moe.cast %seq : (tensor<?x1x16xSTORAGE>) -> tensor<?x1x16xf32>
    %lst32 = moe.cast %lst : (tensor<?x?x16xSTORAGE>) -> tensor<?x?x16xf32>
    %l1 = moe.linear %seq32, %wg : (tensor<?x1x16xf32>, tensor<16x4xf32>) -> tensor<?x1x4xf32>
    %p1, %e1, %g1, %s1 = moe.topk_router %l1 {k = 1 : i64, gate = #moe.gate<raw>, capacity = #moe.capacity<none>, priority = #moe.priority<token_order>} : (tensor<?x1x4xf32>) -> (tensor<?x1x4xf32>, tensor<?x1x1xi32>, tensor<?x1x1xf32>, tensor<?x1x1xi32>)
    %l2 = moe.linear %lst32, %wg : (tensor<?x?x16xf32>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
    %p2, %e2, %g2, %s2 = moe.topk_router %l2 {k = 1 : i64, gate = #moe.gate<raw>, capacity = #moe.capacity<none>, priority = #moe.priority<token_order>} : (tensor<?x?x4xf32>) -> (tensor<?x?x4xf32>, tensor<?x?x1xi32>, tensor<?x?x1xf32>, tensor<?x?x1xi32>)
    %e = moe.sample_expert %p2, %seed {num_experts = 4 : i64, stream = 3 : i64} : (tensor<?x?x4xf32>, tensor<i64>) -> tensor<?x?x4xf32>
    %u = moe.sample_expert %p1, %seed {num_experts = 4 : i64, stream = 5 : i64, uniform} : (tensor<?x1x4xf32>, tensor<i64>) -> tensor<?x1x4xf32>
    // One elementwise kernel: every g comes from before it.
    %y1 = moe.head_mixture %pre, %p1 {num_heads = 4 : i64} : (tensor<?x?x16xSTORAGE>, tensor<?x1x4xf32>) -> tensor<?x?x16xSTORAGE>
    %y2 = moe.head_mixture %c, %p2 {num_heads = 4 : i64} : (tensor<?x?x16xSTORAGE>, tensor<?x?x4xf32>) -> tensor<?x?x16xSTORAGE>
    %y3 = moe.head_mixture %c, %e {num_heads = 4 : i64} : (tensor<?x?x16xSTORAGE>, tensor<?x?x4xf32>) -> tensor<?x?x16xSTORAGE>
    %y4 = moe.head_mixture %pre, %u {num_heads = 4 : i64} : (tensor<?x?x16xSTORAGE>, tensor<?x1x4xf32>) -> tensor<?x?x16xSTORAGE>
    %a = arith.addf %y1, %y2 : tensor<?x?x16xSTORAGE>
    %b = arith.addf %a, %y3 : tensor<?x?x16xSTORAGE>
    %z = arith.addf %b, %y4 : tensor<?x?x16xSTORAGE>
    %z32 = moe.cast %z : (tensor<?x?x16xSTORAGE>) -> tensor<?x?x16xf32>
    %logits = moe.linear %z32, %wo : (tensor<?x?x16xf32>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
    %ce, %count = moe.cross_entropy %logits, %t : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> (tensor<f32>, tensor<f32>)
    %stats = moe.gate_stats %p2 : (tensor<?x?x4xf32>) -> tensor<5xf32>
    return %ce, %stats, %e, %u : tensor<f32>, tensor<5xf32>, tensor<?x?x4xf32>, tensor<?x1x4xf32>
  }

  func.func @decode_means(%x: tensor<?x?x16xSTORAGE> {moe.input = "x", moe.dims = ["B", "S", 16]},
                          %h: tensor<?xMAXSEQx16xSTORAGE> {moe.input = "history", moe.dims = ["B", MAXSEQ, 16]},
                          %past: tensor<i64> {moe.input = "past"})
      -> (tensor<?x?x16xSTORAGE> {moe.output = "prefix"}, tensor<?x?x16xSTORAGE> {moe.output = "last"})
      attributes {moe.entry = "decode_means"} {
    %pre = moe.window_mean %x history %h past %past {window = #moe.pool_window<prefix>} : (tensor<?x?x16xSTORAGE>, tensor<?xMAXSEQx16xSTORAGE>, tensor<i64>) -> tensor<?x?x16xSTORAGE>
    %lst = moe.window_mean %x history %h past %past {window = #moe.pool_window<last>, size = 5 : i64} : (tensor<?x?x16xSTORAGE>, tensor<?xMAXSEQx16xSTORAGE>, tensor<i64>) -> tensor<?x?x16xSTORAGE>
    return %pre, %lst : tensor<?x?x16xSTORAGE>, tensor<?x?x16xSTORAGE>
  }
}
