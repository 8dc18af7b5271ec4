//===- InstructionMixTest.cpp - counting instruction kinds in PTX ---------===//

#include "moec/Cuda.h"

#include <gtest/gtest.h>

using namespace moec;

namespace {

// A hand-written function body in NVRTC's layout: guarded instructions,
// labels, scopes, a call whose operands take four lines, comments.
const char *const kPtx = R"ptx(
.version 8.8
.target sm_90
.address_size 64

.func  (.param .b64 func_retval0) helper(.param .b64 helper_param_0)
{
	.reg .b64 	%rd<4>;
	ld.param.u64 	%rd1, [helper_param_0];
	ld.global.v4.f32 	{%f1, %f2, %f3, %f4}, [%rd1];
	ld.global.nc.v2.f64 	{%fd1, %fd2}, [%rd1];   // 16 bytes too
	add.f64 	%fd3, %fd1, %fd2;
	st.param.f64 	[func_retval0+0], %fd3;
	ret;
}

.visible .entry k(.param .align 8 .b8 k_param_0[1664])
{
	.reg .pred 	%p<3>;
	ld.param.u64 	%rd1, [k_param_0];
	@%p1 bra 	$L__BB0_2;
	cp.async.cg.shared.global [%r1], [%rd1], 16, %r2;
	cp.async.commit_group;
	cp.async.wait_group 1;
	bar.sync 	0;
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r3, %r4, %r5, %r6}, [%r7];
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f5, %f6, %f7, %f8}, {%r3, %r4, %r5, %r6}, {%r8, %r9}, {%f5, %f6, %f7, %f8};
$L__BB0_2:
	@!%p2 ld.global.f32 	%f9, [%rd1+4];
	ld.shared.u32 	%r10, [%r11];
	st.shared.u32 	[%r11], %r10;
	ld.shared.v4.f32 	{%f1, %f2, %f3, %f4}, [%r11+16];
	bar.warp.sync 	-1;
	{ // callseq 0, 0
	.param .b64 param0;
	st.param.b64 	[param0+0], %rd1;
	.param .b64 retval0;
	call.uni (retval0), 
	helper, 
	(
	param0
	);
	ld.param.f64 	%fd4, [retval0+0];
	} // callseq 0
	st.global.v4.u32 	[%rd1], {%r1, %r2, %r3, %r4};
	st.global.f32 	[%rd1], %f9;
	ret;
}
)ptx";

} // namespace

TEST(InstructionMix, CountsEachKindInAHandWrittenModule) {
  InstructionMix m = instructionMix(kPtx);
  // helper: ld.param, 2 ld.global, add, st.param, ret (6); k: ld.param,
  // bra, 3 cp.async, bar.sync, ldmatrix, mma, ld.global, 2 ld.shared,
  // st.shared, bar.warp.sync, st.param, call, ld.param, 2 st.global, ret
  // (19).
  EXPECT_EQ(m.instructions, 25);
  EXPECT_EQ(m.mma, 1);
  EXPECT_EQ(m.ldmatrix, 1);
  EXPECT_EQ(m.cpAsync, 1);
  EXPECT_EQ(m.globalLoads, 3);
  EXPECT_EQ(m.globalLoads16, 2);
  EXPECT_EQ(m.globalStores, 2);
  EXPECT_EQ(m.globalStores16, 1);
  EXPECT_EQ(m.sharedAccesses, 3);
  EXPECT_EQ(m.sharedAccesses16, 1);
  EXPECT_EQ(m.barriers, 1);
  EXPECT_EQ(m.calls, 1);
  EXPECT_EQ(m.f64, 4); // ld.nc.v2.f64, add.f64 and two param moves
}

TEST(InstructionMix, WgmmaCountsAsTensorCoreWork) {
  InstructionMix m = instructionMix(
      "\twgmma.fence.sync.aligned;\n"
      "\twgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%f1}, %rd1, "
      "%rd2, 1, 1, 1, 0, 0;\n"
      "\twgmma.commit_group.sync.aligned;\n");
  EXPECT_EQ(m.instructions, 3);
  EXPECT_EQ(m.mma, 1);
}

TEST(InstructionMix, AnEmptyModuleHasNoInstructions) {
  InstructionMix m =
      instructionMix(".version 8.8\n.target sm_80\n// nothing\n");
  EXPECT_EQ(m.instructions, 0);
  EXPECT_EQ(m.globalLoads, 0);
}
