//===- Declarations.cpp - the parameters and caches of a model ------------===//
//
// Parameter paths: one-stack models keep "embed.*", "layers.<i>.<layer>.*",
// "final_norm" and "head"; encoder_decoder models prefix the stacks
// ("encoder.layers.<i>.*", "decoder.final_norm", ...) and share "embed.tokens"
// only with share_embeddings.
//
//===----------------------------------------------------------------------===//

#include "ModuleEmitter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include <cmath>

using namespace moec::frontend;
using namespace mlir;
using namespace mlir::moe;

/// MH-MoE's parameters with its authors' initialisation: torch's Linear
/// default U(+-1/sqrt(fan_in)) for the router and the experts (on width
/// m = d / heads), Xavier-uniform projections (gain 1/sqrt(2) for the
/// multi-head layer, whose bias keeps the Linear default; 1 for the merge
/// layer, bias 0).
void ModuleEmitter::declareMultiHeadMoe(const std::string &p,
                                        const MoeLayerSpec &e) {
  int64_t d = model.dModel, m = d / e.heads, f = e.hidden;
  auto linearDefault = [](int64_t fanIn) { return 1.0 / std::sqrt(fanIn); };
  if (e.headProj) {
    addParam(p + ".head_proj.w", {d, d}, Init::XavierUniform, M_SQRT1_2);
    addParam(p + ".head_proj.b", {d}, Init::Uniform, linearDefault(d));
  }
  if (e.xmoeDim > 0) {
    addParam(p + ".router_reduce", {m, e.xmoeDim}, Init::Uniform,
             linearDefault(m));
    addParam(p + ".router_embed", {e.experts, e.xmoeDim}, Init::Orthogonal,
             0.32, /*frozen=*/false, /*rowNorm=*/1.5);
  } else {
    addParam(p + ".router", {m, e.experts}, Init::Uniform, linearDefault(m));
  }
  addParam(p + ".w1", {e.experts, m, f}, Init::Uniform, linearDefault(m));
  if (e.bias)
    addParam(p + ".b1", {e.experts, f}, Init::Uniform, linearDefault(m));
  if (e.glu)
    addParam(p + ".w3", {e.experts, m, f}, Init::Uniform, linearDefault(m));
  addParam(p + ".w2", {e.experts, f, m}, Init::Uniform, linearDefault(f));
  if (e.bias)
    addParam(p + ".b2", {e.experts, m}, Init::Uniform, linearDefault(f));
  if (e.mergeProj) {
    addParam(p + ".merge_proj.w", {d, d}, Init::XavierUniform, 1.0);
    addParam(p + ".merge_proj.b", {d}, Init::Zeros);
  }
}

/// An MAE gate: BatchNorm (affine; its running statistics are frozen
/// parameters that the training programs update), then two Linear layers
/// with torch's default initialisation U(+-1/sqrt(fan_in)).
void ModuleEmitter::declareMaeGate(const std::string &p, const MaeSpec &mae,
                                   int64_t heads) {
  int64_t d = model.dModel, hidden = mae.gateHidden;
  auto linearDefault = [](int64_t fanIn) { return 1.0 / std::sqrt(fanIn); };
  addParam(p + ".gate.bn.g", {d}, Init::Ones);
  addParam(p + ".gate.bn.b", {d}, Init::Zeros);
  addParam(p + ".gate.bn.mean", {d}, Init::Zeros, 1.0, /*frozen=*/true);
  addParam(p + ".gate.bn.var", {d}, Init::Ones, 1.0, /*frozen=*/true);
  addParam(p + ".gate.w1", {d, hidden}, Init::Uniform, linearDefault(d));
  addParam(p + ".gate.b1", {hidden}, Init::Uniform, linearDefault(d));
  addParam(p + ".gate.w2", {hidden, heads}, Init::Uniform,
           linearDefault(hidden));
  addParam(p + ".gate.b2", {heads}, Init::Uniform, linearDefault(hidden));
}

std::string ModuleEmitter::prefix(const StackSpec &stack, size_t block,
                                  const SublayerSpec &sub) {
  return stack.prefix + "." + std::to_string(block) + "." + sub.name;
}

std::string ModuleEmitter::stackName(const StackSpec &stack) const {
  if (model.kind != ModelKind::EncoderDecoder)
    return "";
  return stack.role == StackSpec::Role::Encoder ? "encoder." : "decoder.";
}

std::string ModuleEmitter::tokenTable(const StackSpec &stack) const {
  if (model.kind != ModelKind::EncoderDecoder || model.shareEmbeddings)
    return "embed.tokens";
  return stackName(stack) + "embed.tokens";
}

std::string ModuleEmitter::positionTable(const StackSpec &stack) const {
  // Sinusoids are fixed: every stack reads the same table.
  if (model.positions == Positions::Sinusoidal)
    return "embed.positions";
  return stackName(stack) + "embed.positions";
}

void ModuleEmitter::declareParameters() {
  int64_t d = model.dModel;
  double std = model.initStd;
  for (const StackSpec &stack : model.stacks) {
    if (tokenTable(stack) != "embed.tokens" || &stack == &model.stacks[0])
      addParam(tokenTable(stack), {model.vocab, d}, Init::Normal, std);
    if (model.positions == Positions::Learned)
      addParam(positionTable(stack), {model.maxSeq, d}, Init::Normal, std);
    else if (model.positions == Positions::Sinusoidal &&
             &stack == &model.stacks[0])
      addParam("embed.positions", {model.maxSeq, d}, Init::Sinusoidal, 1.0,
               /*frozen=*/true);
    if (model.segments > 0)
      addParam("embed.segments", {model.segments, d}, Init::Normal, std);
    if (model.embedNorm)
      addNorm(stackName(stack) + "embed.norm");

    // GPT-2: residual output projections start smaller with depth.
    double residualStd =
        std / std::sqrt(2.0 * std::max<size_t>(1, stack.blocks.size()));
    for (auto [i, block] : llvm::enumerate(stack.blocks)) {
      for (const SublayerSpec &sub : block.sublayers) {
        std::string p = prefix(stack, i, sub);
        paramSource = sub.range;
        addNorm(p + ".norm");
        switch (sub.kind) {
        case SublayerSpec::Kind::Attention: {
          const AttentionSpec &a = sub.attention;
          int64_t q = a.heads * a.headDim, kv = a.kvHeads * a.headDim;
          addParam(p + ".wq", {d, q}, Init::Normal, std);
          addParam(p + ".wk", {d, kv}, Init::Normal, std);
          addParam(p + ".wv", {d, kv}, Init::Normal, std);
          addParam(p + ".wo", {q, d}, Init::Normal, residualStd);
          if (a.bias) {
            addParam(p + ".bq", {q}, Init::Zeros);
            addParam(p + ".bk", {kv}, Init::Zeros);
            addParam(p + ".bv", {kv}, Init::Zeros);
            addParam(p + ".bo", {d}, Init::Zeros);
          }
          if (a.mae && !a.mae->uniform)
            declareMaeGate(p, *a.mae, a.heads);
          break;
        }
        case SublayerSpec::Kind::Moa: {
          // MoA's initialisation: a zero router (uniform probabilities at
          // step 0), Xavier-uniform experts, and Xavier-uniform shared K/V
          // with gain 1/sqrt(2).
          const MoaSpec &a = sub.moa;
          int64_t e = a.experts, dh = a.headDim;
          addParam(p + ".router", {d, e}, Init::Zeros);
          addParam(p + ".wq", {e, d, dh}, Init::XavierUniform);
          addParam(p + ".wk", {d, dh}, Init::XavierUniform, M_SQRT1_2);
          addParam(p + ".wv", {d, dh}, Init::XavierUniform, M_SQRT1_2);
          if (a.bias) {
            addParam(p + ".bk", {dh}, Init::Zeros);
            addParam(p + ".bv", {dh}, Init::Zeros);
          }
          addParam(p + ".wo", {e, dh, d}, Init::XavierUniform);
          break;
        }
        case SublayerSpec::Kind::Ffn: {
          const FfnSpec &f = sub.ffn;
          addParam(p + ".w1", {d, f.hidden}, Init::Normal, std);
          if (f.bias)
            addParam(p + ".b1", {f.hidden}, Init::Zeros);
          if (f.glu)
            addParam(p + ".w3", {d, f.hidden}, Init::Normal, std);
          addParam(p + ".w2", {f.hidden, d}, Init::Normal, residualStd);
          if (f.bias)
            addParam(p + ".b2", {d}, Init::Zeros);
          break;
        }
        case SublayerSpec::Kind::Moe: {
          const MoeLayerSpec &e = sub.moe;
          if (e.multiHead) {
            declareMultiHeadMoe(p, e);
            break;
          }
          addParam(p + ".router", {d, e.experts}, Init::Normal, std);
          if (e.routerBias)
            addParam(p + ".router_b", {e.experts}, Init::Zeros);
          addParam(p + ".w1", {e.experts, d, e.hidden}, Init::Normal, std);
          if (e.bias)
            addParam(p + ".b1", {e.experts, e.hidden}, Init::Zeros);
          if (e.glu)
            addParam(p + ".w3", {e.experts, d, e.hidden}, Init::Normal, std);
          addParam(p + ".w2", {e.experts, e.hidden, d}, Init::Normal,
                   residualStd);
          if (e.bias)
            addParam(p + ".b2", {e.experts, d}, Init::Zeros);
          break;
        }
        }
      }
    }
    paramSource = model.range;
    if (model.preNorm)
      addNorm(stackName(stack) + "final_norm");
  }
  if (model.objective == Objective::Classify) {
    addParam("pooler.w", {d, d}, Init::Normal, std);
    addParam("pooler.b", {d}, Init::Zeros);
    addParam("classifier.w", {d, model.classes}, Init::Normal, std);
    addParam("classifier.b", {model.classes}, Init::Zeros);
  } else if (!model.tieEmbeddings) {
    addParam("head", {d, model.vocab}, Init::Normal, std);
  }
}

void ModuleEmitter::declareCaches(Location loc) {
  const StackSpec *decoder = model.decoder();
  if (!decoder)
    return;
  for (auto [i, block] : llvm::enumerate(decoder->blocks))
    for (const SublayerSpec &sub : block.sublayers) {
      bool cross;
      int64_t width;
      if (sub.kind == SublayerSpec::Kind::Attention) {
        cross = sub.attention.cross;
        width = sub.attention.kvHeads * sub.attention.headDim;
      } else if (sub.kind == SublayerSpec::Kind::Moa) {
        cross = sub.moa.cross;
        width = sub.moa.headDim;
      } else {
        continue;
      }
      // Self-attention caches hold max_seq positions; cross-attention
      // caches the encoder's T positions.
      int64_t length = cross ? ShapedType::kDynamic : model.maxSeq;
      auto type = RankedTensorType::get({ShapedType::kDynamic, length, width},
                                        floatType);
      Attribute lengthDim = cross ? Attribute(b.getStringAttr("T"))
                                  : Attribute(b.getI64IntegerAttr(length));
      ArrayAttr dims = b.getArrayAttr(
          {b.getStringAttr("B"), lengthDim, b.getI64IntegerAttr(width)});
      for (const char *kv : {".k", ".v"}) {
        std::string name =
            (cross ? "xkv." : "kv.") + prefix(*decoder, i, sub) + kv;
        b.create<StateOp>(loc, b.getStringAttr(name), TypeAttr::get(type),
                          dims, FlatSymbolRefAttr());
        caches.push_back({name, type, cross});
      }
      // An MAE gate's causal window reads the layer's earlier inputs.
      if (sub.kind == SublayerSpec::Kind::Attention && sub.attention.mae &&
          maePoolsHistory(*sub.attention.mae)) {
        int64_t d = model.dModel;
        auto poolType = RankedTensorType::get(
            {ShapedType::kDynamic, model.maxSeq, d}, floatType);
        std::string name = "pool." + prefix(*decoder, i, sub);
        b.create<StateOp>(loc, b.getStringAttr(name), TypeAttr::get(poolType),
                          b.getArrayAttr({b.getStringAttr("B"),
                                          b.getI64IntegerAttr(model.maxSeq),
                                          b.getI64IntegerAttr(d)}),
                          FlatSymbolRefAttr());
        caches.push_back({name, poolType, false});
      }
    }
}
