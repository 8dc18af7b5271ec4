//===- TensorTest.cpp - host tensors --------------------------------------===//

#include "moec/Error.h"
#include "moec/Tensor.h"

#include <gtest/gtest.h>

using namespace moec;

TEST(Tensor, OfCopiesValuesAndShape) {
  Tensor t = Tensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(t.dtype(), DType::F32);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 24u);
  EXPECT_EQ(t.at(4), 5.0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
}

TEST(Tensor, RejectsWrongValueCount) {
  EXPECT_THROW(Tensor::of<int32_t>({2, 2}, {1, 2, 3}), Error);
}

TEST(Tensor, DTypeNamesRoundTrip) {
  for (DType d : {DType::F32, DType::F64, DType::BF16, DType::I32, DType::I64})
    EXPECT_EQ(parseDType(dtypeName(d)), d);
  EXPECT_THROW(parseDType("f8"), Error);
}
