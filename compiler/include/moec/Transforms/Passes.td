//===- Passes.td - moe compiler passes ---------------------*- tablegen -*-===//

#ifndef MOEC_TRANSFORMS_PASSES
#define MOEC_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def MoeInferShapes : Pass<"moe-infer-shapes", "::mlir::ModuleOp"> {
  let summary = "infer ranked result types and check every shape";
  let description = [{
    Walks each function in program order and computes every result shape
    from its operands with the op's `SymbolicShapeOpInterface`, starting from
    the argument types and their `moe.dims` symbols. Unranked results become
    ranked (`?` where a dimension depends on a run-time symbol); ranked
    results must agree. Function result types are updated to match. Any
    mismatch is reported at the op that causes it.

    Before:
    ```mlir
    %y = moe.linear %x, %w : (tensor<?x?x64xf32>, tensor<64x32xf32>) -> tensor<*xf32>
    ```
    After:
    ```mlir
    %y = moe.linear %x, %w : (tensor<?x?x64xf32>, tensor<64x32xf32>) -> tensor<?x?x32xf32>
    ```
  }];
  let dependentDialects = ["::mlir::moe::MoeDialect"];
}

def MoeBuildBackward : Pass<"moe-build-backward", "::mlir::ModuleOp"> {
  let summary = "derive the gradient program of the loss (reverse-mode autodiff)";
  let description = [{
    Clones the objective function (`moe.entry = "loss"`, its first result the
    scalar to minimise) into a new function `backward` that returns the same
    results followed by the gradient of the objective with respect to every
    trainable parameter argument (`moe.param` on a non-frozen `moe.param`
    declaration), each marked `moe.output = "grad:<name>"`. Gradients are
    built in reverse program order with each op's
    `DifferentiableOpInterface`; gradients of values used several times are
    summed with `arith.addf` in use order. Only ops on a path from a trainable
    parameter to the objective are differentiated.
  }];
  let dependentDialects = ["::mlir::moe::MoeDialect",
                           "::mlir::arith::ArithDialect"];
}

def MoeBuildTrainStep : Pass<"moe-build-train-step", "::mlir::ModuleOp"> {
  let summary = "build the train_step entry point: gradients + optimizer update";
  let description = [{
    From `backward` and the module's `moe.training` settings, builds
    `train_step`: it takes the parameters, the optimizer state (declared here
    as `moe.state` ops shadowing each trainable parameter), the 1-based
    `step` and the batch, computes the learning rate (`moe.lr_schedule`), the
    global gradient norm (`moe.global_norm`) and the clipping factor, applies
    one `moe.adam_update` or `moe.sgd_update` per trainable parameter and
    returns the objective's results, the learning rate, the gradient norm and
    the updated parameters and state (`moe.update = @name`).
  }];
  let dependentDialects = ["::mlir::moe::MoeDialect",
                           "::mlir::arith::ArithDialect"];
}

def MoeFuseKernels : Pass<"moe-fuse-kernels", "::mlir::ModuleOp"> {
  let summary = "group the ops of each entry function into kernels";
  let description = [{
    Marks every op of each entry function with `moe.group` (the index of its
    kernel, in program order) and the first op of each group with
    `moe.kernel`, the kind of kernel the CUDA emitter writes for it. Each
    group starts at the op that decides its kind and takes the following ops
    its producer/consumer rules allow: a linear op takes its activation and
    residual add (gemm); the router's logits, softmax, top-k, gates,
    capacity positions, balance and z losses and expert load form one router
    kernel; an expert FFN takes its residual add; a norm takes the residual
    add that feeds it; runs of elementwise ops over the same number of
    elements, and runs of 0-d ops, fuse; the global gradient norm takes the
    clipping arithmetic; all optimizer updates form one multi-tensor kernel.
    Ops the router absorbs are moved next to it (all ops are pure).
  }];
  let dependentDialects = ["::mlir::moe::MoeDialect"];
}

def MoeTileKernels : Pass<"moe-tile-kernels", "::mlir::ModuleOp"> {
  let summary = "choose tiles and launch shapes for each kernel group";
  let description = [{
    For each group marked by moe-fuse-kernels, picks the thread-block size,
    tile sizes and shared-memory use for the target architecture and records
    them as `moe.tiles` on the group's first op. The choices depend on the
    static sizes (model width, head dim, experts) and on the architecture's
    limits (shared memory per block: 163 KiB on sm_80, 227 KiB on sm_90).
  }];
  let options = [
    Option<"arch", "arch", "std::string", "\"sm_80\"",
           "target architecture: sm_80 or sm_90">,
  ];
  let dependentDialects = ["::mlir::moe::MoeDialect"];
}

def MoeLowerToPlan : Pass<"moe-lower-to-plan", "::mlir::ModuleOp"> {
  let summary = "assign buffers and steps: the execution plan of each entry";
  let description = [{
    For every entry function (`moe.entry`), computes the symbolic shape of
    every value, gives each temporary a buffer, reusing the buffer of a value
    whose last use has passed when dtype and shape agree, and lets updates of
    parameters and state (`moe.update`) write in place when the updating op
    is their last reader. Annotates each op with its step number and its
    input and output buffers (`moe.step`, `moe.in`, `moe.out`) and the
    function with its buffer table (`moe.buffers`). A value that is never
    read gets no buffer (-1): the device may skip computing it.
  }];
  let dependentDialects = ["::mlir::moe::MoeDialect"];
}

#endif // MOEC_TRANSFORMS_PASSES
