// Matrix products: mm, bmm, addmm, baddbmm (matmul, linear and einsum
// decompose into these), and addbmm (the sum over a batch of products).
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/addr_native.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/bitwise_and.h>
#include <ATen/ops/bitwise_or.h>
#include <ATen/ops/bitwise_right_shift.h>
#include <ATen/ops/bitwise_left_shift.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/where.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/add.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/relu.h>
#include <torch/library.h>

#include <cmath>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/precision.h"
#include "aten/pointwise/complex.h"
#include "aten/kernel_helpers.h"
#include "aten/indexing/index_checks.h"
#include "aten/formula.h"
#include "aten/loops.h"

namespace tpu::ops {

namespace {

// ins = (a, b[, c][, alpha][, beta]); ints = (precision, batched, has_c,
// has_alpha, has_beta). out = beta * c + alpha * (a @ b).
VS LowerMatmul(Builder& b, const VS& in, const lazy::Attrs& at, const TT& out) {
  const auto p = static_cast<Precision>(at.ints[0]);
  const bool batched = at.ints[1] != 0;
  ir::DotDims dd = batched ? ir::DotDims{{0}, {0}, {2}, {1}} : ir::DotDims{{}, {}, {1}, {0}};
  const ir::DType compute =
      ir::IsFloat(out[0].dtype) && out[0].dtype != ir::DType::F64 ? ir::DType::F32 : out[0].dtype;
  Value r = PreciseDot(b, in[0], in[1], dd, ir::TensorType{compute, out[0].dims}, p);
  size_t next = at.ints[2] ? 3 : 2;
  if (at.ints[3]) {
    Value alpha = ir::Full(b, ir::Convert(b, in[next++], compute), out[0].dims);
    r = ir::Binary(b, "stablehlo.multiply", r, alpha);
  }
  if (at.ints[2]) {
    Value c = ir::BroadcastTo(b, ir::Convert(b, in[2], compute), out[0].dims);
    if (at.ints[4]) {
      Value beta = ir::Full(b, ir::Convert(b, in[next++], compute), out[0].dims);
      c = ir::Binary(b, "stablehlo.multiply", c, beta);
    }
    r = ir::Binary(b, "stablehlo.add", c, r);
  }
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kMatmul{"aten::mm", &LowerMatmul};

void CheckMatmul(const char* name, const Tensor& a, const Tensor& b, bool batched) {
  CheckTpu(name, a, "self");
  CheckTpu(name, b, "mat2");
  const int64_t rank = batched ? 3 : 2;
  TORCH_CHECK(a.dim() == rank, (batched ? "batch1" : "self"), " must be a ",
              (batched ? "3D" : "matrix"), " tensor");
  TORCH_CHECK(b.dim() == rank, (batched ? "batch2" : "mat2"), " must be a ",
              (batched ? "3D" : "matrix"), " tensor");
  if (batched) {
    TORCH_CHECK(a.size(0) == b.size(0), "batch1 and batch2 must have same number of batches, got ",
                a.size(0), " and ", b.size(0));
    TORCH_CHECK(a.size(2) == b.size(1), "Expected size for first two dimensions of batch2 "
                "tensor to be: [", a.size(0), ", ", a.size(2), "] but got: [", b.size(0), ", ",
                b.size(1), "].");
  } else {
    TORCH_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (",
                a.size(0), "x", a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  }
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "expected m1 and m2 to have the same dtype, "
              "but got: ", a.scalar_type(), " != ", b.scalar_type());
}

std::vector<int64_t> MatmulSizes(const Tensor& a, const Tensor& b, bool batched) {
  if (batched) return {a.size(0), a.size(1), b.size(2)};
  return {a.size(0), b.size(1)};
}

bool IsOne(const c10::Scalar& s) { return s.toComplexDouble() == c10::complex<double>(1, 0); }
bool IsZero(const c10::Scalar& s) { return s.toComplexDouble() == c10::complex<double>(0, 0); }

struct MatmulCall {
  lazy::Attrs attrs;
  std::vector<lazy::Operand> inputs;
};

MatmulCall Prepare(const Tensor& a, const Tensor& b, const Tensor* c, const c10::Scalar* beta,
                   const c10::Scalar* alpha, bool batched) {
  MatmulCall call;
  // beta == 0 ignores c entirely (NaN in c does not propagate), as on CPU.
  const bool has_c = c != nullptr && !(beta && IsZero(*beta));
  const bool has_alpha = alpha && !IsOne(*alpha);
  const bool has_beta = has_c && beta && !IsOne(*beta);
  call.attrs.ints = {static_cast<int64_t>(CurrentPrecision()), batched ? 1 : 0, has_c ? 1 : 0,
                     has_alpha ? 1 : 0, has_beta ? 1 : 0};
  call.inputs = {OperandOf(a), OperandOf(b)};
  if (has_c) call.inputs.push_back(OperandOf(*c));
  if (has_alpha) call.inputs.push_back(ScalarOperand(*alpha, a.scalar_type()));
  if (has_beta) call.inputs.push_back(ScalarOperand(*beta, a.scalar_type()));
  return call;
}

Tensor mm(const Tensor& a, const Tensor& b) {
  CheckMatmul("mm", a, b, false);
  MatmulCall c = Prepare(a, b, nullptr, nullptr, nullptr, false);
  return Run1(kMatmul, c.attrs, c.inputs, TypeOf(MatmulSizes(a, b, false), a.scalar_type()));
}
Tensor& mm_out(const Tensor& a, const Tensor& b, Tensor& out) {
  CheckMatmul("mm", a, b, false);
  auto sizes = MatmulSizes(a, b, false);
  PrepareOut("mm", out, sizes, a.scalar_type());
  MatmulCall c = Prepare(a, b, nullptr, nullptr, nullptr, false);
  RunInto(kMatmul, c.attrs, c.inputs, {TypeOf(sizes, a.scalar_type())}, {out});
  return out;
}
Tensor bmm(const Tensor& a, const Tensor& b) {
  CheckMatmul("bmm", a, b, true);
  MatmulCall c = Prepare(a, b, nullptr, nullptr, nullptr, true);
  return Run1(kMatmul, c.attrs, c.inputs, TypeOf(MatmulSizes(a, b, true), a.scalar_type()));
}
Tensor& bmm_out(const Tensor& a, const Tensor& b, Tensor& out) {
  CheckMatmul("bmm", a, b, true);
  auto sizes = MatmulSizes(a, b, true);
  PrepareOut("bmm", out, sizes, a.scalar_type());
  MatmulCall c = Prepare(a, b, nullptr, nullptr, nullptr, true);
  RunInto(kMatmul, c.attrs, c.inputs, {TypeOf(sizes, a.scalar_type())}, {out});
  return out;
}

Tensor AddMatmul(const char* name, const Tensor& self, const Tensor& a, const Tensor& b,
                 const c10::Scalar& beta, const c10::Scalar& alpha, bool batched,
                 const Tensor* into) {
  CheckMatmul(name, a, b, batched);
  CheckTpu(name, self, "self");
  auto sizes = MatmulSizes(a, b, batched);
  at::infer_size(self.sizes(), sizes);  // self must broadcast to the product
  MatmulCall c = Prepare(a, b, &self, &beta, &alpha, batched);
  if (into) {
    PrepareOut(name, *into, sizes, a.scalar_type());
    RunInto(kMatmul, c.attrs, c.inputs, {TypeOf(sizes, a.scalar_type())}, {*into});
    return *into;
  }
  return Run1(kMatmul, c.attrs, c.inputs, TypeOf(sizes, a.scalar_type()));
}
Tensor addmm(const Tensor& s, const Tensor& a, const Tensor& b, const c10::Scalar& beta,
             const c10::Scalar& alpha) {
  return AddMatmul("addmm", s, a, b, beta, alpha, false, nullptr);
}
Tensor& addmm_out(const Tensor& s, const Tensor& a, const Tensor& b, const c10::Scalar& beta,
                  const c10::Scalar& alpha, Tensor& out) {
  AddMatmul("addmm", s, a, b, beta, alpha, false, &out);
  return out;
}
Tensor& addmm_(Tensor& s, const Tensor& a, const Tensor& b, const c10::Scalar& beta,
               const c10::Scalar& alpha) {
  AddMatmul("addmm_", s, a, b, beta, alpha, false, &s);
  return s;
}
Tensor baddbmm(const Tensor& s, const Tensor& a, const Tensor& b, const c10::Scalar& beta,
               const c10::Scalar& alpha) {
  return AddMatmul("baddbmm", s, a, b, beta, alpha, true, nullptr);
}
Tensor& baddbmm_out(const Tensor& s, const Tensor& a, const Tensor& b, const c10::Scalar& beta,
                    const c10::Scalar& alpha, Tensor& out) {
  AddMatmul("baddbmm", s, a, b, beta, alpha, true, &out);
  return out;
}
Tensor& baddbmm_(Tensor& s, const Tensor& a, const Tensor& b, const c10::Scalar& beta,
                 const c10::Scalar& alpha) {
  AddMatmul("baddbmm_", s, a, b, beta, alpha, true, &s);
  return s;
}

// Vector products run as matrix products of views.
Tensor dot(const Tensor& a, const Tensor& b) {
  TORCH_CHECK(a.dim() == 1 && b.dim() == 1, "1D tensors expected, but got ", a.dim(), "D and ",
              b.dim(), "D tensors");
  TORCH_CHECK(a.numel() == b.numel(), "inconsistent tensor size, expected tensor [", a.numel(),
              "] and src [", b.numel(), "] to have the same number of elements, but got ",
              a.numel(), " and ", b.numel(), " elements respectively");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "dot : expected both vectors to have same "
              "dtype, but found ", a.scalar_type(), " and ", b.scalar_type());
  return tpu::ops::mm(a.view({1, -1}), b.view({-1, 1})).reshape(at::IntArrayRef{});
}

Tensor& addmv_out(const Tensor& self, const Tensor& mat, const Tensor& vec,
                  const c10::Scalar& beta, const c10::Scalar& alpha, Tensor& out) {
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1, "vector + matrix @ vector expected, got ",
              self.dim(), ", ", mat.dim(), ", ", vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0), "size mismatch, got input (", self.size(0),
              "), mat (", mat.size(0), "x", mat.size(1), "), vec (", vec.size(0), ")");
  Tensor r = AddMatmul("addmv", self.dim() == 1 ? self.view({-1, 1}) : self, mat,
                       vec.view({-1, 1}), beta, alpha, false, nullptr);
  PrepareOut("addmv", out, {mat.size(0)}, r.scalar_type());
  out.copy_(r.view({-1}));
  return out;
}
Tensor addmv(const Tensor& self, const Tensor& mat, const Tensor& vec, const c10::Scalar& beta,
             const c10::Scalar& alpha) {
  Tensor out = EmptyTpu({mat.size(0)}, mat.scalar_type());
  return addmv_out(self, mat, vec, beta, alpha, out);
}
Tensor& addmv_(Tensor& self, const Tensor& mat, const Tensor& vec, const c10::Scalar& beta,
               const c10::Scalar& alpha) {
  return addmv_out(self, mat, vec, beta, alpha, self);
}


// ---- addbmm ----

Tensor Addbmm(const Tensor& self, const Tensor& b1, const Tensor& b2, const c10::Scalar& beta,
              const c10::Scalar& alpha) {
  TORCH_CHECK(b1.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(b1.size(0) == b2.size(0), "batch1 and batch2 must have same number of batches, got ",
              b1.size(0), " and ", b2.size(0));
  TORCH_CHECK(b1.size(2) == b2.size(1), "Incompatible matrix sizes for bmm (", b1.size(1), "x",
              b1.size(2), " and ", b2.size(1), "x", b2.size(2), ")");
  // beta * self + alpha * sum_b b1[b] @ b2[b] as one addmm over (b, k), so
  // that a low-precision result is rounded once, not once per step.
  const int64_t nb = b1.size(0), n = b1.size(1), k = b1.size(2), m = b2.size(2);
  return at::addmm(self.expand({n, m}), b1.permute({1, 0, 2}).reshape({n, nb * k}),
                   b2.reshape({nb * k, m}), beta, alpha);
}
Tensor addbmm_tpu(const Tensor& self, const Tensor& b1, const Tensor& b2, const c10::Scalar& beta,
                  const c10::Scalar& alpha) {
  return Addbmm(self, b1, b2, beta, alpha);
}
Tensor& addbmm_out_tpu(const Tensor& self, const Tensor& b1, const Tensor& b2,
                       const c10::Scalar& beta, const c10::Scalar& alpha, Tensor& out) {
  return CopyInto("addbmm", Addbmm(self, b1, b2, beta, alpha), out);
}
Tensor& addbmm__tpu(Tensor& self, const Tensor& b1, const Tensor& b2, const c10::Scalar& beta,
                    const c10::Scalar& alpha) {
  Tensor r = Addbmm(self, b1, b2, beta, alpha);
  TORCH_CHECK(r.sizes() == self.sizes(), "addbmm_: result shape ", r.sizes(),
              " does not match self ", self.sizes());
  return self.copy_(r);
}

}  // namespace

// addmm followed by relu or gelu (exact, as CPU's), the epilogue CPU and
// CUDA fuse (XLA fuses it here).
Tensor addmm_activation(const Tensor& s, const Tensor& a, const Tensor& b, const c10::Scalar& beta,
                        const c10::Scalar& alpha, bool use_gelu) {
  Tensor r = AddMatmul("_addmm_activation", s, a, b, beta, alpha, false, nullptr);
  return use_gelu ? at::gelu(r) : at::relu(r);
}
Tensor& addmm_activation_out(const Tensor& s, const Tensor& a, const Tensor& b,
                             const c10::Scalar& beta, const c10::Scalar& alpha, bool use_gelu,
                             Tensor& out) {
  return CopyInto("_addmm_activation", addmm_activation(s, a, b, beta, alpha, use_gelu), out);
}

// Weight-only int8 linear: A [M, K] times int8 B [N, K] transposed, each
// output column scaled, accumulated in float32 and returned in A's dtype.
Tensor weight_int8pack_mm(const Tensor& A, const Tensor& B, const Tensor& scales) {
  const char* op = "_weight_int8pack_mm";
  CheckTpu(op, A, "self");
  CheckTpu(op, B, "mat2");
  CheckTpu(op, scales, "scales");
  TORCH_CHECK(A.scalar_type() == at::kBFloat16 || A.scalar_type() == at::kHalf ||
                  A.scalar_type() == at::kFloat,
              op, " : expect A to be either 32-bit or 16-bit float tensor.");
  TORCH_CHECK(A.dim() == 2, op, " : expect A to be 2D tensor.");
  TORCH_CHECK(B.scalar_type() == at::kChar, op, " : expect B to be int8 tensor.");
  TORCH_CHECK(B.dim() == 2 && B.size(1) == A.size(1), op, " : expect B.size(1) == ", A.size(1));
  TORCH_CHECK(scales.dim() == 1 && scales.size(0) == B.size(0), op,
              " : expect scales to be 1d tensor with size ", B.size(0));
  Tensor c = at::mul(at::mm(A.to(at::kFloat), B.to(at::kFloat).t()), scales.to(at::kFloat));
  return c.to(A.scalar_type());
}

// Weight-only int4 linear (the gpt-fast / torchao format): the weight
// arrives as uint8 [N, K/2] (two 4-bit values a byte, the even k in the
// high nibble) and is packed into int32 of the shape PyTorch's CUDA backend
// gives, [N/8, K/(innerKTiles*16), 32, innerKTiles/2], holding eight 4-bit
// values each. The order inside is tpu's own (row n's k values in order,
// the first in the low bits), not CUDA's mma tiles: a packed weight goes to
// _weight_int4pack_mm on the device that packed it, as on CUDA.
Tensor convert_weight_to_int4pack(const Tensor& w, int64_t inner_k_tiles) {
  const char* op = "_convert_weight_to_int4pack";
  CheckTpu(op, w, "self");
  TORCH_CHECK(w.dim() == 2, op, " : expect weight to be 2D tensor.");
  TORCH_CHECK(w.scalar_type() == at::kByte, op, " : expect weight to be kByte.");
  TORCH_CHECK(inner_k_tiles == 2 || inner_k_tiles == 4 || inner_k_tiles == 8, op,
              " : innerKTiles need to be 2, 4, or 8, got ", inner_k_tiles);
  const int64_t N = w.size(0), K = w.size(1) * 2;
  TORCH_CHECK(N % 8 == 0 && K % (inner_k_tiles * 16) == 0, op, ": tpu packs weights whose N is a "
              "multiple of 8 and K a multiple of innerKTiles * 16; got N = ", N, ", K = ", K,
              " (pad the weight)");
  Tensor b = w.to(at::kLong);
  Tensor q = at::stack({at::bitwise_and(at::bitwise_right_shift(b, 4), 15), at::bitwise_and(b, 15)}, -1)
                 .reshape({N, K / 8, 8});
  Tensor packed = at::zeros({N, K / 8}, w.options().dtype(at::kLong));
  for (int64_t i = 0; i < 8; ++i)
    packed = at::bitwise_or(packed, at::bitwise_left_shift(q.select(-1, i), 4 * i));
  // Values of 2^31 and up wrap to the negative int32 with the same bits.
  packed = at::where(at::ge(packed, int64_t{1} << 31), at::sub(packed, int64_t{1} << 32), packed);
  return packed.to(at::kInt).reshape({N / 8, K / (inner_k_tiles * 16), 32, inner_k_tiles / 2});
}

Tensor weight_int4pack_mm(const Tensor& A, const Tensor& B, int64_t q_group,
                          const Tensor& scales_and_zeros) {
  const char* op = "_weight_int4pack_mm";
  CheckTpu(op, A, "self");
  CheckTpu(op, B, "mat2");
  CheckTpu(op, scales_and_zeros, "qScaleAndZeros");
  TORCH_CHECK(A.scalar_type() == at::kBFloat16 || A.scalar_type() == at::kHalf ||
                  A.scalar_type() == at::kFloat,
              op, " : expect A to be either 32-bit or 16-bit float tensor.");
  TORCH_CHECK(A.dim() == 2, op, " : expect A to be 2D tensor.");
  TORCH_CHECK(B.scalar_type() == at::kInt, op, " : expect B to be int32 tensor.");
  TORCH_CHECK(B.dim() == 4, op, " : expect B to 4d tensor.");
  TORCH_CHECK(q_group == 32 || q_group == 64 || q_group == 128 || q_group == 256, op,
              ": qGroupSize need to be 32, 64, 128 or 256, got ", q_group);
  const int64_t K = A.size(1), N = B.size(0) * 8;
  TORCH_CHECK(B.numel() * 8 == N * K, op, ": mat2 packs ", B.numel() * 8 / N,
              " values per output column, but self has K = ", K);
  TORCH_CHECK(K % q_group == 0, op, ": K = ", K, " is not a multiple of qGroupSize ", q_group);
  TORCH_CHECK(scales_and_zeros.dim() == 3 && scales_and_zeros.size(0) == K / q_group &&
                  scales_and_zeros.size(1) == N && scales_and_zeros.size(2) == 2,
              op, ": expect qScaleAndZeros to be 3d tensor with sizes [", K / q_group, ", ", N,
              ", 2]");
  Tensor packed = B.reshape({N, K / 8}).to(at::kLong);
  std::vector<Tensor> parts;
  for (int64_t i = 0; i < 8; ++i)
    parts.push_back(at::bitwise_and(at::bitwise_right_shift(packed, 4 * i), 15));
  Tensor q = at::stack(parts, -1).reshape({N, K}).t().to(at::kFloat);  // [K, N]
  Tensor sz = scales_and_zeros.to(at::kFloat).repeat_interleave(q_group, 0);  // [K, N, 2]
  // As CUDA's kernel: (q - 8) * scale + zero, accumulated in float32.
  Tensor W = at::add(at::mul(at::sub(q, 8), sz.select(-1, 0)), sz.select(-1, 1));
  return at::mm(A.to(at::kFloat), W).to(A.scalar_type());
}

// addr: ATen's composite (beta * self + alpha * outer), after CPU's checks
// of the scalars against the result dtype.
void CheckAddrScalars(const Tensor& self, const Tensor& v1, const Tensor& v2,
                      const c10::Scalar& beta, const c10::Scalar& alpha) {
  const at::ScalarType dt = at::promote_types(at::result_type(self, v1), v2.scalar_type());
  for (const auto& [s, name] : {std::pair<const c10::Scalar&, const char*>{beta, "beta"},
                                {alpha, "alpha"}}) {
    TORCH_CHECK(!s.isBoolean() || dt == at::kBool, "Boolean ", name,
                " only supported for Boolean results.");
    TORCH_CHECK(at::isFloatingType(dt) || at::isComplexType(dt) || s.isIntegral(true),
                "For integral input tensors, argument ", name,
                " must not be a floating point number.");
  }
}
Tensor addr_tpu(const Tensor& self, const Tensor& v1, const Tensor& v2, const c10::Scalar& beta,
                const c10::Scalar& alpha) {
  CheckAddrScalars(self, v1, v2, beta, alpha);
  return at::native::math_addr(self, v1, v2, beta, alpha);
}
Tensor& addr_out_tpu(const Tensor& self, const Tensor& v1, const Tensor& v2,
                     const c10::Scalar& beta, const c10::Scalar& alpha, Tensor& out) {
  CheckAddrScalars(self, v1, v2, beta, alpha);
  return at::native::math_addr_out(self, v1, v2, beta, alpha, out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("addr", TORCH_FN(addr_tpu));
  m.impl("addr.out", TORCH_FN(addr_out_tpu));
  m.impl("_addmm_activation", TORCH_FN(addmm_activation));
  m.impl("_addmm_activation.out", TORCH_FN(addmm_activation_out));
  m.impl("_weight_int8pack_mm", TORCH_FN(weight_int8pack_mm));
  m.impl("_convert_weight_to_int4pack", TORCH_FN(convert_weight_to_int4pack));
  m.impl("_weight_int4pack_mm", TORCH_FN(weight_int4pack_mm));
  m.impl("dot", TORCH_FN(dot));
  m.impl("addmv", TORCH_FN(addmv));
  m.impl("addmv_", TORCH_FN(addmv_));
  m.impl("addmv.out", TORCH_FN(addmv_out));
  m.impl("mm", TORCH_FN(mm));
  m.impl("mm.out", TORCH_FN(mm_out));
  m.impl("bmm", TORCH_FN(bmm));
  m.impl("bmm.out", TORCH_FN(bmm_out));
  m.impl("addmm", TORCH_FN(addmm));
  m.impl("addmm.out", TORCH_FN(addmm_out));
  m.impl("addmm_", TORCH_FN(addmm_));
  m.impl("baddbmm", TORCH_FN(baddbmm));
  m.impl("baddbmm.out", TORCH_FN(baddbmm_out));
  m.impl("baddbmm_", TORCH_FN(baddbmm_));
  m.impl("addbmm", TORCH_FN(addbmm_tpu));
  m.impl("addbmm.out", TORCH_FN(addbmm_out_tpu));
  m.impl("addbmm_", TORCH_FN(addbmm__tpu));
}

}  // namespace tpu::ops
