// The fused LSTM and GRU cells that PyTorch's recurrent layers call on an
// accelerator (RNN.cpp takes this path for CUDA, XPU and PrivateUse1): the
// gate nonlinearities of one time step after the two matrix products, and
// their backward. Each is one program.
//
// The workspace is the forward's saved state for the backward; its layout
// is ours (only our backward reads it):
//   LSTM [B, 4H]: the activated gates i, f, g, o;
//   GRU  [B, 5H]: r, z, n, hx, and hn + b_hn (the hidden part of n).
// Half types compute in float32 and store their results in the input dtype.
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <tuple>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"
#include "aten/formula.h"

namespace tpu::ops {

namespace {

Value Sigmoid(Builder& b, Value x) { return ir::Unary(b, "stablehlo.logistic", x); }
Value Tanh(Builder& b, Value x) { return ir::Unary(b, "stablehlo.tanh", x); }
Value OneMinus(Builder& b, Value x) { return Sub(b, C(b, 1, x), x); }

// Columns [k*h, (k+1)*h) of a [B, n*h] value.
Value Chunk(Builder& b, Value x, int64_t k, int64_t h) {
  const auto& d = b.type(x).dims;
  return ir::Slice(b, x, {0, k * h}, {d[0], (k + 1) * h}, {1, 1});
}

// The gates of a fused cell: input_gates + hidden_gates (+ both biases), in
// the compute dtype. ins = (ig, hg, state, [b_ih, b_hh]); ints = (has_bias, ct).
struct Gates {
  Value ig, hg;
};
Gates LoadGates(Builder& b, const VS& in, const lazy::Attrs& a) {
  const auto ct = static_cast<DType>(a.ints[1]);
  Value ig = ir::Convert(b, in[0], ct), hg = ir::Convert(b, in[1], ct);
  if (a.ints[0]) {
    const auto& dims = b.type(ig).dims;
    ig = Add(b, ig, ir::BroadcastTo(b, ir::Convert(b, in[3], ct), dims));
    hg = Add(b, hg, ir::BroadcastTo(b, ir::Convert(b, in[4], ct), dims));
  }
  return {ig, hg};
}

// -> (hy, cy, workspace)
VS LowerLstmCell(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto ct = static_cast<DType>(a.ints[1]);
  Gates g = LoadGates(b, in, a);
  Value gates = Add(b, g.ig, g.hg);
  const int64_t h = out[0].dims[1];
  Value i = Sigmoid(b, Chunk(b, gates, 0, h)), f = Sigmoid(b, Chunk(b, gates, 1, h));
  Value c = Tanh(b, Chunk(b, gates, 2, h)), o = Sigmoid(b, Chunk(b, gates, 3, h));
  Value cy = Add(b, Mul(b, f, ir::Convert(b, in[2], ct)), Mul(b, i, c));
  Value hy = Mul(b, o, Tanh(b, cy));
  Value ws = ir::Concatenate(b, {i, f, c, o}, 1);
  return {ir::Convert(b, hy, out[0].dtype), ir::Convert(b, cy, out[1].dtype),
          ir::Convert(b, ws, out[2].dtype)};
}
constexpr lazy::Lowering kLstmCell{"aten::_thnn_fused_lstm_cell", &LowerLstmCell};

// ins = (cx, cy, workspace, [grad_hy], [grad_cy]); ints = (has_grad_hy,
// has_grad_cy, has_bias, ct) -> (grad_gates, grad_cx, [grad_bias])
VS LowerLstmCellBackward(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto ct = static_cast<DType>(a.ints[3]);
  Value cx = ir::Convert(b, in[0], ct), cy = ir::Convert(b, in[1], ct);
  Value ws = ir::Convert(b, in[2], ct);
  const int64_t h = b.type(cx).dims[1];
  Value i = Chunk(b, ws, 0, h), f = Chunk(b, ws, 1, h), c = Chunk(b, ws, 2, h);
  Value o = Chunk(b, ws, 3, h);
  size_t next = 3;
  Value ghy = a.ints[0] ? ir::Convert(b, in[next++], ct) : C(b, 0, cx);
  Value gcy = a.ints[1] ? ir::Convert(b, in[next++], ct) : C(b, 0, cx);
  Value tcy = Tanh(b, cy);
  // d loss / d cy: through hy = o * tanh(cy), plus what came in for cy.
  Value dc = Add(b, Mul(b, Mul(b, ghy, o), OneMinus(b, Mul(b, tcy, tcy))), gcy);
  Value di = Mul(b, Mul(b, dc, c), Mul(b, i, OneMinus(b, i)));
  Value df = Mul(b, Mul(b, dc, cx), Mul(b, f, OneMinus(b, f)));
  Value dg = Mul(b, Mul(b, dc, i), OneMinus(b, Mul(b, c, c)));
  Value dout = Mul(b, Mul(b, ghy, tcy), Mul(b, o, OneMinus(b, o)));
  Value grad_gates = ir::Concatenate(b, {di, df, dg, dout}, 1);
  VS r{ir::Convert(b, grad_gates, out[0].dtype), ir::Convert(b, Mul(b, dc, f), out[1].dtype)};
  if (a.ints[2]) {
    Value sum = ir::Reduce(b, grad_gates, ir::ConstantF(b, 0, ct), {0}, "stablehlo.add");
    r.push_back(ir::Convert(b, sum, out[2].dtype));
  }
  return r;
}
constexpr lazy::Lowering kLstmCellBackward{"aten::_thnn_fused_lstm_cell_backward_impl",
                                           &LowerLstmCellBackward};

// -> (hy, workspace)
VS LowerGruCell(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto ct = static_cast<DType>(a.ints[1]);
  Gates g = LoadGates(b, in, a);
  const int64_t h = out[0].dims[1];
  Value hx = ir::Convert(b, in[2], ct);
  Value r = Sigmoid(b, Add(b, Chunk(b, g.ig, 0, h), Chunk(b, g.hg, 0, h)));
  Value z = Sigmoid(b, Add(b, Chunk(b, g.ig, 1, h), Chunk(b, g.hg, 1, h)));
  Value hn = Chunk(b, g.hg, 2, h);
  Value n = Tanh(b, Add(b, Chunk(b, g.ig, 2, h), Mul(b, r, hn)));
  Value hy = Add(b, n, Mul(b, z, Sub(b, hx, n)));
  Value ws = ir::Concatenate(b, {r, z, n, hx, hn}, 1);
  return {ir::Convert(b, hy, out[0].dtype), ir::Convert(b, ws, out[1].dtype)};
}
constexpr lazy::Lowering kGruCell{"aten::_thnn_fused_gru_cell", &LowerGruCell};

// ins = (grad_hy, workspace); ints = (has_bias, ct) -> (grad_input_gates,
// grad_hidden_gates, grad_hx, [grad_input_bias, grad_hidden_bias])
VS LowerGruCellBackward(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto ct = static_cast<DType>(a.ints[1]);
  Value ghy = ir::Convert(b, in[0], ct), ws = ir::Convert(b, in[1], ct);
  const int64_t h = b.type(ghy).dims[1];
  Value r = Chunk(b, ws, 0, h), z = Chunk(b, ws, 1, h), n = Chunk(b, ws, 2, h);
  Value hx = Chunk(b, ws, 3, h), hn = Chunk(b, ws, 4, h);
  Value dz = Mul(b, Mul(b, ghy, Sub(b, hx, n)), Mul(b, z, OneMinus(b, z)));
  Value dhx = Mul(b, ghy, z);
  Value dn = Mul(b, Mul(b, ghy, OneMinus(b, z)), OneMinus(b, Mul(b, n, n)));
  Value dhn = Mul(b, dn, r);
  Value dr = Mul(b, Mul(b, dn, hn), Mul(b, r, OneMinus(b, r)));
  Value gi = ir::Concatenate(b, {dr, dz, dn}, 1), gh = ir::Concatenate(b, {dr, dz, dhn}, 1);
  VS res{ir::Convert(b, gi, out[0].dtype), ir::Convert(b, gh, out[1].dtype),
         ir::Convert(b, dhx, out[2].dtype)};
  if (a.ints[0]) {
    for (Value v : {gi, gh}) {
      Value sum = ir::Reduce(b, v, ir::ConstantF(b, 0, ct), {0}, "stablehlo.add");
      res.push_back(ir::Convert(b, sum, out[3].dtype));
    }
  }
  return res;
}
constexpr lazy::Lowering kGruCellBackward{"aten::_thnn_fused_gru_cell_backward",
                                          &LowerGruCellBackward};

// PyTorch's checks (RNN.cpp checkSizes): 2-D gates of `gates` * H columns,
// a state of H columns, 1-D biases of the gates' width.
int64_t CheckCell(const char* op, const Tensor& ig, const Tensor& hg, const Tensor& state,
                  const Tensor& bi, const Tensor& bh, int64_t gates) {
  for (const Tensor* t : {&ig, &hg, &state}) CheckTpu(op, *t, "input");
  TORCH_CHECK(ig.dim() == 2, op, ": expected input_gates to be 2-D, got ", ig.dim(), "-D");
  TORCH_CHECK(hg.sizes() == ig.sizes(), op, ": input_gates ", ig.sizes(),
              " and hidden_gates ", hg.sizes(), " must have the same size");
  TORCH_CHECK(state.dim() == 2 && state.size(0) == ig.size(0) &&
                  state.size(1) * gates == ig.size(1),
              op, ": expected the hidden state to be of size [", ig.size(0), ", ",
              ig.size(1) / gates, "], got ", state.sizes());
  TORCH_CHECK(bi.defined() == bh.defined(), op,
              ": input_bias and hidden_bias must both be given or both be None");
  if (bi.defined()) {
    for (const Tensor* t : {&bi, &bh}) {
      CheckTpu(op, *t, "bias");
      TORCH_CHECK(t->dim() == 1 && t->size(0) == ig.size(1), op, ": expected a bias of size [",
                  ig.size(1), "], got ", t->sizes());
    }
  }
  return state.size(1);
}

std::vector<lazy::Operand> CellOperands(const Tensor& ig, const Tensor& hg, const Tensor& state,
                                        const Tensor& bi, const Tensor& bh) {
  std::vector<lazy::Operand> in = Operands(OperandOf(ig), OperandOf(hg), OperandOf(state));
  if (bi.defined()) {
    in.push_back(OperandOf(bi));
    in.push_back(OperandOf(bh));
  }
  return in;
}

std::tuple<Tensor, Tensor, Tensor> lstm_cell(const Tensor& ig, const Tensor& hg, const Tensor& cx,
                                             const std::optional<Tensor>& bi_opt,
                                             const std::optional<Tensor>& bh_opt) {
  const Tensor bi = bi_opt.value_or(Tensor()), bh = bh_opt.value_or(Tensor());
  const int64_t h = CheckCell("_thnn_fused_lstm_cell", ig, hg, cx, bi, bh, 4);
  const auto dt = ig.scalar_type();
  auto r = Run(kLstmCell, {{bi.defined(), IrCode(OpMathType(dt))}, {}, {}},
               CellOperands(ig, hg, cx, bi, bh),
               {TypeOf({ig.size(0), h}, dt), TypeOf({ig.size(0), h}, dt), TypeOf(ig.sizes(), dt)});
  return {r[0], r[1], r[2]};
}

std::tuple<Tensor, Tensor, Tensor> lstm_cell_backward(const std::optional<Tensor>& ghy_opt,
                                                      const std::optional<Tensor>& gcy_opt,
                                                      const Tensor& cx, const Tensor& cy,
                                                      const Tensor& ws, bool has_bias) {
  const Tensor ghy = ghy_opt.value_or(Tensor()), gcy = gcy_opt.value_or(Tensor());
  const auto dt = ws.scalar_type();
  if (!ghy.defined() && !gcy.defined()) {
    Tensor gb = has_bias ? at::zeros({ws.size(1)}, ws.options()) : Tensor();
    return {at::zeros_like(ws), at::zeros_like(cx), gb};
  }
  std::vector<lazy::Operand> in = Operands(OperandOf(cx), OperandOf(cy), OperandOf(ws));
  if (ghy.defined()) in.push_back(OperandOf(ghy));
  if (gcy.defined()) in.push_back(OperandOf(gcy));
  TT types{TypeOf(ws.sizes(), dt), TypeOf(cx.sizes(), dt)};
  if (has_bias) types.push_back(TypeOf({ws.size(1)}, dt));
  auto r = Run(kLstmCellBackward,
               {{ghy.defined(), gcy.defined(), has_bias, IrCode(OpMathType(dt))}, {}, {}},
               std::move(in), types);
  return {r[0], r[1], has_bias ? r[2] : Tensor()};
}

std::tuple<Tensor, Tensor> gru_cell(const Tensor& ig, const Tensor& hg, const Tensor& hx,
                                    const std::optional<Tensor>& bi_opt,
                                    const std::optional<Tensor>& bh_opt) {
  const Tensor bi = bi_opt.value_or(Tensor()), bh = bh_opt.value_or(Tensor());
  const int64_t h = CheckCell("_thnn_fused_gru_cell", ig, hg, hx, bi, bh, 3);
  const auto dt = ig.scalar_type();
  auto r = Run(kGruCell, {{bi.defined(), IrCode(OpMathType(dt))}, {}, {}},
               CellOperands(ig, hg, hx, bi, bh),
               {TypeOf({ig.size(0), h}, dt), TypeOf({ig.size(0), 5 * h}, dt)});
  return {r[0], r[1]};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> gru_cell_backward(const Tensor& ghy,
                                                                      const Tensor& ws,
                                                                      bool has_bias) {
  const auto dt = ws.scalar_type();
  const int64_t n = ghy.size(0), h = ghy.size(1);
  TT types{TypeOf({n, 3 * h}, dt), TypeOf({n, 3 * h}, dt), TypeOf({n, h}, dt)};
  if (has_bias) {
    types.push_back(TypeOf({3 * h}, dt));
    types.push_back(TypeOf({3 * h}, dt));
  }
  auto r = Run(kGruCellBackward, {{has_bias, IrCode(OpMathType(dt))}, {}, {}},
               Operands(OperandOf(ghy), OperandOf(ws)), types);
  if (!has_bias) return {r[0], r[1], r[2], Tensor(), Tensor()};
  return {r[0], r[1], r[2], r[3], r[4]};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(gru_cell_backward));
}

}  // namespace tpu::ops
