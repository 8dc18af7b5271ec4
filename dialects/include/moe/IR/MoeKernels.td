//===- MoeKernels.td - fused kernel groups ------------------*- tablegen -*-===//
//
// moe-fuse-kernels outlines each group of ops that one kernel (or a few
// launches of one kernel family) computes into a `moe.kernel` region;
// moe-tile-kernels records the group's tiles on it. The verifier checks
// what every later pass and emitter relies on: which ops a kind may hold,
// in what order, and that a planned kernel has every tile its kind needs.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_KERNELS
#define MOE_KERNELS

include "moe/IR/MoeBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Moe_KernelKindEnum : Moe_I32Enum<"KernelKind",
    "what a fused kernel group computes", [
    // Runs of elementwise ops over the same number of elements (and
    // moe.rope, whose x must come from before the kernel).
    I32EnumAttrCase<"Elementwise", 0, "elementwise">,
    // Runs of 0-d ops (loss weighting, the learning-rate schedule).
    I32EnumAttrCase<"Scalar", 1, "scalar">,
    // moe.embedding [+ moe.add_positions] [+ moe.dropout].
    I32EnumAttrCase<"Embedding", 2, "embedding">,
    I32EnumAttrCase<"EmbeddingGrad", 3, "embedding_grad">,
    I32EnumAttrCase<"PositionsGrad", 4, "positions_grad">,
    // moe.linear with elementwise epilogue ops (activation, residual add).
    I32EnumAttrCase<"Gemm", 5, "gemm">,
    I32EnumAttrCase<"GemmGrad", 6, "gemm_grad">,
    // [residual arith.addf +] moe.layer_norm / moe.rms_norm.
    I32EnumAttrCase<"Norm", 7, "norm">,
    I32EnumAttrCase<"NormGrad", 8, "norm_grad">,
    I32EnumAttrCase<"Attention", 9, "attention">,
    I32EnumAttrCase<"AttentionGrad", 10, "attention_grad">,
    I32EnumAttrCase<"KvWrite", 11, "kv_write">,
    // [moe.linear (logits) +] moe.topk_router with its losses and load.
    I32EnumAttrCase<"Router", 12, "router">,
    I32EnumAttrCase<"RouterGrad", 13, "router_grad">,
    I32EnumAttrCase<"SwitchLossGrad", 14, "switch_loss_grad">,
    I32EnumAttrCase<"ZLossGrad", 15, "z_loss_grad">,
    // moe.expert_ffn [+ residual arith.addf].
    I32EnumAttrCase<"Experts", 16, "experts">,
    I32EnumAttrCase<"ExpertsGrad", 17, "experts_grad">,
    I32EnumAttrCase<"CrossEntropy", 18, "cross_entropy">,
    I32EnumAttrCase<"CrossEntropyGrad", 19, "cross_entropy_grad">,
    // moe.global_norm + the 0-d ops that use it (clipping).
    I32EnumAttrCase<"GlobalNorm", 20, "global_norm">,
    // Every parameter update of a program.
    I32EnumAttrCase<"Optimizer", 21, "optimizer">,
    // moe.expert_map (MoA's routed queries).
    I32EnumAttrCase<"ExpertMap", 22, "expert_map">,
    I32EnumAttrCase<"ExpertMapGrad", 23, "expert_map_grad">,
    // moe.expert_reduce [+ residual arith.addf].
    I32EnumAttrCase<"ExpertReduce", 24, "expert_reduce">,
    I32EnumAttrCase<"ExpertReduceGrad", 25, "expert_reduce_grad">,
    I32EnumAttrCase<"CvLoss", 26, "cv_loss">,
    I32EnumAttrCase<"CvLossGrad", 27, "cv_loss_grad">,
    // moe.routing_stats.
    I32EnumAttrCase<"RoutingStats", 28, "routing_stats">,
    // moe.normalize_rows or moe.rescale_rows: rows scaled by their norm.
    I32EnumAttrCase<"RowScale", 29, "row_scale">,
    I32EnumAttrCase<"RowScaleGrad", 30, "row_scale_grad">,
    // moe.finite_or_min: a grid-wide arg-min, then the fill.
    I32EnumAttrCase<"FiniteOrMin", 31, "finite_or_min">,
    I32EnumAttrCase<"FiniteOrMinGrad", 32, "finite_or_min_grad">,
    // moe.batch_norm: column statistics (multi-block Welford partials merged
    // in a fixed order), then the normalisation.
    I32EnumAttrCase<"BatchNorm", 33, "batch_norm">,
    I32EnumAttrCase<"BatchNormGrad", 34, "batch_norm_grad">,
    // moe.window_mean and its gradient: a running sum along the sequence
    // per (sequence, feature).
    I32EnumAttrCase<"WindowMean", 35, "window_mean">,
    I32EnumAttrCase<"WindowMeanGrad", 36, "window_mean_grad">,
    // moe.head_mixture_grad: dcontext and the per-head dg sums.
    I32EnumAttrCase<"HeadMixtureGrad", 37, "head_mixture_grad">,
    // moe.sample_expert: one row per thread.
    I32EnumAttrCase<"SampleExpert", 38, "sample_expert">,
    // moe.gate_stats: one block.
    I32EnumAttrCase<"GateStats", 39, "gate_stats">]>;
def Moe_KernelKindAttr : EnumAttr<Moe_Dialect, Moe_KernelKindEnum,
                                  "kernel_kind"> {
  let assemblyFormat = "$value";
}

def Moe_TilesAttr : AttrDef<Moe_Dialect, "Tiles"> {
  let mnemonic = "tiles";
  let summary = "the tile and launch choices of a fused kernel";
  let description = [{
    What moe-tile-kernels chose for one kernel group and one architecture;
    the CUDA emitter reads nothing else. Each kind needs exactly its own
    fields (the `moe.kernel` verifier checks that):

    - `threads`: threads per block (1, or a multiple of 32 up to 1024);
    - gemm, gemm_grad, experts, experts_grad: `tile_m` x `tile_n` outputs
      per block, `tile_k` deep per step; experts also `dispatch_threads`,
      the block of the dispatch (sort by expert) launch;
    - attention, attention_grad: `tile_q` queries per block against
      `tile_k` keys at a time, `head_dim`;
    - norm, router and row kernels: `rows_per_block` rows (a warp each);
    - row_scale and its gradient: `rows_per_block` rows, each on
      `threads / rows_per_block` lanes (short rows share a warp);
    - cv_loss and its gradient, gate_stats: `threads` (one block);
    - window_mean and its gradient: `threads`, one (sequence, feature)
      column per thread; head_mixture_grad: `threads` per (row group,
      head); sample_expert: `threads`, one row per thread;
    - elementwise, gathers, finite_or_min and batch_norm (its
      normalising launches): `items` elements per thread.

    ```mlir
    #moe.tiles<threads = 256, tile_m = 64, tile_n = 64, tile_k = 16>
    ```
  }];
  let parameters = (ins
    OptionalParameter<"std::optional<int64_t>">:$threads,
    OptionalParameter<"std::optional<int64_t>">:$tile_m,
    OptionalParameter<"std::optional<int64_t>">:$tile_n,
    OptionalParameter<"std::optional<int64_t>">:$tile_k,
    OptionalParameter<"std::optional<int64_t>">:$tile_q,
    OptionalParameter<"std::optional<int64_t>">:$head_dim,
    OptionalParameter<"std::optional<int64_t>">:$dispatch_threads,
    OptionalParameter<"std::optional<int64_t>">:$rows_per_block,
    OptionalParameter<"std::optional<int64_t>">:$items);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The fields that are set, by name, in name order.
    llvm::SmallVector<std::pair<llvm::StringRef, int64_t>> fields() const;
  }];
}

def Moe_KernelOp : Op<Moe_Dialect, "kernel", [
    RecursiveMemoryEffects, RecursivelySpeculatable, NoRegionArguments,
    SingleBlock]> {
  let summary = "a fused kernel group";
  let description = [{
    The ops of one fused group, in program order, in a single-block region
    without arguments; ops inside read values from before the kernel
    directly, and `moe.yield` returns the values that later ops read. A
    kernel executes its body in order (the cpu device runs each op as one
    step of the plan; the cuda and emu devices run the kernels generated
    for the whole group).

    `kind` says which kernel family computes the group and fixes which ops
    it may hold (see `#moe.kernel_kind`); `tiles`, set by
    moe-tile-kernels, are its launch choices. A kernel of a planned
    function (its ops carry `moe.step`) must have them.

    ```mlir
    %y = moe.kernel gemm tiles #moe.tiles<threads = 256, tile_m = 64, tile_n = 64, tile_k = 16> {
      %h = moe.linear %x, %w : (tensor<?x8xf32>, tensor<8x32xf32>) -> tensor<?x32xf32>
      %a = moe.activation %h {kind = #moe.activation<gelu_tanh>} : (tensor<?x32xf32>) -> tensor<?x32xf32>
      moe.yield %a : tensor<?x32xf32>
    } : tensor<?x32xf32>
    ```
  }];
  let arguments = (ins Moe_KernelKindAttr:$kind,
                       OptionalAttr<Moe_TilesAttr>:$tiles);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    custom<KernelKind>($kind) (`tiles` $tiles^)? attr-dict-with-keyword $body
    (`:` type($results)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The member ops, in order (the body without its terminator).
    auto getMembers() { return getBody().front().without_terminator(); }
    /// The value of the body the result stands for.
    Value getYielded(unsigned resultIndex);
  }];
}

def Moe_YieldOp : Op<Moe_Dialect, "yield", [
    Pure, Terminator, HasParent<"KernelOp">]> {
  let summary = "the values a fused kernel group returns";
  let description = [{
    Ends the body of a `moe.kernel`: its operands, results of ops in the
    body, become the kernel's results in order.
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let hasVerifier = 1;
}

#endif // MOE_KERNELS
