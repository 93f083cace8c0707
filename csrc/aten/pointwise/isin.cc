// isin: membership of each element in a set of test elements (generate()'s
// end-of-sequence check). Both sides are compared in their promoted dtype;
// every element is compared with every test element, which suits the small
// sets models pass.
#include <ATen/ops/full.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/scalar_tensor.h>
#include <torch/library.h>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"

namespace tpu::ops {

namespace {

// ins = (elements, test elements); ints = (compare dtype, invert).
VS LowerIsin(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto ct = static_cast<ir::DType>(a.ints[0]);
  const int64_t n = b.type(in[0]).numel(), m = b.type(in[1]).numel();
  Value e = ir::Reshape(b, ir::Convert(b, in[0], ct), {n});
  Value t = ir::Reshape(b, ir::Convert(b, in[1], ct), {m});
  Value eq = ir::Compare(b, ir::BroadcastInDim(b, e, {n, m}, {0}),
                         ir::BroadcastInDim(b, t, {n, m}, {1}), ir::Cmp::EQ);
  Value any = ir::Reduce(b, eq, ir::ConstantI(b, 0, ir::DType::PRED), {1}, "stablehlo.or");
  if (a.ints[1]) any = ir::Unary(b, "stablehlo.not", any);
  return {ir::Reshape(b, any, out[0].dims)};
}
constexpr lazy::Lowering kIsin{"aten::isin", &LowerIsin};

Tensor Isin(const Tensor& elements, const Tensor& test, bool invert) {
  CheckTpu("isin", elements, "elements");
  CheckTpu("isin", test, "test_elements");
  const auto ct = at::result_type(elements, test);
  TORCH_CHECK(!at::isComplexType(ct), "isin is not supported for complex dtypes");
  if (elements.numel() == 0 || test.numel() == 0) {
    return at::full(elements.sizes(), invert, elements.options().dtype(at::kBool));
  }
  return Run1(kIsin, {{IrCode(ct), static_cast<int64_t>(invert)}, {}, {}}, {OperandOf(elements), OperandOf(test)},
              TypeOf(elements.sizes(), at::kBool));
}

Tensor ScalarTensor(const c10::Scalar& s, const Tensor& like) {
  return at::scalar_tensor(s, like.options().dtype(s.type()));
}

Tensor isin_tt(const Tensor& e, const Tensor& t, bool, bool invert) { return Isin(e, t, invert); }
Tensor& isin_tt_out(const Tensor& e, const Tensor& t, bool, bool invert, Tensor& out) {
  Tensor r = Isin(e, t, invert);
  PrepareOut("isin", out, r.sizes(), at::kBool);
  return out.copy_(r);
}
Tensor isin_ts(const Tensor& e, const c10::Scalar& t, bool, bool invert) {
  return Isin(e, ScalarTensor(t, e), invert);
}
Tensor& isin_ts_out(const Tensor& e, const c10::Scalar& t, bool, bool invert, Tensor& out) {
  Tensor r = isin_ts(e, t, false, invert);
  PrepareOut("isin", out, r.sizes(), at::kBool);
  return out.copy_(r);
}
Tensor isin_st(const c10::Scalar& e, const Tensor& t, bool, bool invert) {
  return Isin(ScalarTensor(e, t), t, invert);
}
Tensor& isin_st_out(const c10::Scalar& e, const Tensor& t, bool, bool invert, Tensor& out) {
  Tensor r = isin_st(e, t, false, invert);
  PrepareOut("isin", out, r.sizes(), at::kBool);
  return out.copy_(r);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("isin.Tensor_Tensor", TORCH_FN(isin_tt));
  m.impl("isin.Tensor_Tensor_out", TORCH_FN(isin_tt_out));
  m.impl("isin.Tensor_Scalar", TORCH_FN(isin_ts));
  m.impl("isin.Tensor_Scalar_out", TORCH_FN(isin_ts_out));
  m.impl("isin.Scalar_Tensor", TORCH_FN(isin_st));
  m.impl("isin.Scalar_Tensor_out", TORCH_FN(isin_st_out));
}

}  // namespace tpu::ops
