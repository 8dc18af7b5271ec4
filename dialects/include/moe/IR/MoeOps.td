//===- MoeOps.td - moe dialect operations ------------------*- tablegen -*-===//
//
// Every op states its exact math. Shapes written `[..., d]` accept any number
// of leading (token) dimensions; N is their product. Grad ops take the forward
// operands they need plus the incoming gradient(s) `d*` and return the
// gradients of the differentiable forward operands in operand order.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_OPS
#define MOE_OPS

include "moe/IR/MoeBase.td"
include "moe/IR/MoeInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Moe_Op<string mnemonic, list<Trait> traits = []>
    : Op<Moe_Dialect, mnemonic, !listconcat(traits, [Pure,
          DeclareOpInterfaceMethods<Moe_SymbolicShapeOpInterface>])> {
  let hasVerifier = 1;
}

/// A forward op: differentiable through DifferentiableOpInterface.
class Moe_DiffOp<string mnemonic, list<Trait> traits = []>
    : Moe_Op<mnemonic, !listconcat(traits,
          [DeclareOpInterfaceMethods<Moe_DifferentiableOpInterface>])>;

//===----------------------------------------------------------------------===//
// Model state declarations.
//===----------------------------------------------------------------------===//

def Moe_ParamOp : Op<Moe_Dialect, "param", [Symbol]> {
  let summary = "declares a model parameter";
  let description = [{
    A named, statically shaped parameter of the model. Entry functions bind
    it to an argument with the `moe.param = @name` argument attribute.
    `init` and `scale` say how the runtime initialises it (counter-based
    Philox stream keyed by the seed and the parameter's name, so every device
    gets the same values):
    - zeros / ones;
    - normal: N(0, scale^2);
    - uniform: U(-scale, scale);
    - xavier_uniform: U(-a, a), a = scale * sqrt(6 / (fan_in + fan_out)) over
      the last two dimensions;
    - sinusoidal: a [L, d] table of fixed positions (see `#moe.init`);
    - orthogonal: orthonormal rows (or columns, when there are more rows
      than columns) times scale (see `#moe.init`).
    A `frozen` parameter gets no gradient and no optimizer update.

    `row_norm` (a 2-D, trainable parameter only) rescales each row to that
    L2 norm in place at the start of every training step, as the X-MoE
    gate does with its expert embeddings under no_grad: train_step reads
    the parameter through `moe.rescale_rows`, so the forward, the gradient
    and the optimizer update all see the rescaled value, and the update
    writes the rescaled-and-updated value back. Other programs read the
    parameter as it is.

    `group` names the parameter group (the `train` section's `groups`) whose
    optimizer, schedule and update counter train it; without it the main
    optimizer does. Under block coordinate descent the group the phases
    name is trained only by `train_step_g`, every other parameter only by
    `train_step`.

    ```mlir
    moe.param @embed.tokens : tensor<256x64xf32> {init = #moe.init<normal>, scale = 2.0e-02 : f64}
    moe.param @gate.wg : tensor<8x16xf32> {init = #moe.init<orthogonal>, scale = 3.2e-01 : f64, row_norm = 1.5 : f64}
    moe.param @layers.0.moe.router : tensor<32x4xf32> {init = #moe.init<normal>, group = "gate"}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttr:$type,
                       Moe_InitAttr:$init,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale,
                       UnitAttr:$frozen,
                       OptionalAttr<F64Attr>:$row_norm,
                       OptionalAttr<StrAttr>:$group);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
}

def Moe_StateOp : Op<Moe_Dialect, "state", [Symbol]> {
  let summary = "declares persistent non-parameter state";
  let description = [{
    Persistent state a program reads and updates: optimizer moments, the
    KV cache. `dims` names each dimension, an integer for a static size or a
    string symbol (`"B"`) fixed when the session allocates it. Zero-initialised
    unless `init` says otherwise. `like` names the parameter it shadows
    (optimizer moments), so checkpoints can report it.

    ```mlir
    moe.state @kv.0.k : tensor<?x64x64xf32> {dims = ["B", 64, 64]}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttr:$type,
                       ArrayAttr:$dims,
                       OptionalAttr<FlatSymbolRefAttr>:$like);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Embeddings.
//===----------------------------------------------------------------------===//

def Moe_EmbeddingOp : Moe_DiffOp<"embedding"> {
  let summary = "token embedding lookup";
  let description = [{
    `y[..., :] = scale * table[ids[...], :]` for ids in `[0, V)`; an id
    outside that range is a run-time error. ids `[...]` i32, table `[V, d]`,
    y `[..., d]`. `scale` is sqrt(d) in fairseq's transformer.
  }];
  let arguments = (ins Moe_IndexTensor:$ids, Moe_FloatTensor:$table,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = "$ids `,` $table attr-dict `:` functional-type(operands, results)";
}

def Moe_EmbeddingGradOp : Moe_Op<"embedding_grad"> {
  let summary = "gradient of moe.embedding with respect to the table";
  let description = [{
    `dtable[v, :] = scale * (sum over positions p with ids[p] = v of dy[p,
    :])`, summed in increasing position order. dtable `[vocab, d]`.
  }];
  let arguments = (ins Moe_IndexTensor:$ids, Moe_FloatTensor:$dy,
                       ConfinedAttr<I64Attr, [IntPositive]>:$vocab,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs Moe_FloatTensor:$dtable);
  let assemblyFormat = "$ids `,` $dy attr-dict `:` functional-type(operands, results)";
}

def Moe_AddPositionsOp : Moe_DiffOp<"add_positions"> {
  let summary = "adds learned absolute position embeddings";
  let description = [{
    `y[b, s, :] = x[b, s, :] + table[start + s, :]` for x `[B, S, d]`, table
    `[max_len, d]` and the scalar `start` (i64, 0 in training, the cache
    length when decoding). `start + S > max_len` is a run-time error.
  }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_FloatTensor:$table,
                       0DTensorOf<[I64]>:$start);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = "$x `,` $table `,` $start attr-dict `:` functional-type(operands, results)";
}

def Moe_AddPositionsGradOp : Moe_Op<"add_positions_grad"> {
  let summary = "gradient of moe.add_positions with respect to the table";
  let description = [{
    `dtable[start + s, :] = sum_b dy[b, s, :]` (b ascending) and zero
    elsewhere; dtable `[max_len, d]`. The gradient of x is dy itself.
  }];
  let arguments = (ins Moe_FloatTensor:$dy, 0DTensorOf<[I64]>:$start,
                       ConfinedAttr<I64Attr, [IntPositive]>:$max_len);
  let results = (outs Moe_FloatTensor:$dtable);
  let assemblyFormat = "$dy `,` $start attr-dict `:` functional-type(operands, results)";
}

def Moe_RopeOp : Moe_DiffOp<"rope"> {
  let summary = "rotary position embedding of attention heads";
  let description = [{
    x `[B, S, num_heads * head_dim]` (queries or keys) and the scalar
    `start` (i64: 0 in training, the cache length when decoding). In every
    head, with D = `rotary_dim` (even, at most head_dim) and h = D / 2,
    feature i < h (a) and feature i + h (b) of the token at position
    p = start + s turn by theta_i = p * base^(-2i/D) (LLaMA's halves
    layout, as in the MH-MoE authors' code):

      [a, b] -> [a cos - b sin, b cos + a sin]

    and features D .. head_dim - 1 pass through. cos and sin are f32 on
    every device and for every dtype: inv_i = f32(base^(-2i/D)) (in
    double), angle = f32(p) * inv_i (in f32), then cos and sin of the angle
    in double, rounded to f32. Each output is `x_self * cos + x_partner *
    (-sin for a, +sin for b)` in the compute type.

    With `inverse` the rotation is by -theta (`[a, b] -> [a cos + b sin,
    b cos - a sin]`): the transpose, so moe.rope with `inverse` is the
    op's gradient and the other way round. `start < 0` is a run-time error.
  }];
  let arguments = (ins Moe_FloatTensor:$x, 0DTensorOf<[I64]>:$start,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$head_dim,
                       ConfinedAttr<I64Attr, [IntPositive]>:$rotary_dim,
                       DefaultValuedAttr<F64Attr, "10000.0">:$base,
                       UnitAttr:$inverse);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = "$x `,` $start attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Dense layers.
//===----------------------------------------------------------------------===//

def Moe_LinearOp : Moe_DiffOp<"linear"> {
  let summary = "affine map over the last dimension";
  let description = [{
    `y[..., n] = sum_k x[..., k] * W[k, n] + b[n]` with x `[..., K]`, W `[K, N]`
    and optional b `[N]`. With `transpose_weight`, W is stored `[N, K]` and
    used transposed (tied output embeddings).
  }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_FloatTensor:$weight,
                       Optional<Moe_FloatTensor>:$bias,
                       UnitAttr:$transpose_weight);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $weight (`bias` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Moe_LinearGradOp : Moe_Op<"linear_grad"> {
  let summary = "gradients of moe.linear";
  let description = [{
    `dx = dy W^T` (`[..., K]`), `dW = x^T dy` summed over all tokens (`[K, N]`,
    or `[N, K]` with `transpose_weight`), and, with `has_bias`,
    `db[n] = sum_tokens dy[..., n]`.
  }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_FloatTensor:$weight,
                       Moe_FloatTensor:$dy, UnitAttr:$transpose_weight,
                       UnitAttr:$has_bias);
  let results = (outs Moe_FloatTensor:$dx, Moe_FloatTensor:$dweight,
                      Optional<Moe_FloatTensor>:$dbias);
  let assemblyFormat = "$x `,` $weight `,` $dy attr-dict `:` functional-type(operands, results)";
}

def Moe_LayerNormOp : Moe_DiffOp<"layer_norm"> {
  let summary = "layer normalisation over the last dimension";
  let description = [{
    `mu = mean(x)`, `var = mean((x - mu)^2)` (biased), `y = (x - mu) /
    sqrt(var + eps) * gamma + beta`; x `[..., d]`, gamma and beta `[d]`.
  }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_FloatTensor:$gamma,
                       Moe_FloatTensor:$beta,
                       DefaultValuedAttr<F64Attr, "1e-5">:$eps);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = "$x `,` $gamma `,` $beta attr-dict `:` functional-type(operands, results)";
}

def Moe_LayerNormGradOp : Moe_Op<"layer_norm_grad"> {
  let summary = "gradients of moe.layer_norm";
  let description = [{
    With `xh = (x - mu) * r`, `r = 1 / sqrt(var + eps)` and `g = dy * gamma`:
    `dx = r * (g - mean(g) - xh * mean(g * xh))`, `dgamma = sum_tokens dy * xh`,
    `dbeta = sum_tokens dy`.
  }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_FloatTensor:$gamma,
                       Moe_FloatTensor:$dy,
                       DefaultValuedAttr<F64Attr, "1e-5">:$eps);
  let results = (outs Moe_FloatTensor:$dx, Moe_FloatTensor:$dgamma,
                      Moe_FloatTensor:$dbeta);
  let assemblyFormat = "$x `,` $gamma `,` $dy attr-dict `:` functional-type(operands, results)";
}

def Moe_RmsNormOp : Moe_DiffOp<"rms_norm"> {
  let summary = "root-mean-square normalisation over the last dimension";
  let description = [{
    `y = x / sqrt(mean(x^2) + eps) * gamma`; x `[..., d]`, gamma `[d]`.
  }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_FloatTensor:$gamma,
                       DefaultValuedAttr<F64Attr, "1e-6">:$eps);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = "$x `,` $gamma attr-dict `:` functional-type(operands, results)";
}

def Moe_RmsNormGradOp : Moe_Op<"rms_norm_grad"> {
  let summary = "gradients of moe.rms_norm";
  let description = [{
    With `r = 1 / sqrt(mean(x^2) + eps)` and `g = dy * gamma`:
    `dx = r * g - x * r^3 * mean(g * x)`, `dgamma = sum_tokens dy * x * r`.
  }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_FloatTensor:$gamma,
                       Moe_FloatTensor:$dy,
                       DefaultValuedAttr<F64Attr, "1e-6">:$eps);
  let results = (outs Moe_FloatTensor:$dx, Moe_FloatTensor:$dgamma);
  let assemblyFormat = "$x `,` $gamma `,` $dy attr-dict `:` functional-type(operands, results)";
}

def Moe_BatchNormOp : Moe_DiffOp<"batch_norm"> {
  let summary = "batch normalisation over rows (torch.nn.BatchNorm1d)";
  let description = [{
    x `[..., d]` (its rows: every leading dimension flattened, at least one);
    gamma, beta, running_mean and running_var `[d]` share one float type
    (x's, or f32 when x is bf16); the optional `mask` (i32, x's leading
    shape) is 1 where a row takes part in the batch statistics and 0 at a
    padding row. Results: `result` (x's type), `new_mean` and `new_var`
    (`[d]`, the running statistics' type). Statistics accumulate in f32 or
    better, per column: the cpu device in double over two passes, the CUDA
    kernels by Welford partials merged in a fixed order.

    With `training`: mu and var are the mean and the biased variance of
    each column over the n rows with mask != 0 (all rows without a mask),
    and EVERY row, padding too, is normalised with them:

      result = (x - mu) / sqrt(var + eps) * gamma + beta
      new_mean = (1 - momentum) * running_mean + momentum * mu
      new_var = (1 - momentum) * running_var + momentum * var * n / (n - 1)

    (torch's unbiased running variance). When n <= 1 the running
    statistics are returned unchanged (torch fails there) and rows are
    normalised with var = 0 and mu = the one row (n = 1) or 0 (n = 0).

    Without `training` (eval): result = (x - running_mean) /
    sqrt(running_var + eps) * gamma + beta, and new_mean / new_var are the
    running statistics unchanged. The mask plays no part.

    Running statistics are frozen `moe.param`s (zeros and ones); the
    objective returns new_mean and new_var with `moe.update` so that
    train_step writes them back. They pass no gradient.
  }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_FloatTensor:$gamma,
                       Moe_FloatTensor:$beta, Moe_FloatTensor:$running_mean,
                       Moe_FloatTensor:$running_var,
                       Optional<Moe_IndexTensor>:$mask,
                       DefaultValuedAttr<F64Attr, "1e-5">:$eps,
                       DefaultValuedAttr<F64Attr, "0.1">:$momentum,
                       UnitAttr:$training);
  let results = (outs Moe_FloatTensor:$result, Moe_FloatTensor:$new_mean,
                      Moe_FloatTensor:$new_var);
  let assemblyFormat = [{
    $x `,` $gamma `,` $beta `,` $running_mean `,` $running_var (`mask` $mask^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Moe_BatchNormGradOp : Moe_Op<"batch_norm_grad"> {
  let summary = "gradients of moe.batch_norm";
  let description = [{
    Operands as moe.batch_norm's (x, gamma, running_mean, running_var and the
    optional mask) plus dy (x's shape). Results dx (x's type), dgamma and
    dbeta (gamma's type). With `xh` the normalised x, `r = 1 /
    sqrt(var + eps)` and the column sums over EVERY row `A = sum dy`,
    `B = sum dy * xh`: `dgamma = B`, `dbeta = A`, and

    - with `training` (mu, var and n recomputed from x and mask as in the
      forward): `dx = gamma * r * (dy - (A + xh * B) / n)` at rows inside
      the statistics (mask != 0), `dx = gamma * r * dy` at padding rows,
      whose outputs depend on mu and var but which do not;
    - in eval (mu, var the running statistics): `dx = gamma * r * dy`.

    No gradient flows to the running statistics.
  }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_FloatTensor:$gamma,
                       Moe_FloatTensor:$running_mean,
                       Moe_FloatTensor:$running_var, Moe_FloatTensor:$dy,
                       Optional<Moe_IndexTensor>:$mask,
                       DefaultValuedAttr<F64Attr, "1e-5">:$eps,
                       UnitAttr:$training);
  let results = (outs Moe_FloatTensor:$dx, Moe_FloatTensor:$dgamma,
                      Moe_FloatTensor:$dbeta);
  let assemblyFormat = [{
    $x `,` $gamma `,` $running_mean `,` $running_var `,` $dy (`mask` $mask^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Moe_CastOp : Moe_DiffOp<"cast"> {
  let summary = "elementwise conversion between float types";
  let description = [{
    `y[i] = x[i]` in the result's element type, rounded to nearest even
    (f32 -> bf16) or exact (bf16 -> f32). Mixed precision uses it at the
    edges of bf16 storage: f32 master weights cast to bf16 where they are
    used, bf16 values cast to f32 where they feed the router and the loss.
    The gradient is the cast back.
  }];
  let arguments = (ins Moe_FloatTensor:$x);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
}

def Moe_ActivationOp : Moe_DiffOp<"activation"> {
  let summary = "pointwise activation";
  let description = [{
    `y = f(x)` elementwise: relu `max(x, 0)`; gelu_tanh
    `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`; gelu_erf
    `0.5 x (1 + erf(x / sqrt 2))`; silu `x / (1 + exp(-x))`; tanh; identity.
  }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_ActivationAttr:$kind);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
}

def Moe_ActivationGradOp : Moe_Op<"activation_grad"> {
  let summary = "gradient of moe.activation";
  let description = [{ `dx = f'(x) * dy` elementwise (relu'(0) = 0). }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_FloatTensor:$dy,
                       Moe_ActivationAttr:$kind);
  let results = (outs Moe_FloatTensor:$dx);
  let assemblyFormat = "$x `,` $dy attr-dict `:` functional-type(operands, results)";
}

def Moe_DropoutOp : Moe_DiffOp<"dropout"> {
  let summary = "inverted dropout with a counter-based mask";
  let description = [{
    `y[i] = keep(i) ? x[i] / (1 - rate) : 0`, where `keep(i)` is
    `u < 1 - rate` for `u` the i-th uniform of the Philox-4x32-10 stream keyed
    by (`seed`, `stream`). The mask depends only on (seed, stream, i), so
    every device and the backward op draw the same mask.
  }];
  let arguments = (ins Moe_FloatTensor:$x, 0DTensorOf<[I64]>:$seed,
                       F64Attr:$rate, I64Attr:$stream);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = "$x `,` $seed attr-dict `:` functional-type(operands, results)";
}

def Moe_DropoutGradOp : Moe_Op<"dropout_grad"> {
  let summary = "gradient of moe.dropout";
  let description = [{ `dx[i] = keep(i) ? dy[i] / (1 - rate) : 0`, same mask. }];
  let arguments = (ins Moe_FloatTensor:$dy, 0DTensorOf<[I64]>:$seed,
                       F64Attr:$rate, I64Attr:$stream);
  let results = (outs Moe_FloatTensor:$dx);
  let assemblyFormat = "$dy `,` $seed attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Attention.
//===----------------------------------------------------------------------===//

def Moe_AttentionOp : Moe_DiffOp<"attention", [AttrSizedOperandSegments]> {
  let summary = "scaled dot-product attention with grouped K/V heads";
  let description = [{
    q `[B, Sq, H * dh]`, k and v `[B, Sk, Hkv * dh]`, H = `num_heads`, Hkv =
    `num_kv_heads` (H % Hkv == 0; query head h reads K/V head h / (H / Hkv):
    Hkv = 1 is multi-query attention). For each batch b, head h, query i:

      s_ij = scale * <q[b, i, h], k[b, j, g(h)]>
      p_ij = softmax_j(s_ij) over the visible keys j
      out[b, i, h] = sum_j p_ij v[b, j, g(h)]
      lse[b, h, i] = log sum_j exp(s_ij)

    Visible keys: all `Sk` keys; with `causal`, keys j <= i + offset. Without
    `past`, offset = Sk - Sq. With the scalar `past` (i64, the number of
    cached positions before this call; k and v are then the whole cache), the
    keys are j < past + Sq and offset = past. With `key_mask` (i32 `[B, Sk]`),
    key j of batch b is visible only where key_mask[b, j] != 0 (padding is
    0). A query that sees no key outputs 0 and has lse = -inf. `lse` feeds
    the backward op.
  }];
  let arguments = (ins Moe_FloatTensor:$q, Moe_FloatTensor:$k,
                       Moe_FloatTensor:$v, Optional<0DTensorOf<[I64]>>:$past,
                       Optional<Moe_IndexTensor>:$key_mask,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_kv_heads,
                       F64Attr:$scale, UnitAttr:$causal);
  let results = (outs Moe_FloatTensor:$result, Moe_FloatTensor:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`past` $past^)? (`key_mask` $key_mask^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Moe_AttentionGradOp : Moe_Op<"attention_grad"> {
  let summary = "gradients of moe.attention (training form, no past)";
  let description = [{
    With p recomputed from `lse` (p_ij = exp(s_ij - lse_i)) over the keys
    visible to query i (causal and `key_mask` as in moe.attention) and
    `D_i = <dout_i, out_i>`: `dv_j = sum_i p_ij dout_i`, `ds_ij = p_ij
    (<dout_i, v_j> - D_i)`, `dq_i = scale * sum_j ds_ij k_j`, `dk_j = scale *
    sum_i ds_ij q_i`; K/V gradients are summed over the query heads sharing
    them. Masked keys get zero gradients.
  }];
  let arguments = (ins Moe_FloatTensor:$q, Moe_FloatTensor:$k,
                       Moe_FloatTensor:$v, Moe_FloatTensor:$out,
                       Moe_FloatTensor:$lse, Moe_FloatTensor:$dout,
                       Optional<Moe_IndexTensor>:$key_mask,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_kv_heads,
                       F64Attr:$scale, UnitAttr:$causal);
  let results = (outs Moe_FloatTensor:$dq, Moe_FloatTensor:$dk,
                      Moe_FloatTensor:$dv);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $out `,` $lse `,` $dout (`key_mask` $key_mask^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Moe_KvCacheWriteOp : Moe_Op<"kv_cache_write"> {
  let summary = "writes new keys or values into a cache";
  let description = [{
    `result = cache` with `result[b, past + s, :] = update[b, s, :]`; cache
    `[B, max_len, w]`, update `[B, S, w]`. `past + S > max_len` is a run-time
    error. The plan updates the cache in place.
  }];
  let arguments = (ins Moe_FloatTensor:$cache, Moe_FloatTensor:$update,
                       0DTensorOf<[I64]>:$past);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = "$cache `,` $update `,` $past attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Routing.
//===----------------------------------------------------------------------===//

def Moe_TopKRouterOp : Moe_DiffOp<"topk_router", [AttrSizedOperandSegments]> {
  let summary = "tokens-choose top-k router with gate weighting and capacity";
  let description = [{
    logits `[..., E]` (N tokens), optional mask `[...]` (i32, 0 = padding),
    optional seed (0-d i64, with `sample` > 0). Results: probs `[..., E]`,
    expert `[..., k]` (i32), gates `[..., k]`, slot `[..., k]` (i32).

    1. `p_t = softmax(logits_t)`; a masked token (mask 0) has `p_t = 0`
       (its logits still feed moe.z_loss).
    2. `expert_t = the k largest p_t`, descending, ties to the lower expert
       index. With `sample = s > 0` the first k - s are those; then s more
       are drawn without replacement from the rest with weights
       `p_{t,e} + 1e-6` (MoA's sample_topk): draw i (i = 0..s-1) takes
       `u`, the uniform number `t * k + (k - s + i)` of the Philox stream
       (`seed`, `stream`), and picks the first expert in index order whose
       running weight exceeds `u * (sum of the weights)`, in double.
    3. Gate weights (`gate`): raw `g_j = p_{t,e_j}`; renorm_detached
       `g_j = p_{t,e_j} / sg(sum_i p_{t,e_i})`; softmax_topk `g = softmax of the k
       selected logits`; unit `g_j = 1`; renorm (k > 1)
       `g_j = p_{t,e_j} / max(sum_i p_{t,e_i}, 2^-23)`, the sum differentiated,
       raw for k = 1. The sums run over all k choices, dropped ones included.
    4. An assignment whose probability is exactly 0 (every choice of a
       masked token, or an underflow) is dropped: slot -1, gate 0.
    5. Capacity positions: assignments are visited choice-major (all first
       choices, then all second choices, ...); within a choice, tokens in
       order (`token_order`) or by descending top-1 probability, ties to the
       lower token (`bpr`). `slot` is the running count of the (not
       zero-probability) assignments to the same expert before this one.
       With a capacity formula other than none (see `#moe.capacity`, factor
       `capacity_factor`, floor `min_capacity`), an assignment with
       `slot >= C` is dropped: its slot becomes -1 and its gate 0.
  }];
  let arguments = (ins Moe_FloatTensor:$logits,
                       Optional<Moe_IndexTensor>:$mask,
                       Optional<0DTensorOf<[I64]>>:$seed,
                       ConfinedAttr<I64Attr, [IntPositive]>:$k,
                       Moe_GateWeightingAttr:$gate,
                       Moe_CapacityAttr:$capacity,
                       DefaultValuedAttr<F64Attr, "1.0">:$capacity_factor,
                       DefaultValuedAttr<I64Attr, "0">:$min_capacity,
                       Moe_PriorityAttr:$priority,
                       DefaultValuedAttr<I64Attr, "0">:$sample,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs Moe_FloatTensor:$probs, Moe_IndexTensor:$expert,
                      Moe_FloatTensor:$gates, Moe_IndexTensor:$slot);
  let assemblyFormat = [{
    $logits (`mask` $mask^)? (`seed` $seed^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Moe_TopKRouterGradOp : Moe_Op<"topk_router_grad",
    [AttrSizedOperandSegments]> {
  let summary = "gradient of moe.topk_router with respect to the logits";
  let description = [{
    Chains the optional `dgates` (through the gate weighting; dropped and
    unit gates pass nothing) and the optional `dprobs` into `dp`, then the softmax backward
    `dlogits = p * (dp - <dp, p>)`. For softmax_topk the gate path is the
    softmax backward over the selected logits. Indices are piecewise
    constant and pass no gradient.
  }];
  let arguments = (ins Moe_FloatTensor:$probs, Moe_IndexTensor:$expert,
                       Moe_FloatTensor:$gates, Moe_IndexTensor:$slot,
                       Optional<Moe_FloatTensor>:$dgates,
                       Optional<Moe_FloatTensor>:$dprobs,
                       Moe_GateWeightingAttr:$gate);
  let results = (outs Moe_FloatTensor:$dlogits);
  let assemblyFormat = [{
    $probs `,` $expert `,` $gates `,` $slot (`gates_grad` $dgates^)? (`probs_grad` $dprobs^)? attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Gate scores (the X-MoE gate of MH-MoE: cosine logits against expert
// embeddings, non-finite logits replaced).
//===----------------------------------------------------------------------===//

def Moe_NormalizeRowsOp : Moe_DiffOp<"normalize_rows"> {
  let summary = "divides each row by its L2 norm (torch F.normalize)";
  let description = [{
    x `[..., C]`; `y[r, :] = x[r, :] / max(||x[r, :]||_2, eps)`, the norm
    accumulated in increasing column order. The X-MoE gate normalises its
    expert embeddings with it (eps 1e-4).
  }];
  let arguments = (ins Moe_FloatTensor:$x,
                       DefaultValuedAttr<F64Attr, "1e-4">:$eps);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
}

def Moe_NormalizeRowsGradOp : Moe_Op<"normalize_rows_grad"> {
  let summary = "gradient of moe.normalize_rows";
  let description = [{
    Per row, with `n = ||x||_2` and `xh = x / n`: `dx = (dy - xh <xh, dy>) /
    n` when `n > eps`, else `dx = dy / eps` (the Jacobian of x / max(n,
    eps) on either side of the kink).
  }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_FloatTensor:$dy,
                       DefaultValuedAttr<F64Attr, "1e-4">:$eps);
  let results = (outs Moe_FloatTensor:$dx);
  let assemblyFormat = "$x `,` $dy attr-dict `:` functional-type(operands, results)";
}

def Moe_FiniteOrMinOp : Moe_DiffOp<"finite_or_min"> {
  let summary = "replaces non-finite entries by the smallest finite one";
  let description = [{
    `m = min over every finite entry of the whole tensor` (not per row) and
    `y[i] = x[i]` where x[i] is finite, `m` where it is +-inf or NaN (the
    X-MoE gate's `_make_finite`). The arg-min `a` is the lowest flat index
    holding m, so the gradient (moe.finite_or_min_grad) is well defined.
    When no entry is finite (where the authors' code fails), moec outputs
    0 everywhere and the gradient is 0.
  }];
  let arguments = (ins Moe_FloatTensor:$x);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
}

def Moe_FiniteOrMinGradOp : Moe_Op<"finite_or_min_grad"> {
  let summary = "gradient of moe.finite_or_min";
  let description = [{
    With m and its arg-min a as in moe.finite_or_min: `dx[i] = dy[i]` where
    x[i] is finite, 0 where it is not, and `dx[a] += sum of dy over the
    non-finite entries` (every replaced entry is a copy of x[a]). All zero
    when no entry is finite.
  }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_FloatTensor:$dy);
  let results = (outs Moe_FloatTensor:$dx);
  let assemblyFormat = "$x `,` $dy attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// The MAE layer (Mixture of Attentive Experts): expert j is every attention
// head but head j; a gate reads a pooled summary of the layer input and
// gives responsibilities g over the experts, and the mixture is one
// multi-head attention whose heads are rescaled.
//===----------------------------------------------------------------------===//

def Moe_WindowMeanOp : Moe_DiffOp<"window_mean", [AttrSizedOperandSegments]> {
  let summary = "mean of a sequence over a window of positions";
  let description = [{
    x `[B, S, d]`; optional `history` `[B, L, d]` (decoding: the cache of
    the layer's inputs, already holding x at positions past..past+S-1, as
    moe.kv_cache_write returns it) with the scalar `past` (i64, the number
    of positions before x's first; given exactly when history is); optional
    `mask` (i32 `[B, S]`, 1 real, 0 padding; `sequence` only). With `p =
    past + t` (past = 0 without history) and the sequence read from history
    when given, else from x:

    - sequence: `y[b, 0] = mean of x[b, s] over the s with mask[b, s] != 0`
      (every s without mask), 0 when there is none; y `[B, 1, d]`;
    - prefix: `y[b, t] = mean of positions 0..p`; y `[B, S, d]`;
    - last: `y[b, t] = mean of positions max(0, p - size + 1)..p`
      (`size` >= 1); y `[B, S, d]`.

    Sums accumulate in f32 (f64 on the cpu device) along the sequence, one
    running sum per feature; the result has x's element type. `past + S >
    L` is a run-time error. Only the form without history is
    differentiable (moe.window_mean_grad).
  }];
  let arguments = (ins Moe_FloatTensor:$x,
                       Optional<Moe_FloatTensor>:$history,
                       Optional<0DTensorOf<[I64]>>:$past,
                       Optional<Moe_IndexTensor>:$mask,
                       Moe_PoolWindowAttr:$window,
                       DefaultValuedAttr<I64Attr, "0">:$size);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = [{
    $x (`history` $history^)? (`past` $past^)? (`mask` $mask^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Moe_WindowMeanGradOp : Moe_Op<"window_mean_grad"> {
  let summary = "gradient of moe.window_mean (without history)";
  let description = [{
    x `[B, S, d]` gives dx its shape (its values are not read), dy has the
    forward result's shape. `dx[b, s] = sum over the outputs t whose window
    holds s of dy[b, t] / count(t)`, count(t) the positions in t's window:

    - sequence: `dx[b, s] = dy[b, 0] / count_b` where mask[b, s] != 0 (all
      s without mask), 0 at padding;
    - prefix: `dx[b, s] = sum_{t >= s} dy[b, t] / (t + 1)`, a reverse
      cumulative sum;
    - last: `dx[b, s] = sum_{t = s}^{min(S - 1, s + size - 1)} dy[b, t] /
      min(t + 1, size)`, a sliding window.
  }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_FloatTensor:$dy,
                       Optional<Moe_IndexTensor>:$mask,
                       Moe_PoolWindowAttr:$window,
                       DefaultValuedAttr<I64Attr, "0">:$size);
  let results = (outs Moe_FloatTensor:$dx);
  let assemblyFormat = [{
    $x `,` $dy (`mask` $mask^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Moe_HeadMixtureOp : Moe_DiffOp<"head_mixture"> {
  let summary = "scales attention heads by the MAE mixture's weights";
  let description = [{
    context `[B, S, H * dh]` (the attention output before the output
    projection, in its storage type) and the responsibilities g `[B, G, H]`
    with G = 1 (one gate per sequence, broadcast over S) or G = S (one per
    position); H = `num_heads` >= 2. The mixture of the H experts "all
    heads but head j" weighted by g is one attention whose head j is scaled
    by `s_j = H (1 - g_j) / (H - 1)`:

      y[b, s, j * dh + i] = context[b, s, j * dh + i] *
                            H (1 - g[b, G == 1 ? 0 : s, j]) / (H - 1)

    computed in f32 and rounded to context's type (g may be f32 with a
    bf16 context). g = 1/H for every head leaves context unchanged.
  }];
  let arguments = (ins Moe_FloatTensor:$context, Moe_FloatTensor:$g,
                       ConfinedAttr<I64Attr, [IntMinValue<2>]>:$num_heads);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = "$context `,` $g attr-dict `:` functional-type(operands, results)";
}

def Moe_HeadMixtureGradOp : Moe_Op<"head_mixture_grad"> {
  let summary = "gradients of moe.head_mixture";
  let description = [{
    `dcontext = dy * s_j` (context's type) and

      dg[b, t, j] = -H / (H - 1) * sum over the positions s of group t
                    (all s for G = 1, s = t for G = S) and i < dh of
                    dy[b, s, j * dh + i] * context[b, s, j * dh + i]

    accumulated in f32 (f64 on the cpu device); dg has g's type.
  }];
  let arguments = (ins Moe_FloatTensor:$dy, Moe_FloatTensor:$context,
                       Moe_FloatTensor:$g,
                       ConfinedAttr<I64Attr, [IntMinValue<2>]>:$num_heads);
  let results = (outs Moe_FloatTensor:$dcontext, Moe_FloatTensor:$dg);
  let assemblyFormat = "$dy `,` $context `,` $g attr-dict `:` functional-type(operands, results)";
}

def Moe_SampleExpertOp : Moe_Op<"sample_expert"> {
  let summary = "draws one expert per sequence (one-hot, no gradient)";
  let description = [{
    p `[B, G, n]` (n = `num_experts` >= 2; probabilities over the experts
    per row) and the scalar `seed` (i64, like moe.dropout's); result f32
    `[B, G, n]`, one-hot per row. Sequence b draws ONE uniform `u_b`, number
    b of the Philox-4x32-10 stream keyed by (`seed`, `stream`), which all G
    rows of b share (sampling is per instance even when the gate is per
    position). Row (b, t) picks the first j with `u_b < sum_{i <= j}
    p[b, t, i]` (the running sum in f32, index order); if rounding leaves
    none, the last j with p > 0 (n - 1 when no p is > 0). With `uniform`,
    p's values are ignored (any float `[B, G, *]`) and every row picks `j =
    min(floor(u_b * n), n - 1)` (in double): the uniform-responsibility
    baseline. The result is piecewise constant in p, so no gradient flows
    through it (moe-build-backward treats it as a constant).
  }];
  let arguments = (ins Moe_FloatTensor:$p, 0DTensorOf<[I64]>:$seed,
                       ConfinedAttr<I64Attr, [IntMinValue<2>]>:$num_experts,
                       I64Attr:$stream, UnitAttr:$uniform);
  let results = (outs TensorOf<[F32]>:$result);
  let assemblyFormat = "$p `,` $seed attr-dict `:` functional-type(operands, results)";
}

def Moe_GateStatsOp : Moe_Op<"gate_stats"> {
  let summary = "mean responsibilities and their mean entropy";
  let description = [{
    g `[B, G, H]` (responsibilities, rows on the simplex); f32 `[H + 1]`:
    `mean over the B * G rows of g[:, :, j]` for each j, then the mean over
    rows of the entropy `-sum_j g_j log g_j` in nats (0 log 0 = 0; entries
    <= 0 count as 0). A statistic for the runtime; not differentiable.
  }];
  let arguments = (ins Moe_FloatTensor:$g);
  let results = (outs TensorOf<[F32]>:$stats);
  let assemblyFormat = "$g attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Experts.
//===----------------------------------------------------------------------===//

def Moe_ExpertFfnOp : Moe_DiffOp<"expert_ffn", [AttrSizedOperandSegments]> {
  let summary = "gathered expert FFN with gate-weighted combine";
  let description = [{
    x `[..., d]`, expert/slot `[..., k]` i32, gates `[..., k]`, w1 `[E, d, F]`,
    optional b1 `[E, F]`, w2 `[E, F, d]`, optional b2 `[E, d]`, optional w3
    `[E, d, F]` (GLU up branch):

      h_e(x)   = act(x W1_e + b1_e)            (times x W3_e with w3)
      FFN_e(x) = h_e(x) W2_e + b2_e
      y_t      = sum_{j=0..k-1, slot_tj >= 0} gates_tj * FFN_{expert_tj}(x_t)

    The sum runs in ascending j, so the combine is deterministic. Tokens are
    gathered per expert by index: no padded [E, C, d] buffers exist.
  }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_IndexTensor:$expert,
                       Moe_FloatTensor:$gates, Moe_IndexTensor:$slot,
                       Moe_FloatTensor:$w1, Optional<Moe_FloatTensor>:$b1,
                       Moe_FloatTensor:$w2, Optional<Moe_FloatTensor>:$b2,
                       Optional<Moe_FloatTensor>:$w3,
                       Moe_ActivationAttr:$activation);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $expert `,` $gates `,` $slot `,` $w1 (`b1` $b1^)? `,` $w2 (`b2` $b2^)? (`w3` $w3^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Moe_ExpertFfnGradOp : Moe_Op<"expert_ffn_grad",
    [AttrSizedOperandSegments]> {
  let summary = "gradients of moe.expert_ffn";
  let description = [{
    For each kept assignment (t, j) to expert e with `a = x W1_e + b1_e`,
    `u = x W3_e` (GLU), `h = act(a) [* u]`, `o = h W2_e + b2_e`:
    `dgates_tj = <dy_t, o>`; `dh = g_tj dy_t W2_e^T`; `dW2_e += h^T g dy`,
    `db2_e += g dy`; `da = dh [* u] * act'(a)`, `du = dh * act(a)`;
    `dW1_e += x^T da`, `db1_e += da`, `dW3_e += x^T du`;
    `dx_t += da W1_e^T [+ du W3_e^T]`. Dropped assignments contribute 0.
    Results: dx, dgates, then `dweights`, the gradient of each weight
    operand present, in operand order (dw1, db1?, dw2, db2?, dw3?).
  }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_IndexTensor:$expert,
                       Moe_FloatTensor:$gates, Moe_IndexTensor:$slot,
                       Moe_FloatTensor:$w1, Optional<Moe_FloatTensor>:$b1,
                       Moe_FloatTensor:$w2, Optional<Moe_FloatTensor>:$b2,
                       Optional<Moe_FloatTensor>:$w3, Moe_FloatTensor:$dy,
                       Moe_ActivationAttr:$activation);
  let results = (outs Moe_FloatTensor:$dx, Moe_FloatTensor:$dgates,
                      Variadic<Moe_FloatTensor>:$dweights);
  let assemblyFormat = [{
    $x `,` $expert `,` $gates `,` $slot `,` $w1 (`b1` $b1^)? `,` $w2 (`b2` $b2^)? (`w3` $w3^)? `,` $dy attr-dict `:` functional-type(operands, results)
  }];
}

def Moe_ExpertMapOp : Moe_DiffOp<"expert_map"> {
  let summary = "per-assignment expert projection (MoA's routed queries)";
  let description = [{
    x `[..., d]`, expert/slot `[..., k]` i32, weight `[E, d, h]`; result
    `[..., k * h]` whose block j of token t is

      y[t, j] = x_t W_{expert_tj}   if slot_tj >= 0, else 0.

    Tokens are gathered per expert by index (a grouped GEMM): no per-expert
    copies of x exist.
  }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_IndexTensor:$expert,
                       Moe_IndexTensor:$slot, Moe_FloatTensor:$weight);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = "$x `,` $expert `,` $slot `,` $weight attr-dict `:` functional-type(operands, results)";
}

def Moe_ExpertMapGradOp : Moe_Op<"expert_map_grad"> {
  let summary = "gradients of moe.expert_map";
  let description = [{
    Over the kept assignments (slot >= 0): `dx_t = sum_j dy[t, j] W_e^T` (j
    ascending) and `dW_e = sum over (t, j) routed to e of x_t^T dy[t, j]`.
    Results dx, dweight.
  }];
  let arguments = (ins Moe_FloatTensor:$x, Moe_IndexTensor:$expert,
                       Moe_IndexTensor:$slot, Moe_FloatTensor:$weight,
                       Moe_FloatTensor:$dy);
  let results = (outs Moe_FloatTensor:$dx, Moe_FloatTensor:$dweight);
  let assemblyFormat = "$x `,` $expert `,` $slot `,` $weight `,` $dy attr-dict `:` functional-type(operands, results)";
}

def Moe_ExpertReduceOp : Moe_DiffOp<"expert_reduce"> {
  let summary = "gated per-assignment expert projection summed per token";
  let description = [{
    c `[..., k * h]` (block j of token t is c[t, j]), expert/slot `[..., k]`
    i32, gates `[..., k]`, weight `[E, h, d]`; result `[..., d]`:

      y_t = sum_{j = 0..k-1, slot_tj >= 0} gates_tj * c[t, j] W_{expert_tj}

    summed in ascending j (MoA's output projection; a scatter-combine
    grouped GEMM, no per-expert copies of c).
  }];
  let arguments = (ins Moe_FloatTensor:$c, Moe_IndexTensor:$expert,
                       Moe_FloatTensor:$gates, Moe_IndexTensor:$slot,
                       Moe_FloatTensor:$weight);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = "$c `,` $expert `,` $gates `,` $slot `,` $weight attr-dict `:` functional-type(operands, results)";
}

def Moe_ExpertReduceGradOp : Moe_Op<"expert_reduce_grad"> {
  let summary = "gradients of moe.expert_reduce";
  let description = [{
    For each kept assignment (t, j) to expert e, with `G = dy_t W_e^T`:
    `dc[t, j] = gates_tj G`, `dgates_tj = <G, c[t, j]>`, and `dW_e = sum
    over (t, j) routed to e of c[t, j]^T (gates_tj dy_t)`. Dropped
    assignments get 0. Results dc, dgates, dweight.
  }];
  let arguments = (ins Moe_FloatTensor:$c, Moe_IndexTensor:$expert,
                       Moe_FloatTensor:$gates, Moe_IndexTensor:$slot,
                       Moe_FloatTensor:$weight, Moe_FloatTensor:$dy);
  let results = (outs Moe_FloatTensor:$dc, Moe_FloatTensor:$dgates,
                      Moe_FloatTensor:$dweight);
  let assemblyFormat = "$c `,` $expert `,` $gates `,` $slot `,` $weight `,` $dy attr-dict `:` functional-type(operands, results)";
}

def Moe_ExpertLoadOp : Moe_Op<"expert_load"> {
  let summary = "number of kept assignments per expert";
  let description = [{
    `load[e] = #{(t, j) : expert_tj = e and slot_tj >= 0}` as f32 `[E]`. A
    statistic for the runtime; not differentiable.
  }];
  let arguments = (ins Moe_IndexTensor:$expert, Moe_IndexTensor:$slot,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_experts);
  let results = (outs Moe_FloatTensor:$load);
  let assemblyFormat = "$expert `,` $slot attr-dict `:` functional-type(operands, results)";
}

def Moe_RoutingStatsOp : Moe_Op<"routing_stats"> {
  let summary = "counts of kept assignments, active sub-tokens and reached experts";
  let description = [{
    expert/slot `[..., k]` i32 over N rows, each `parts` consecutive rows
    one token (MH-MoE's sub-tokens; parts = 1: rows are tokens). f32 `[6]`:
    the assignments `N * k`; the kept ones (`slot >= 0`); the rows `N`; the
    rows with at least one kept assignment; `N / parts * E`; and the sum
    over tokens of the number of distinct experts that the token's kept
    assignments reach. A statistic for the runtime (the share dropped by
    capacity, MH-MoE's sub-token and expert activation); not
    differentiable.
  }];
  let arguments = (ins Moe_IndexTensor:$expert, Moe_IndexTensor:$slot,
                       ConfinedAttr<I64Attr, [IntPositive]>:$parts,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_experts);
  let results = (outs Moe_FloatTensor:$stats);
  let assemblyFormat = "$expert `,` $slot attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Views: the same storage under another shape.
//===----------------------------------------------------------------------===//

def Moe_SplitTokensOp : Moe_DiffOp<"split_tokens"> {
  let summary = "splits every token into `parts` sub-tokens (a view)";
  let description = [{
    x `[..., n, d]` with `d % parts == 0` becomes `[..., n * parts, d / parts]`:
    sub-token `(t, j)` is features `[j * d/parts, (j+1) * d/parts)` of token
    t and is row `t * parts + j` (token-major, MH-MoE's token splitting).
    Row-major storage is the same, so the plan gives the result the
    operand's storage; no kernel runs. The gradient is moe.merge_tokens.
  }];
  let arguments = (ins Moe_FloatTensor:$x,
                       ConfinedAttr<I64Attr, [IntPositive]>:$parts);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
}

def Moe_MergeTokensOp : Moe_DiffOp<"merge_tokens"> {
  let summary = "joins every `parts` consecutive sub-tokens into a token (a view)";
  let description = [{
    x `[..., n * parts, m]` becomes `[..., n, parts * m]`, the inverse of
    moe.split_tokens: token t is rows `t * parts .. t * parts + parts - 1`
    side by side. A view like moe.split_tokens; the gradient is
    moe.split_tokens.
  }];
  let arguments = (ins Moe_FloatTensor:$x,
                       ConfinedAttr<I64Attr, [IntPositive]>:$parts);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Losses.
//===----------------------------------------------------------------------===//

def Moe_SwitchLossOp : Moe_DiffOp<"switch_loss"> {
  let summary = "load-balancing loss E * sum_e f_e P_e";
  let description = [{
    probs `[..., E]` (N tokens), expert `[..., k]`; result a 0-d tensor.
    Only live assignments count: those whose probability `p_{t,expert_tj}`
    is > 0 (moe.topk_router zeroes the probabilities of masked tokens), and
    N' is the number of tokens whose first choice is live (N without a
    mask). `P_e = (1/N') sum_t p_{t,e}` and, by `variant` (counted before
    capacity drops):
    - all_slots: `f_e = #{live (t, j): expert_tj = e} / #{live (t, j)}` (MoA);
    - top1: `f_e = #{live t: expert_t0 = e} / N'` (GShard, MH-MoE);
    - any_topk: `f_e = #{live (t, j): expert_tj = e} / N'` (Sparse Mixer).
    `loss = E * sum_e f_e P_e` (0 when nothing is live); f is piecewise
    constant, so the gradient flows through P only.
  }];
  let arguments = (ins Moe_FloatTensor:$probs, Moe_IndexTensor:$expert,
                       Moe_BalanceLossAttr:$variant);
  let results = (outs Moe_FloatTensor:$loss);
  let assemblyFormat = "$probs `,` $expert attr-dict `:` functional-type(operands, results)";
}

def Moe_SwitchLossGradOp : Moe_Op<"switch_loss_grad"> {
  let summary = "gradient of moe.switch_loss with respect to probs";
  let description = [{ `dprobs[t, e] = dloss * E * f_e / N'` (N', f as in moe.switch_loss). }];
  let arguments = (ins Moe_FloatTensor:$probs, Moe_IndexTensor:$expert,
                       Moe_FloatTensor:$dloss, Moe_BalanceLossAttr:$variant);
  let results = (outs Moe_FloatTensor:$dprobs);
  let assemblyFormat = "$probs `,` $expert `,` $dloss attr-dict `:` functional-type(operands, results)";
}

def Moe_CvLossOp : Moe_DiffOp<"cv_loss"> {
  let summary = "squared coefficient of variation of the expert importance";
  let description = [{
    gates and expert `[..., k]` (N tokens); result a 0-d tensor. With the
    importance `I_e = sum over (t, j) with expert_tj = e of gates_tj` (t,
    then j, ascending), `q = I / max(sum_e I_e, 1e-12)` (an L1
    normalisation), `m` its mean and `v` its unbiased variance over the E
    experts: `loss = v / (m^2 + 1e-10)`; 0 when E = 1 (MoA's cv loss).
  }];
  let arguments = (ins Moe_FloatTensor:$gates, Moe_IndexTensor:$expert,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_experts);
  let results = (outs Moe_FloatTensor:$loss);
  let assemblyFormat = "$gates `,` $expert attr-dict `:` functional-type(operands, results)";
}

def Moe_CvLossGradOp : Moe_Op<"cv_loss_grad"> {
  let summary = "gradient of moe.cv_loss with respect to the gates";
  let description = [{
    With I, q, m, v as in moe.cv_loss, `D = m^2 + 1e-10` and `S = sum_e I_e`
    (> 1e-12; else the gradient is 0):
    `dL/dq_e = 2 (q_e - m) / ((E - 1) D) - 2 v m / (E D^2)`,
    `dL/dI_e = (dL/dq_e - sum_i q_i dL/dq_i) / S`, and
    `dgates_tj = dloss * dL/dI_{expert_tj}`.
  }];
  let arguments = (ins Moe_FloatTensor:$gates, Moe_IndexTensor:$expert,
                       Moe_FloatTensor:$dloss,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_experts);
  let results = (outs Moe_FloatTensor:$dgates);
  let assemblyFormat = "$gates `,` $expert `,` $dloss attr-dict `:` functional-type(operands, results)";
}

def Moe_ZLossOp : Moe_DiffOp<"z_loss"> {
  let summary = "router z-loss mean_t (logsumexp logits_t)^2";
  let description = [{
    logits `[..., E]`; `loss = (1/N) sum_t (log sum_e exp(logits_{t,e}))^2`,
    with a max-shifted logsumexp (MoA, Sparse Mixer).
  }];
  let arguments = (ins Moe_FloatTensor:$logits);
  let results = (outs Moe_FloatTensor:$loss);
  let assemblyFormat = "$logits attr-dict `:` functional-type(operands, results)";
}

def Moe_ZLossGradOp : Moe_Op<"z_loss_grad"> {
  let summary = "gradient of moe.z_loss";
  let description = [{ `dlogits[t, e] = dloss * 2 lse_t softmax(logits_t)_e / N`. }];
  let arguments = (ins Moe_FloatTensor:$logits, Moe_FloatTensor:$dloss);
  let results = (outs Moe_FloatTensor:$dlogits);
  let assemblyFormat = "$logits `,` $dloss attr-dict `:` functional-type(operands, results)";
}

def Moe_CrossEntropyOp : Moe_DiffOp<"cross_entropy"> {
  let summary = "mean token cross-entropy with label smoothing";
  let description = [{
    logits `[..., V]`, targets `[...]` i32; targets < 0 are ignored. With
    `lp = log_softmax(logits_t)` and smoothing `a`:
    `l_t = -(1 - a) lp[target_t] - (a / V) sum_v lp[v]`, the second term
    left out when a = 0 in f32 (so a -inf logit that is not the target adds
    0; with a > 0 it makes l_t +inf);
    `loss = sum over counted t of l_t / max(1, #counted)` and `count =
    #counted` (a 0-d float, for losses that scale by the number of target
    tokens). The optional `correct` (0-d float) counts the counted t whose
    target is the first index of the largest logit above -3e38 (index 0
    when there is none), so that evaluation gets accuracy from the same
    pass. A target >= V is a run-time error.
  }];
  let arguments = (ins Moe_FloatTensor:$logits, Moe_IndexTensor:$targets,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
  let results = (outs Moe_FloatTensor:$loss, Moe_FloatTensor:$count,
                      Optional<Moe_FloatTensor>:$correct);
  let assemblyFormat = "$logits `,` $targets attr-dict `:` functional-type(operands, results)";
}

def Moe_CrossEntropyGradOp : Moe_Op<"cross_entropy_grad"> {
  let summary = "gradient of moe.cross_entropy";
  let description = [{
    `dlogits_t = dloss * (softmax(logits_t) - (1 - a) onehot(target_t) - a / V)
    / max(1, #counted)` for counted tokens, 0 for ignored ones.
  }];
  let arguments = (ins Moe_FloatTensor:$logits, Moe_IndexTensor:$targets,
                       Moe_FloatTensor:$dloss,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
  let results = (outs Moe_FloatTensor:$dlogits);
  let assemblyFormat = "$logits `,` $targets `,` $dloss attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Optimisation.
//===----------------------------------------------------------------------===//

def Moe_LrScheduleOp : Moe_Op<"lr_schedule"> {
  let summary = "learning rate at a step";
  let description = [{
    step is the 1-based update number (0-d i64); result a 0-d f32. With
    `w = warmup`, `T = total_steps`, `s = step`: warm-up (all but constant)
    `lr = base * s / w` while s < w; then constant `base`; inverse_sqrt
    `base * sqrt(w / s)` (`base / sqrt(s)` when w = 0); linear
    `final + (base - final) * max(0, T - s) / max(1, T - w)`; cosine
    `final + (base - final) * 0.5 (1 + cos(pi min(1, (s - w) / max(1, T - w))))`;
    polynomial `final + (base - final) * (max(0, T - s) / max(1, T - w))^power`
    (linear with power 1).
  }];
  let arguments = (ins 0DTensorOf<[I64]>:$step, Moe_LrScheduleAttr:$kind,
                       F64Attr:$base_lr,
                       DefaultValuedAttr<I64Attr, "0">:$warmup,
                       DefaultValuedAttr<I64Attr, "0">:$total_steps,
                       DefaultValuedAttr<F64Attr, "0.0">:$final_lr,
                       DefaultValuedAttr<F64Attr, "1.0">:$power);
  let results = (outs 0DTensorOf<[F32]>:$lr);
  let assemblyFormat = "$step attr-dict `:` functional-type(operands, results)";
}

def Moe_GlobalNormOp : Moe_Op<"global_norm"> {
  let summary = "L2 norm of a list of tensors";
  let description = [{ `norm = sqrt(sum_i sum_elems g_i^2)`, summed in operand order. }];
  let arguments = (ins Variadic<Moe_FloatTensor>:$inputs);
  let results = (outs 0DTensorOf<[F32, F64]>:$norm);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
}

def Moe_AdamUpdateOp : Moe_Op<"adam_update"> {
  let summary = "one Adam / AdamW step for one parameter";
  let description = [{
    With `g = grad * grad_scale` (+ `weight_decay * p` unless `decoupled`),
    step s (1-based):
      m' = beta1 m + (1 - beta1) g
      v' = beta2 v + (1 - beta2) g^2
      p' = p - lr * (m' / (1 - beta1^s)) / (sqrt(v' / (1 - beta2^s)) + eps)
           - (decoupled ? lr * weight_decay * p : 0)
    Results p', m', v'; the plan updates them in place.
  }];
  let arguments = (ins Moe_FloatTensor:$param, Moe_FloatTensor:$grad,
                       Moe_FloatTensor:$m, Moe_FloatTensor:$v,
                       0DTensorOf<[I64]>:$step, 0DTensorOf<[F32]>:$lr,
                       0DTensorOf<[F32, F64]>:$grad_scale,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       UnitAttr:$decoupled);
  let results = (outs Moe_FloatTensor:$new_param, Moe_FloatTensor:$new_m,
                      Moe_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $step `,` $lr `,` $grad_scale attr-dict `:` functional-type(operands, results)
  }];
}

def Moe_RescaleRowsOp : Moe_Op<"rescale_rows"> {
  let summary = "rescales each row to a given L2 norm (no gradient)";
  let description = [{
    x `[..., C]`; with `n = ||x[r, :]||_2`: `y[r, :] = x[r, :] * (norm / n)`
    when n > 0, and the row unchanged when n = 0. moe-build-train-step
    applies it to parameters declared with `row_norm` before the forward,
    the value every later op of the step (the optimizer update included)
    reads; the step is taken at the rescaled value, which is not
    differentiated through (torch's in-place update under no_grad).
  }];
  let arguments = (ins Moe_FloatTensor:$x, F64Attr:$norm);
  let results = (outs Moe_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
}

def Moe_SgdUpdateOp : Moe_Op<"sgd_update"> {
  let summary = "one SGD step (with optional momentum) for one parameter";
  let description = [{
    With `g = grad * grad_scale + weight_decay * p`: with momentum μ > 0,
    `m' = μ m + g`, `p' = p - lr m'`; without, `p' = p - lr g` and m is
    passed through.
  }];
  let arguments = (ins Moe_FloatTensor:$param, Moe_FloatTensor:$grad,
                       Moe_FloatTensor:$m, 0DTensorOf<[F32]>:$lr,
                       0DTensorOf<[F32, F64]>:$grad_scale,
                       DefaultValuedAttr<F64Attr, "0.0">:$momentum,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay);
  let results = (outs Moe_FloatTensor:$new_param, Moe_FloatTensor:$new_m);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $lr `,` $grad_scale attr-dict `:` functional-type(operands, results)
  }];
}

include "moe/IR/MoeKernels.td"

#endif // MOE_OPS
