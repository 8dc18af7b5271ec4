//===- MoeBase.td - moe dialect definition and enums -------*- tablegen -*-===//
//
// The `moe` dialect: tensor-level ops for sparse-expert models. Semantics
// follow the papers' released code; where code and paper disagree, both
// choices are options (the README's "Routing conventions").
//
//===----------------------------------------------------------------------===//

#ifndef MOE_BASE
#define MOE_BASE

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Moe_Dialect : Dialect {
  let name = "moe";
  let summary = "Sparse mixture-of-experts layers, their gradients and training";
  let description = [{
    Tensor-level ops for the models moec compiles: routers, gathered expert
    FFNs, attention, norms, losses, and the backward op of each, plus
    optimizer updates. Every op works on value-semantics tensors; ops whose
    leading dimensions are written `...` treat them as a flat list of tokens,
    so `[B, S, d]` and `[T, d]` inputs are both accepted. Dynamic dimensions are
    named symbolically (`B`, `S`) by the `moe.dims` attribute of function
    arguments; `moe-infer-shapes` propagates them.

    Determinism: every op has a single, fixed evaluation order for its
    reductions and ties in top-k are broken towards the lower index, so all
    devices agree bit-for-bit where their arithmetic does.
  }];
  let cppNamespace = "::mlir::moe";
  let useDefaultAttributePrinterParser = 1;
}

class Moe_I32Enum<string name, string description, list<I32EnumAttrCase> cases>
    : I32EnumAttr<name, description, cases> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::moe";
}

class Moe_EnumAttr<string mnemonic, Moe_I32Enum enumInfo>
    : EnumAttr<Moe_Dialect, enumInfo, mnemonic> {
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// The contract with the runtime and the device library beyond the ops:
// moec-tblgen writes these into moec/support/MoeDefs.h and
// runtime/device/defs.cuh.
//===----------------------------------------------------------------------===//

/// Every generated kernel takes one moec::KernelParams argument: this many
/// buffer pointers and int64_t scalars (1,664 bytes, under the 4 KiB of
/// kernel parameters every architecture allows).
class Moe_KernelAbi<int buffers, int scalars> {
  int maxBuffers = buffers;
  int maxScalars = scalars;
}
def Moe_KernelAbiLimits : Moe_KernelAbi<192, 16>;

/// An upstream op that execution plans contain (the runtime has a kernel
/// for each).
class Moe_PlanOp<string opName> {
  string name = opName;
}
def Moe_ArithAddF : Moe_PlanOp<"arith.addf">;
def Moe_ArithSubF : Moe_PlanOp<"arith.subf">;
def Moe_ArithMulF : Moe_PlanOp<"arith.mulf">;
def Moe_ArithDivF : Moe_PlanOp<"arith.divf">;
def Moe_ArithNegF : Moe_PlanOp<"arith.negf">;
def Moe_ArithMaximumF : Moe_PlanOp<"arith.maximumf">;
def Moe_ArithMinimumF : Moe_PlanOp<"arith.minimumf">;

//===----------------------------------------------------------------------===//
// Activations.
//===----------------------------------------------------------------------===//

def Moe_ActivationEnum : Moe_I32Enum<"Activation", "pointwise activation", [
    I32EnumAttrCase<"Identity", 0, "identity">,
    I32EnumAttrCase<"Relu", 1, "relu">,
    I32EnumAttrCase<"GeluTanh", 2, "gelu_tanh">,
    I32EnumAttrCase<"GeluErf", 3, "gelu_erf">,
    I32EnumAttrCase<"Silu", 4, "silu">,
    I32EnumAttrCase<"Tanh", 5, "tanh">]>;
def Moe_ActivationAttr : Moe_EnumAttr<"activation", Moe_ActivationEnum>;

//===----------------------------------------------------------------------===//
// Routing options (the README's "Routing conventions" says which paper uses
// which).
//===----------------------------------------------------------------------===//

def Moe_GateWeightingEnum : Moe_I32Enum<"GateWeighting",
    "weight given to each selected expert", [
    // g = p_e, the full-softmax probability (MoA code, MH-MoE, Sparse Mixer).
    I32EnumAttrCase<"Raw", 0, "raw">,
    // g = p_e / sg(sum of the top-k p) (MoA paper).
    I32EnumAttrCase<"RenormDetached", 1, "renorm_detached">,
    // g = softmax over the k selected logits (Mixtral).
    I32EnumAttrCase<"SoftmaxTopK", 2, "softmax_topk">,
    // g = 1 for every selected expert (EMoE one-score / avg-k).
    I32EnumAttrCase<"Unit", 3, "unit">,
    // g = p_e / max(sum of the top-k p, float32 eps), the sum differentiated
    // and taken before capacity drops anything; raw for k = 1 (Tutel's
    // normalize_gate_prob_before_dropping, an MH-MoE option).
    I32EnumAttrCase<"Renorm", 4, "renorm">]>;
def Moe_GateWeightingAttr : Moe_EnumAttr<"gate", Moe_GateWeightingEnum>;

def Moe_CapacityEnum : Moe_I32Enum<"Capacity",
    "per-expert capacity formula for N tokens", [
    // No limit: every assignment is kept (dropless).
    I32EnumAttrCase<"None", 0, "none">,
    // C = max(ceil(cf * k * N / E), min_capacity) (Switch/GShard).
    I32EnumAttrCase<"Switch", 1, "switch">,
    // C = max(k * floor(cf * ceil(N / E)), min_capacity) (Tutel, EMoE, MH-MoE).
    I32EnumAttrCase<"Tutel", 2, "tutel">,
    // C = max(round_half_even(cf * N / E), min_capacity) (Sparse Mixer).
    I32EnumAttrCase<"SparseMixer", 3, "sparse_mixer">,
    // C = max(ceil(cf * N), min_capacity): a share of the tokens, whatever
    // k and E (MH-MoE's eval_capacity_token_fraction).
    I32EnumAttrCase<"Fraction", 4, "fraction">]>;
def Moe_CapacityAttr : Moe_EnumAttr<"capacity", Moe_CapacityEnum>;

def Moe_PriorityEnum : Moe_I32Enum<"Priority",
    "order in which assignments claim capacity slots", [
    // Choice-major, then token order (MH-MoE).
    I32EnumAttrCase<"TokenOrder", 0, "token_order">,
    // Choice-major, tokens by descending top-1 probability, ties to the
    // lower token index (batch-prioritised routing: Sparse Mixer, Tutel).
    I32EnumAttrCase<"Bpr", 1, "bpr">]>;
def Moe_PriorityAttr : Moe_EnumAttr<"priority", Moe_PriorityEnum>;

def Moe_BalanceLossEnum : Moe_I32Enum<"BalanceLoss",
    "normalisation of the load-balancing loss", [
    // E * sum_e f_e P_e, f_e = share of all N*k slots routed to e (MoA 1.5).
    I32EnumAttrCase<"AllSlots", 0, "all_slots">,
    // E * sum_e f_e P_e, f_e = share of first choices routed to e (MH-MoE 3.4).
    I32EnumAttrCase<"Top1", 1, "top1">,
    // E * sum_e f_e P_e, f_e = share of tokens with e among their top-k
    // (Sparse Mixer 4.3: E^2 * mean_e f_e P_e).
    I32EnumAttrCase<"AnyTopK", 2, "any_topk">]>;
def Moe_BalanceLossAttr : Moe_EnumAttr<"balance", Moe_BalanceLossEnum>;

//===----------------------------------------------------------------------===//
// Training.
//===----------------------------------------------------------------------===//

def Moe_LrScheduleEnum : Moe_I32Enum<"LrSchedule", "learning-rate schedule", [
    // lr = base.
    I32EnumAttrCase<"Constant", 0, "constant">,
    // Linear warm-up to base over `warmup` steps, then linear decay to
    // final_lr at total_steps.
    I32EnumAttrCase<"Linear", 1, "linear">,
    // Linear warm-up, then base * sqrt(warmup / step) (fairseq inverse_sqrt).
    I32EnumAttrCase<"InverseSqrt", 2, "inverse_sqrt">,
    // Linear warm-up, then cosine decay to final_lr at total_steps.
    I32EnumAttrCase<"Cosine", 3, "cosine">,
    // Linear warm-up, then decay to final_lr at total_steps along
    // (remaining share)^power (fairseq polynomial_decay).
    I32EnumAttrCase<"Polynomial", 4, "polynomial">]>;
def Moe_LrScheduleAttr : Moe_EnumAttr<"schedule", Moe_LrScheduleEnum>;

def Moe_InitEnum : Moe_I32Enum<"Init", "parameter initialiser", [
    I32EnumAttrCase<"Zeros", 0, "zeros">,
    I32EnumAttrCase<"Ones", 1, "ones">,
    // N(0, scale^2).
    I32EnumAttrCase<"Normal", 2, "normal">,
    // U(-scale, scale).
    I32EnumAttrCase<"Uniform", 3, "uniform">,
    // U(-a, a), a = scale * sqrt(6 / (fan_in + fan_out)), fans from the last
    // two dimensions (per expert for 3-D weights).
    I32EnumAttrCase<"XavierUniform", 4, "xavier_uniform">,
    // A [L, d] table of sinusoidal positions in fairseq's layout: row p is
    // [sin(p w_0), ..., sin(p w_{h-1}), cos(p w_0), ..., cos(p w_{h-1})]
    // with h = d / 2 and w_i = exp(-i ln(10000) / (h - 1)) (a zero last
    // column when d is odd); scale ignored. Meant for frozen parameters.
    I32EnumAttrCase<"Sinusoidal", 5, "sinusoidal">,
    // torch.nn.init.orthogonal_ with gain = scale: the first dimension is
    // the rows, the product of the others the columns; a [rows, cols]
    // matrix of standard normals (the normal initialiser's stream) is
    // orthonormalised by QR (Q times the signs of diag(R)), over the
    // transpose when rows < cols, so that rows are orthonormal when rows
    // <= cols and columns otherwise.
    I32EnumAttrCase<"Orthogonal", 6, "orthogonal">]>;
def Moe_InitAttr : Moe_EnumAttr<"init", Moe_InitEnum>;

//===----------------------------------------------------------------------===//
// Pooling (the summary the MAE gate reads).
//===----------------------------------------------------------------------===//

def Moe_PoolWindowEnum : Moe_I32Enum<"PoolWindow",
    "positions a pooled summary averages", [
    // Every (unmasked) position of the sequence: one summary per sequence.
    I32EnumAttrCase<"Sequence", 0, "sequence">,
    // Positions 0..p for the output at position p (causal running mean).
    I32EnumAttrCase<"Prefix", 1, "prefix">,
    // Positions max(0, p - size + 1)..p (a causal sliding window).
    I32EnumAttrCase<"Last", 2, "last">]>;
def Moe_PoolWindowAttr : Moe_EnumAttr<"pool_window", Moe_PoolWindowEnum>;

//===----------------------------------------------------------------------===//
// Type constraints.
//===----------------------------------------------------------------------===//

def Moe_FloatTensor : TensorOf<[F32, F64, BF16, F16]>;
def Moe_IndexTensor : TensorOf<[I32]>;
def Moe_StepTensor : TensorOf<[I64]>;

#endif // MOE_BASE
