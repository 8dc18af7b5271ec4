// A decoding layer's cache writes on their own, for the kernel check: the
// query, key and value projections of one input (values narrower, with a
// bias) in one GEMM launch whose epilogue stores the keys and values into
// their caches, and an MAE-style pool of the layer input, all at the same
// position `past`. The caches are states, as a decoder's are: `decode`
// writes them in place; `decode_kept` also returns the old caches, so the
// plan keeps them and the group copies each into its new buffer first, and
// projects its values from another input (a GEMM launch of one projection
// and its cache write). STORAGE is f32
// or bf16 (the test substitutes it). `loss` is the objective every bundle
// needs: a linear head and the cross-entropy.

module attributes {
    moe.model = {name = "kv_cache_writes", kind = "decoder", objective = "lm", vocab = 4 : i64, d_model = 8 : i64, max_seq = 16 : i64, dtype = "STORAGE", segments = 0 : i64, blocks = 1 : i64, moe_layers = [], tokenizer = {kind = "bytes", path = "", sha256 = ""}},
    moe.training = {optimizer = "sgd", schedule = "constant", lr = 0.1 : f64, momentum = 0.0 : f64, batch = 2 : i64, seq_len = 16 : i64, steps = 10 : i64, seed = 1 : i64, log_every = 1 : i64},
    moe.data = {kind = "synthetic", task = "copy", paths = [], labels = [], task_seed = 0 : i64, branching = 2 : i64, valid_fraction = 0.1 : f64}} {
  moe.state @ck : tensor<?x16x8xSTORAGE> {dims = ["B", 16, 8]}
  moe.state @cv : tensor<?x16x4xSTORAGE> {dims = ["B", 16, 4]}
  moe.state @cp : tensor<?x16x8xSTORAGE> {dims = ["B", 16, 8]}
  moe.param @wq : tensor<8x8xf32> {init = #moe.init<normal>, scale = 0.35 : f64}
  moe.param @wk : tensor<8x8xf32> {init = #moe.init<normal>, scale = 0.35 : f64}
  moe.param @wv : tensor<8x4xf32> {init = #moe.init<normal>, scale = 0.35 : f64}
  moe.param @bv : tensor<4xf32> {init = #moe.init<normal>, scale = 0.5 : f64}
  moe.param @head : tensor<8x4xf32> {init = #moe.init<normal>, scale = 0.5 : f64}

  func.func @loss(%head: tensor<8x4xf32> {moe.param = @head},
                  %x: tensor<?x?x8xSTORAGE> {moe.input = "x", moe.dims = ["B", "S", 8]},
                  %t: tensor<?x?xi32> {moe.input = "targets", moe.dims = ["B", "S"]})
      -> (tensor<f32> {moe.output = "loss"}) attributes {moe.entry = "loss"} {
    %hs = moe.cast %head : (tensor<8x4xf32>) -> tensor<8x4xSTORAGE>
    %l = moe.linear %x, %hs : (tensor<?x?x8xSTORAGE>, tensor<8x4xSTORAGE>) -> tensor<?x?x4xSTORAGE>
    %lf = moe.cast %l : (tensor<?x?x4xSTORAGE>) -> tensor<?x?x4xf32>
    %ce, %count = moe.cross_entropy %lf, %t : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> (tensor<f32>, tensor<f32>)
    return %ce : tensor<f32>
  }

  func.func @decode(%wq: tensor<8x8xf32> {moe.param = @wq},
                    %wk: tensor<8x8xf32> {moe.param = @wk},
                    %wv: tensor<8x4xf32> {moe.param = @wv},
                    %bv: tensor<4xf32> {moe.param = @bv},
                    %ck: tensor<?x16x8xSTORAGE> {moe.state = @ck, moe.dims = ["B", 16, 8]},
                    %cv: tensor<?x16x4xSTORAGE> {moe.state = @cv, moe.dims = ["B", 16, 4]},
                    %cp: tensor<?x16x8xSTORAGE> {moe.state = @cp, moe.dims = ["B", 16, 8]},
                    %x: tensor<?x?x8xSTORAGE> {moe.input = "x", moe.dims = ["B", "S", 8]},
                    %h: tensor<?x?x8xSTORAGE> {moe.input = "h", moe.dims = ["B", "S", 8]},
                    %past: tensor<i64> {moe.input = "past"})
      -> (tensor<?x16x8xSTORAGE> {moe.update = @ck}, tensor<?x16x4xSTORAGE> {moe.update = @cv},
          tensor<?x16x8xSTORAGE> {moe.update = @cp}, tensor<?x?x8xSTORAGE> {moe.output = "y"},
          tensor<?x?x8xSTORAGE> {moe.output = "q"})
      attributes {moe.entry = "decode"} {
    %qs = moe.cast %wq : (tensor<8x8xf32>) -> tensor<8x8xSTORAGE>
    %ks = moe.cast %wk : (tensor<8x8xf32>) -> tensor<8x8xSTORAGE>
    %vs = moe.cast %wv : (tensor<8x4xf32>) -> tensor<8x4xSTORAGE>
    %bs = moe.cast %bv : (tensor<4xf32>) -> tensor<4xSTORAGE>
    %q = moe.linear %x, %qs : (tensor<?x?x8xSTORAGE>, tensor<8x8xSTORAGE>) -> tensor<?x?x8xSTORAGE>
    %k = moe.linear %x, %ks : (tensor<?x?x8xSTORAGE>, tensor<8x8xSTORAGE>) -> tensor<?x?x8xSTORAGE>
    %v = moe.linear %x, %vs bias %bs : (tensor<?x?x8xSTORAGE>, tensor<8x4xSTORAGE>, tensor<4xSTORAGE>) -> tensor<?x?x4xSTORAGE>
    %nk = moe.kv_cache_write %ck, %k, %past : (tensor<?x16x8xSTORAGE>, tensor<?x?x8xSTORAGE>, tensor<i64>) -> tensor<?x16x8xSTORAGE>
    %nv = moe.kv_cache_write %cv, %v, %past : (tensor<?x16x4xSTORAGE>, tensor<?x?x4xSTORAGE>, tensor<i64>) -> tensor<?x16x4xSTORAGE>
    %y = arith.addf %k, %h : tensor<?x?x8xSTORAGE>
    %np = moe.kv_cache_write %cp, %h, %past : (tensor<?x16x8xSTORAGE>, tensor<?x?x8xSTORAGE>, tensor<i64>) -> tensor<?x16x8xSTORAGE>
    return %nk, %nv, %np, %y, %q : tensor<?x16x8xSTORAGE>, tensor<?x16x4xSTORAGE>, tensor<?x16x8xSTORAGE>, tensor<?x?x8xSTORAGE>, tensor<?x?x8xSTORAGE>
  }

  func.func @decode_kept(%wq: tensor<8x8xf32> {moe.param = @wq},
                         %wk: tensor<8x8xf32> {moe.param = @wk},
                         %wv: tensor<8x4xf32> {moe.param = @wv},
                         %bv: tensor<4xf32> {moe.param = @bv},
                         %ck: tensor<?x16x8xSTORAGE> {moe.state = @ck, moe.dims = ["B", 16, 8]},
                         %cv: tensor<?x16x4xSTORAGE> {moe.state = @cv, moe.dims = ["B", 16, 4]},
                         %x: tensor<?x?x8xSTORAGE> {moe.input = "x", moe.dims = ["B", "S", 8]},
                         %h: tensor<?x?x8xSTORAGE> {moe.input = "h", moe.dims = ["B", "S", 8]},
                         %past: tensor<i64> {moe.input = "past"})
      -> (tensor<?x16x8xSTORAGE> {moe.update = @ck}, tensor<?x16x4xSTORAGE> {moe.update = @cv},
          tensor<?x16x8xSTORAGE> {moe.output = "old_k"}, tensor<?x16x4xSTORAGE> {moe.output = "old_v"},
          tensor<?x?x8xSTORAGE> {moe.output = "q"})
      attributes {moe.entry = "decode_kept"} {
    %qs = moe.cast %wq : (tensor<8x8xf32>) -> tensor<8x8xSTORAGE>
    %ks = moe.cast %wk : (tensor<8x8xf32>) -> tensor<8x8xSTORAGE>
    %vs = moe.cast %wv : (tensor<8x4xf32>) -> tensor<8x4xSTORAGE>
    %bs = moe.cast %bv : (tensor<4xf32>) -> tensor<4xSTORAGE>
    %q = moe.linear %x, %qs : (tensor<?x?x8xSTORAGE>, tensor<8x8xSTORAGE>) -> tensor<?x?x8xSTORAGE>
    %k = moe.linear %x, %ks : (tensor<?x?x8xSTORAGE>, tensor<8x8xSTORAGE>) -> tensor<?x?x8xSTORAGE>
    %v = moe.linear %h, %vs bias %bs : (tensor<?x?x8xSTORAGE>, tensor<8x4xSTORAGE>, tensor<4xSTORAGE>) -> tensor<?x?x4xSTORAGE>
    %nk = moe.kv_cache_write %ck, %k, %past : (tensor<?x16x8xSTORAGE>, tensor<?x?x8xSTORAGE>, tensor<i64>) -> tensor<?x16x8xSTORAGE>
    %nv = moe.kv_cache_write %cv, %v, %past : (tensor<?x16x4xSTORAGE>, tensor<?x?x4xSTORAGE>, tensor<i64>) -> tensor<?x16x4xSTORAGE>
    return %nk, %nv, %ck, %cv, %q : tensor<?x16x8xSTORAGE>, tensor<?x16x4xSTORAGE>, tensor<?x16x8xSTORAGE>, tensor<?x16x4xSTORAGE>, tensor<?x?x8xSTORAGE>
  }
}
