// Pairwise p-norm distances: _cdist_forward/_cdist_backward and
// _pdist_forward/_pdist_backward, computed directly on the differences
// (x1_i - x2_j) as CPU's direct path does.
#include <ATen/ExpandUtils.h>
#include <ATen/ops/zeros.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <cmath>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"

namespace tpu::ops {

using ir::Dims;

namespace {

DType ComputeType(DType t) { return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t; }

Value Cst(Builder& b, double v, Value like) {
  const ir::TensorType& t = b.type(like);
  return ir::Full(b, ir::ConstantF(b, v, t.dtype), t.dims);
}

// x1 [B, P, M], x2 [B, R, M] -> x1_i - x2_j [B, P, R, M].
Value Diff(Builder& b, Value x1, Value x2) {
  const Dims d1 = b.type(x1).dims, d2 = b.type(x2).dims;
  const Dims d{d1[0], d1[1], d2[1], d1[2]};
  return ir::Binary(b, "stablehlo.subtract", ir::BroadcastInDim(b, x1, d, {0, 1, 3}),
                    ir::BroadcastInDim(b, x2, d, {0, 2, 3}));
}

// The p-norm of diff over its last dim.
Value PNorm(Builder& b, Value diff, double p) {
  const DType t = b.type(diff).dtype;
  Value a = ir::Unary(b, "stablehlo.abs", diff);
  Value zero = ir::ConstantF(b, 0.0, t);
  if (std::isinf(p)) return ir::Reduce(b, a, zero, {3}, "stablehlo.maximum");
  if (p == 0)
    return ir::Reduce(b, ir::Convert(b, ir::Compare(b, a, Cst(b, 0, a), ir::Cmp::NE), t), zero, {3},
                      "stablehlo.add");
  if (p == 1) return ir::Reduce(b, a, zero, {3}, "stablehlo.add");
  if (p == 2)
    return ir::Unary(b, "stablehlo.sqrt", ir::Reduce(b, ir::Binary(b, "stablehlo.multiply", a, a),
                                                     zero, {3}, "stablehlo.add"));
  Value s = ir::Reduce(b, ir::Binary(b, "stablehlo.power", a, Cst(b, p, a)), zero, {3},
                       "stablehlo.add");
  return ir::Binary(b, "stablehlo.power", s, Cst(b, 1.0 / p, s));
}

// d dist / d x1 for every pair, times grad, summed over j: [B, P, M].
Value DistGrad(Builder& b, Value grad, Value x1, Value x2, Value dist, double p) {
  Value diff = Diff(b, x1, x2);
  const Dims d = b.type(diff).dims;
  Value zero = Cst(b, 0, diff);
  Value dist4 = ir::BroadcastInDim(b, dist, d, {0, 1, 2});
  Value g4 = ir::BroadcastInDim(b, grad, d, {0, 1, 2});
  Value sign = ir::Unary(b, "stablehlo.sign", diff);
  Value a = ir::Unary(b, "stablehlo.abs", diff);
  Value r;
  if (p == 0) {
    r = zero;
  } else if (p == 1) {
    r = sign;
  } else if (std::isinf(p)) {
    r = ir::Select(b, ir::Compare(b, a, dist4, ir::Cmp::EQ), sign, zero);
  } else if (p == 2) {
    r = ir::Binary(b, "stablehlo.divide", diff, dist4);
  } else {
    // sign(d) |d|^(p-1) / dist^(p-1)
    Value num = ir::Binary(b, "stablehlo.multiply", sign,
                           ir::Binary(b, "stablehlo.power", a, Cst(b, p - 1, a)));
    r = ir::Binary(b, "stablehlo.divide", num,
                   ir::Binary(b, "stablehlo.power", dist4, Cst(b, p - 1, dist4)));
    if (p < 1) r = ir::Select(b, ir::Compare(b, diff, zero, ir::Cmp::EQ), zero, r);
  }
  r = ir::Select(b, ir::Compare(b, dist4, zero, ir::Cmp::EQ), zero, r);
  r = ir::Binary(b, "stablehlo.multiply", r, g4);
  return ir::Reduce(b, r, ir::ConstantF(b, 0.0, b.type(r).dtype), {2}, "stablehlo.add");
}

// ins = (x1 [B, P, M], x2 [B, R, M]); floats = (p).
VS LowerCdist(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const DType ct = ComputeType(out[0].dtype);
  Value r = PNorm(b, Diff(b, ir::Convert(b, in[0], ct), ir::Convert(b, in[1], ct)), a.floats[0]);
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kCdist{"aten::_cdist_forward", &LowerCdist};

// ins = (grad [B, P, R], x1, x2, dist [B, P, R]); floats = (p).
VS LowerCdistGrad(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const DType ct = ComputeType(out[0].dtype);
  auto cv = [&](Value v) { return ir::Convert(b, v, ct); };
  Value r = DistGrad(b, cv(in[0]), cv(in[1]), cv(in[2]), cv(in[3]), a.floats[0]);
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kCdistGrad{"aten::_cdist_backward", &LowerCdistGrad};

// Flat positions i*n + j of the pairs i < j, in pdist's order.
std::vector<int64_t> UpperPairs(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) v.push_back(i * n + j);
  return v;
}
std::vector<int64_t> LowerPairs(int64_t n) {  // j*n + i, same order
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) v.push_back(j * n + i);
  return v;
}

// ins = (x [N, M]); floats = (p); out = [N*(N-1)/2].
VS LowerPdist(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const DType ct = ComputeType(out[0].dtype);
  const Dims d = b.type(in[0]).dims;
  const int64_t n = d[0];
  Value x = ir::Reshape(b, ir::Convert(b, in[0], ct), {1, n, d[1]});
  Value full = ir::Reshape(b, PNorm(b, Diff(b, x, x), a.floats[0]), {n * n});
  Value r = ir::Take(b, full, ir::ConstantVectorI(b, UpperPairs(n), DType::S64));
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kPdist{"aten::_pdist_forward", &LowerPdist};

// ins = (grad [K], x [N, M], pdist [K]); floats = (p). The pair gradient and
// distances go into symmetric [N, N] matrices; then it is cdist's backward.
VS LowerPdistGrad(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const DType ct = ComputeType(out[0].dtype);
  const Dims d = out[0].dims;
  const int64_t n = d[0];
  auto sym = [&](Value v) {
    Value z = ir::Full(b, ir::ConstantF(b, 0.0, ct), {n * n});
    z = ir::Put(b, z, ir::ConstantVectorI(b, UpperPairs(n), DType::S64), v);
    z = ir::Put(b, z, ir::ConstantVectorI(b, LowerPairs(n), DType::S64), v);
    return ir::Reshape(b, z, {1, n, n});
  };
  Value g = sym(ir::Convert(b, in[0], ct));
  Value dist = sym(ir::Convert(b, in[2], ct));
  Value x = ir::Reshape(b, ir::Convert(b, in[1], ct), {1, n, d[1]});
  Value r = DistGrad(b, g, x, x, dist, a.floats[0]);
  return {ir::Convert(b, ir::Reshape(b, r, d), out[0].dtype)};
}
constexpr lazy::Lowering kPdistGrad{"aten::_pdist_backward", &LowerPdistGrad};

void CheckCdist(const Tensor& x1, const Tensor& x2, double p) {
  CheckTpu("cdist", x1, "x1");
  CheckTpu("cdist", x2, "x2");
  TORCH_CHECK(x1.dim() >= 2, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D");
  TORCH_CHECK(x2.dim() >= 2, "cdist only supports at least 2D tensors, X2 got: ", x2.dim(), "D");
  TORCH_CHECK(at::isFloatingType(x1.scalar_type()),
              "cdist only supports floating-point dtypes, X1 got: ", x1.scalar_type());
  TORCH_CHECK(at::isFloatingType(x2.scalar_type()),
              "cdist only supports floating-point dtypes, X2 got: ", x2.scalar_type());
  TORCH_CHECK(x1.size(-1) == x2.size(-1), "X1 and X2 must have the same number of columns. X1: ",
              x1.size(-1), " X2: ", x2.size(-1));
  TORCH_CHECK(p >= 0, "cdist only supports non-negative p values");
}

// x1, x2 expanded to the broadcast batch shape and flattened to [B, *, M].
std::pair<Tensor, Tensor> Batched(const Tensor& x1, const Tensor& x2,
                                  std::vector<int64_t>* batch) {
  *batch = at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
  int64_t bs = 1;
  for (int64_t v : *batch) bs *= v;
  auto shape = [&](const Tensor& t) {
    std::vector<int64_t> s = *batch;
    s.push_back(t.size(-2));
    s.push_back(t.size(-1));
    return s;
  };
  return {x1.expand(shape(x1)).reshape({bs, x1.size(-2), x1.size(-1)}),
          x2.expand(shape(x2)).reshape({bs, x2.size(-2), x2.size(-1)})};
}

Tensor cdist_forward(const Tensor& x1, const Tensor& x2, double p,
                     std::optional<int64_t> /*compute_mode*/) {
  CheckCdist(x1, x2, p);
  std::vector<int64_t> batch;
  auto [a, b] = Batched(x1, x2, &batch);
  std::vector<int64_t> os = batch;
  os.push_back(x1.size(-2));
  os.push_back(x2.size(-2));
  const auto rt = at::result_type(x1, x2);
  if (c10::multiply_integers(os) == 0) return EmptyTpu(os, rt);
  if (x1.size(-1) == 0) return at::zeros(os, x1.options().dtype(rt));
  Tensor r = Run1(kCdist, {{}, {p}, {}}, {OperandOf(a), OperandOf(b)},
                  TypeOf({a.size(0), a.size(1), b.size(1)}, rt));
  return r.reshape(os);
}

Tensor cdist_backward(const Tensor& grad, const Tensor& x1, const Tensor& x2, double p,
                      const Tensor& cdist) {
  CheckCdist(x1, x2, p);
  CheckTpu("_cdist_backward", grad, "grad");
  CheckTpu("_cdist_backward", cdist, "cdist");
  std::vector<int64_t> batch;
  auto [a, b] = Batched(x1, x2, &batch);
  if (a.numel() == 0 || b.numel() == 0) return at::zeros(x1.sizes(), x1.options());
  const int64_t bs = a.size(0);
  Tensor g = grad.reshape({bs, a.size(1), b.size(1)});
  Tensor dist = cdist.reshape({bs, a.size(1), b.size(1)});
  Tensor r = Run1(kCdistGrad, {{}, {p}, {}},
                  {OperandOf(g), OperandOf(a), OperandOf(b), OperandOf(dist)},
                  TypeOf(a.sizes(), x1.scalar_type()));
  std::vector<int64_t> full = batch;
  full.push_back(x1.size(-2));
  full.push_back(x1.size(-1));
  r = r.reshape(full);
  return full == x1.sizes().vec() ? r : r.sum_to_size(x1.sizes());
}

void CheckPdist(const Tensor& self, double p) {
  CheckTpu("pdist", self, "self");
  TORCH_CHECK(self.dim() == 2, "pdist only supports 2D tensors, got: ", self.dim(), "D");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "pdist only supports floating-point dtypes");
  TORCH_CHECK(p >= 0, "pdist only supports non-negative p values");
}

Tensor pdist_forward(const Tensor& self, double p) {
  CheckPdist(self, p);
  const int64_t n = self.size(0);
  const int64_t k = n <= 1 ? 0 : n * (n - 1) / 2;
  if (k == 0) return EmptyTpu({0}, self.scalar_type());
  if (self.size(1) == 0) return at::zeros({k}, self.options());
  return Run1(kPdist, {{}, {p}, {}}, {OperandOf(self)}, TypeOf({k}, self.scalar_type()));
}

Tensor pdist_backward(const Tensor& grad, const Tensor& self, double p, const Tensor& pdist) {
  CheckPdist(self, p);
  CheckTpu("_pdist_backward", grad, "grad");
  if (self.size(0) <= 1 || self.size(1) == 0) return at::zeros(self.sizes(), self.options());
  return Run1(kPdistGrad, {{}, {p}, {}}, {OperandOf(grad), OperandOf(self), OperandOf(pdist)},
              TypeOf(self.sizes(), self.scalar_type()));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_cdist_forward", TORCH_FN(cdist_forward));
  m.impl("_cdist_backward", TORCH_FN(cdist_backward));
  m.impl("_pdist_forward", TORCH_FN(pdist_forward));
  m.impl("_pdist_backward", TORCH_FN(pdist_backward));
}

}  // namespace tpu::ops
