// Golden-text tests of the printer, and printed programs run on the plugin.
#include "ir/ir.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "ir/ops.h"
#include "pjrt/pjrt.h"

namespace tpu::ir {
namespace {

TEST(IrPrint, AddModule) {
  Builder b;
  TensorType t{DType::F32, {2, 3}};
  Value x = b.Param(t);
  Value y = b.Param(t);
  Value z = Binary(b, "stablehlo.add", x, y);
  EXPECT_EQ(b.Print({z}),
            "module @main attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
            "  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>) -> (tensor<2x3xf32>) {\n"
            "    %2 = \"stablehlo.add\"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>\n"
            "    \"func.return\"(%2) : (tensor<2x3xf32>) -> ()\n"
            "  }\n"
            "}\n");
}

TEST(IrPrint, ConstantsAreBitExact) {
  Builder b;
  Value c1 = ConstantF(b, 1.0, DType::F32);
  Value c2 = ConstantF(b, -INFINITY, DType::BF16);
  Value c3 = ConstantI(b, -7, DType::S64);
  Value c4 = ConstantI(b, 1, DType::PRED);
  Value c5 = ConstantF(b, 0.1, DType::F64);
  Value c6 = ConstantF(b, 1.0, DType::F16);
  std::string s = b.Print({c1, c2, c3, c4, c5, c6});
  EXPECT_NE(s.find("dense<0x3F800000> : tensor<f32>"), std::string::npos) << s;
  EXPECT_NE(s.find("dense<0xFF80> : tensor<bf16>"), std::string::npos) << s;
  EXPECT_NE(s.find("dense<-7> : tensor<i64>"), std::string::npos) << s;
  EXPECT_NE(s.find("dense<true> : tensor<i1>"), std::string::npos) << s;
  EXPECT_NE(s.find("dense<0x3FB999999999999A> : tensor<f64>"), std::string::npos) << s;
  EXPECT_NE(s.find("dense<0x3C00> : tensor<f16>"), std::string::npos) << s;
}

TEST(IrPrint, ReduceRegionAndMultiResult) {
  Builder b;
  Value x = b.Param({DType::F32, {4, 8}});
  Value s = Reduce(b, x, ConstantF(b, 0, DType::F32), {1}, "stablehlo.add");
  auto [v, i] = ArgReduce(b, x, 0, true);
  std::string text = b.Print({s, v, i});
  EXPECT_NE(text.find("\"stablehlo.reduce\"(%arg0, %1) ({\n      ^bb0(%2: tensor<f32>, %3: tensor<f32>):\n"
                      "        %4 = \"stablehlo.add\"(%2, %3) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
                      "        \"stablehlo.return\"(%4) : (tensor<f32>) -> ()\n"
                      "    }) {dimensions = array<i64: 1>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(":2 = \"stablehlo.reduce\""), std::string::npos) << text;
  EXPECT_NE(text.find("#1) : (tensor<4xf32>, tensor<8xf32>, tensor<8xi64>) -> ()"),
            std::string::npos)
      << text;
}

// Compiles and runs printed programs on the real plugin.
class IrRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* path = std::getenv("TORCH_TPU_TEST_PLUGIN");
    ASSERT_NE(path, nullptr) << "set TORCH_TPU_TEST_PLUGIN to the CPU plugin .so";
    client_ = pjrt::Client::Create(path);
  }
  std::vector<float> RunF32(const std::string& text, const std::vector<std::vector<float>>& args,
                            const std::vector<std::vector<int64_t>>& dims, size_t out_n,
                            size_t out_index = 0) {
    auto exe = client_->Compile(text);
    std::vector<std::unique_ptr<pjrt::Buffer>> bufs;
    std::vector<PJRT_Buffer*> raw;
    for (size_t i = 0; i < args.size(); ++i) {
      bufs.push_back(client_->BufferFromHost(args[i].data(), pjrt::ElementType::F32, dims[i]));
      raw.push_back(bufs.back()->raw());
    }
    auto outs = exe->Execute(raw);
    std::vector<float> out(out_n);
    outs[out_index]->ToHost(out.data(), out_n * sizeof(float));
    return out;
  }
  static std::shared_ptr<pjrt::Client> client_;
};
std::shared_ptr<pjrt::Client> IrRun::client_;

TEST_F(IrRun, BroadcastTransposeSlice) {
  Builder b;
  Value x = b.Param({DType::F32, {2, 3}});
  Value t = Transpose(b, x, {1, 0});                       // 3x2
  Value s = Slice(b, t, {1, 0}, {3, 2}, {1, 1});           // rows 1..2 -> 2x2
  Value r = Binary(b, "stablehlo.multiply", s, BroadcastTo(b, ConstantF(b, 2, DType::F32), {2, 2}));
  auto out = RunF32(b.Print({r}), {{0, 1, 2, 3, 4, 5}}, {{2, 3}}, 4);
  EXPECT_EQ(out, (std::vector<float>{2, 8, 4, 10}));
}

TEST_F(IrRun, ArgMaxFirstIndexAndNaN) {
  Builder b;
  Value x = b.Param({DType::F32, {2, 4}});
  auto [v, i] = ArgReduce(b, x, 1, true);
  Value fi = Convert(b, i, DType::F32);
  std::string text = b.Print({v, fi});
  const float nan = std::nanf("");
  auto idx = RunF32(text, {{1, 5, 5, 2, 3, nan, 7, nan}}, {{2, 4}}, 2, 1);
  EXPECT_EQ(idx[0], 1);  // first of the tied maxima
  EXPECT_EQ(idx[1], 1);  // first NaN wins
}

TEST_F(IrRun, TakeAndPut) {
  Builder b;
  Value x = b.Param({DType::F32, {6}});
  Value idx = Iota(b, {3}, 0, DType::S64);
  idx = Binary(b, "stablehlo.multiply", idx, Full(b, ConstantI(b, 2, DType::S64), {3}));
  Value taken = Take(b, x, idx);                             // x[0], x[2], x[4]
  Value put = Put(b, x, idx, Full(b, ConstantF(b, -1, DType::F32), {3}));
  std::string text = b.Print({taken, put});
  auto t = RunF32(text, {{0, 1, 2, 3, 4, 5}}, {{6}}, 3, 0);
  EXPECT_EQ(t, (std::vector<float>{0, 2, 4}));
  auto p = RunF32(text, {{0, 1, 2, 3, 4, 5}}, {{6}}, 6, 1);
  EXPECT_EQ(p, (std::vector<float>{-1, 1, -1, 3, -1, 5}));
}

}  // namespace
}  // namespace tpu::ir
