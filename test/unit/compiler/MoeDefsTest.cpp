//===- MoeDefsTest.cpp - the generated contract agrees with the dialect ---===//
//
// moec/support/MoeDefs.h is generated from the same ODS as the dialect and
// committed; these tests hold the two to each other value by value.
//
//===----------------------------------------------------------------------===//

#include "moe/IR/MoeOps.h"
#include "moec/support/MoeDefs.h"

#include <gtest/gtest.h>

using namespace mlir::moe;
namespace defs = moec::defs;

namespace {

/// Every generated value spells like the dialect value of the same number.
#define EXPECT_SAME_ENUM(Name)                                                 \
  for (defs::Name value : defs::k##Name##Values) {                             \
    std::string_view spelled = defs::spelling(value);                          \
    EXPECT_EQ(stringify##Name(static_cast<Name>(value)).str(), spelled);       \
    std::optional<Name> back = symbolize##Name(spelled);                       \
    ASSERT_TRUE(back.has_value()) << spelled;                                  \
    EXPECT_EQ(static_cast<int32_t>(*back), static_cast<int32_t>(value));       \
    EXPECT_EQ(defs::parse##Name(spelled), value);                              \
  }                                                                            \
  EXPECT_EQ(defs::k##Name##Values.size(),                                      \
            static_cast<size_t>(getMaxEnumValFor##Name()) + 1)

TEST(MoeDefs, EnumsAgreeWithTheDialect) {
  EXPECT_SAME_ENUM(Activation);
  EXPECT_SAME_ENUM(GateWeighting);
  EXPECT_SAME_ENUM(Capacity);
  EXPECT_SAME_ENUM(Priority);
  EXPECT_SAME_ENUM(BalanceLoss);
  EXPECT_SAME_ENUM(LrSchedule);
  EXPECT_SAME_ENUM(Init);
}

/// Every name is an attribute name of the op (ODS's own list).
template <typename Op>
void expectAttributes(std::string_view name,
                      std::initializer_list<std::string_view> attributes) {
  EXPECT_EQ(name, Op::getOperationName().str());
  llvm::ArrayRef<llvm::StringRef> known = Op::getAttributeNames();
  for (std::string_view a : attributes)
    EXPECT_TRUE(llvm::is_contained(known, llvm::StringRef(a)))
        << a << " is not an attribute of " << name;
}

TEST(MoeDefs, OpAndAttributeNamesAgreeWithTheDialect) {
  namespace ops = defs::ops;
  expectAttributes<TopKRouterOp>(
      ops::topk_router::kName,
      {ops::topk_router::kK, ops::topk_router::kGate,
       ops::topk_router::kCapacity, ops::topk_router::kCapacityFactor,
       ops::topk_router::kMinCapacity, ops::topk_router::kPriority});
  expectAttributes<ExpertFfnOp>(ops::expert_ffn::kName,
                                {ops::expert_ffn::kActivation});
  expectAttributes<AttentionOp>(
      ops::attention::kName,
      {ops::attention::kNumHeads, ops::attention::kNumKvHeads,
       ops::attention::kScale, ops::attention::kCausal});
  expectAttributes<AdamUpdateOp>(
      ops::adam_update::kName,
      {ops::adam_update::kBeta1, ops::adam_update::kBeta2,
       ops::adam_update::kEps, ops::adam_update::kWeightDecay,
       ops::adam_update::kDecoupled});
  EXPECT_DOUBLE_EQ(ops::layer_norm::kEpsDefault, 1e-5);
  EXPECT_DOUBLE_EQ(ops::rms_norm::kEpsDefault, 1e-6);
  EXPECT_EQ(ops::topk_router::kMinCapacityDefault, 0);
}

} // namespace
