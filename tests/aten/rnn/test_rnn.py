"""Recurrent layers (RNN, LSTM, GRU and their cells) and fractional max
pooling on tpu against CPU, forward and backward."""

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pack_sequence, pad_packed_sequence
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")
TOL = dict(rtol=1e-4, atol=1e-5)


def _pair(layer):
    """The same module on CPU and on tpu (same initial weights)."""
    return layer, _copy_to_tpu(layer)


def _copy_to_tpu(layer):
    import copy
    return copy.deepcopy(layer).to(TPU)


def _check_grads(cpu, tpu, inputs_cpu, inputs_tpu, tol=TOL):
    for (name, p), q in zip(cpu.named_parameters(), tpu.parameters()):
        assert_close(q.grad.cpu(), p.grad, **tol, msg=name)
    for a, b in zip(inputs_cpu, inputs_tpu):
        assert_close(b.grad.cpu(), a.grad, **tol)


def _run(cpu, tpu, x, h0=None):
    xc = x.clone().requires_grad_()
    xt = x.to(TPU).requires_grad_()
    args_c, args_t = [xc], [xt]
    if h0 is not None:
        if isinstance(h0, tuple):
            hc = tuple(h.clone().requires_grad_() for h in h0)
            ht = tuple(h.to(TPU).requires_grad_() for h in h0)
        else:
            hc, ht = h0.clone().requires_grad_(), h0.to(TPU).requires_grad_()
        args_c.append(hc)
        args_t.append(ht)
    out_c, hid_c = cpu(*args_c)
    out_t, hid_t = tpu(*args_t)
    assert_close(out_t.cpu(), out_c, **TOL)
    hid_c = hid_c if isinstance(hid_c, tuple) else (hid_c,)
    hid_t = hid_t if isinstance(hid_t, tuple) else (hid_t,)
    for a, b in zip(hid_c, hid_t):
        assert_close(b.cpu(), a, **TOL)
    g = torch.randn_like(out_c)
    gh = [torch.randn_like(h) for h in hid_c]
    torch.autograd.backward([out_c, *hid_c], [g, *gh])
    torch.autograd.backward([out_t, *hid_t], [g.to(TPU), *[h.to(TPU) for h in gh]])
    leaves_c = [xc] + (list(hc) if isinstance(h0, tuple) else [hc] if h0 is not None else [])
    leaves_t = [xt] + (list(ht) if isinstance(h0, tuple) else [ht] if h0 is not None else [])
    _check_grads(cpu, tpu, leaves_c, leaves_t)


@pytest.mark.parametrize("kind", ["RNN_TANH", "RNN_RELU", "LSTM", "GRU"])
@pytest.mark.parametrize("layers,bidirectional,batch_first,bias", [
    (1, False, False, True), (2, True, True, True), (2, False, False, False),
])
def test_recurrent_layer_against_cpu(kind, layers, bidirectional, batch_first, bias,
                                     highest_matmul_precision):
    kw = dict(num_layers=layers, bidirectional=bidirectional, batch_first=batch_first, bias=bias)
    if kind.startswith("RNN"):
        layer = nn.RNN(5, 7, nonlinearity=kind[4:].lower(), **kw)
    else:
        layer = getattr(nn, kind)(5, 7, **kw)
    cpu, tpu = _pair(layer)
    x = torch.randn(3, 6, 5) if batch_first else torch.randn(6, 3, 5)
    dirs = 2 if bidirectional else 1
    h = torch.randn(layers * dirs, 3, 7)
    h0 = (h, torch.randn_like(h)) if kind == "LSTM" else h
    _run(cpu, tpu, x, h0)


def test_lstm_with_projections(highest_matmul_precision):
    cpu, tpu = _pair(nn.LSTM(4, 8, num_layers=2, proj_size=3, bidirectional=True))
    _run(cpu, tpu, torch.randn(5, 2, 4))


def test_dropout_between_layers_is_applied_in_training():
    torch.manual_seed(0)
    layer = nn.GRU(4, 16, num_layers=2, dropout=0.5).to(TPU)
    x = torch.randn(5, 3, 4, device=TPU)
    a, _ = layer(x)
    b, _ = layer(x)
    assert not torch.equal(a.cpu(), b.cpu())  # a new mask each call
    layer.eval()
    c, _ = layer(x)
    d, _ = layer(x)
    assert torch.equal(c.cpu(), d.cpu())


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_sequences(kind, enforce_sorted, highest_matmul_precision):
    cpu, tpu = _pair(getattr(nn, kind)(3, 6, bidirectional=True))
    lengths = [5, 3, 2] if enforce_sorted else [2, 5, 3]
    x = torch.randn(5, 3, 3)
    xc, xt = x.clone().requires_grad_(), x.to(TPU).requires_grad_()
    pc = pack_padded_sequence(xc, lengths, enforce_sorted=enforce_sorted)
    pt = pack_padded_sequence(xt, lengths, enforce_sorted=enforce_sorted)
    oc, _ = pad_packed_sequence(cpu(pc)[0])
    ot, _ = pad_packed_sequence(tpu(pt)[0])
    assert_close(ot.cpu(), oc, **TOL)
    g = torch.randn_like(oc)
    oc.backward(g)
    ot.backward(g.to(TPU))
    _check_grads(cpu, tpu, [xc], [xt])


def test_pack_sequence_of_tpu_tensors(highest_matmul_precision):
    cpu, tpu = _pair(nn.LSTM(2, 4))
    seqs = [torch.randn(n, 2) for n in (4, 2, 3)]
    out_c = cpu(pack_sequence(seqs, enforce_sorted=False))[0]
    out_t = tpu(pack_sequence([s.to(TPU) for s in seqs], enforce_sorted=False))[0]
    assert_close(out_t.data.cpu(), out_c.data, **TOL)


@pytest.mark.parametrize("cell", ["LSTMCell", "GRUCell", "RNNCell"])
@pytest.mark.parametrize("bias", [True, False])
def test_cells(cell, bias, highest_matmul_precision):
    layer = getattr(nn, cell)(4, 6, bias=bias)
    tpu = _copy_to_tpu(layer)
    x = torch.randn(3, 4)
    h = torch.randn(3, 6)
    if cell == "LSTMCell":
        compare_grad(lambda x, h, c, m=None: (layer if x.device.type == "cpu" else tpu)(x, (h, c)),
                     x, h, torch.randn(3, 6), **TOL)
    else:
        compare_grad(lambda x, h: (layer if x.device.type == "cpu" else tpu)(x, h), x, h, **TOL)
    for (name, p), q in zip(layer.named_parameters(), tpu.parameters()):
        assert_close(q.grad.cpu(), p.grad, **TOL, msg=name)


def test_fused_cell_ops_with_and_without_state_gradients():
    # The fused kernels PyTorch's layers call on an accelerator, directly.
    ig, hg, cx = torch.randn(3, 16), torch.randn(3, 16), torch.randn(3, 4)
    bi, bh = torch.randn(16), torch.randn(16)
    fn = lambda ig, hg, cx, bi, bh: torch.ops.aten._thnn_fused_lstm_cell(ig, hg, cx, bi, bh)[:2]
    # CPU has no fused cell: the reference is PyTorch's own composite.
    def ref(ig, hg, cx, bi, bh):
        gates = ig + hg + bi + bh
        i, f, g, o = gates.chunk(4, 1)
        cy = f.sigmoid() * cx + i.sigmoid() * g.tanh()
        return o.sigmoid() * cy.tanh(), cy
    args = [t.requires_grad_() for t in (ig, hg, cx, bi, bh)]
    targs = [t.detach().to(TPU).requires_grad_() for t in args]
    hy, cy = ref(*args)
    thy, tcy = fn(*targs)
    assert_close(thy.cpu(), hy, **TOL)
    assert_close(tcy.cpu(), cy, **TOL)
    # Only cy's gradient (hy unused), as the last step of a sequence has.
    g = torch.randn_like(cy)
    cy.backward(g)
    tcy.backward(g.to(TPU))
    for a, b in zip(args, targs):
        assert_close(b.grad.cpu(), a.grad, **TOL)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_lstm_in_half_types(dtype):
    layer = nn.LSTM(4, 8)
    tpu = _copy_to_tpu(layer).to(dtype)
    x = torch.randn(5, 2, 4)
    want, _ = layer(x)
    got, _ = tpu(x.to(TPU, dtype))
    assert got.dtype == dtype
    assert_close(got.float().cpu(), want, rtol=5e-2, atol=5e-2)


def test_lstm_trains_in_fused_and_strict(highest_matmul_precision):
    import torch_tpu
    torch.manual_seed(0)
    ref = nn.LSTM(3, 5)
    x, y = torch.randn(4, 2, 3), torch.randn(4, 2, 5)
    losses = {}
    for mode in (torch_tpu.EagerMode.DEFER_NEVER, torch_tpu.EagerMode.DEFER_AND_FUSE, None):
        model = _copy_to_tpu(ref) if mode is not None else __import__("copy").deepcopy(ref)
        dev = TPU if mode is not None else torch.device("cpu")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        out = []
        ctx = torch_tpu.eager_mode(mode) if mode is not None else __import__("contextlib").nullcontext()
        with ctx:
            for _ in range(3):
                loss = (model(x.to(dev))[0] - y.to(dev)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                out.append(loss.item())
        losses[mode] = out
    cpu = losses.pop(None)
    for mode, got in losses.items():
        assert_close(torch.tensor(got), torch.tensor(cpu), **TOL, msg=str(mode))


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_recurrent_layer_under_compile_is_one_program(kind, highest_matmul_precision):
    # Dynamo leaves recurrent layers to eager unless allow_rnn is set (its
    # experimental support); with it, a whole sequence is one program.
    import torch._dynamo
    layer = getattr(nn, kind)(3, 4, num_layers=2)
    tpu = _copy_to_tpu(layer)
    x = torch.randn(6, 2, 3)
    torch._dynamo.reset()
    with torch._dynamo.config.patch(allow_rnn=True):
        compiled = torch.compile(tpu, backend="tpu")
        xt = x.to(TPU).requires_grad_()
        out = compiled(xt)[0]
        xc = x.clone().requires_grad_()
        want = layer(xc)[0]
        assert_close(out.cpu(), want, **TOL)
        out.sum().backward()
        want.sum().backward()
        assert_close(xt.grad.cpu(), xc.grad, **TOL)
        torch.tpu.synchronize()
        before = torch.tpu._get_cache_stats()["launches"]
        with torch.no_grad():
            compiled(x.to(TPU))
        torch.tpu.synchronize()
    # Six time steps of two layers: one launch, not one per step.
    assert torch.tpu._get_cache_stats()["launches"] - before == 1


@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fractional_max_pool_matches_cpu_exactly(nd, dtype):
    if nd == 2:
        x = torch.randn(2, 3, 11, 13, dtype=dtype)
        k, o = (2, 3), (5, 6)
        fn = torch.ops.aten.fractional_max_pool2d
    else:
        x = torch.randn(2, 2, 7, 8, 9, dtype=dtype)
        k, o = (2, 3, 2), (3, 4, 5)
        fn = torch.ops.aten.fractional_max_pool3d
    s = torch.rand(2, x.shape[1], nd, dtype=dtype)
    xc, xt = x.clone().requires_grad_(), x.to(TPU).requires_grad_()
    vc, ic = fn(xc, k, o, s)
    vt, it = fn(xt, k, o, s.to(TPU))
    assert torch.equal(it.cpu(), ic) and torch.equal(vt.detach().cpu(), vc.detach())
    out, idx = torch.empty(0, dtype=dtype, device=TPU), torch.empty(0, dtype=torch.long, device=TPU)
    fn.output(x.to(TPU), k, o, s.to(TPU), output=out, indices=idx)  # the out= variant
    assert torch.equal(idx.cpu(), ic) and torch.equal(out.cpu(), vc.detach())
    g = torch.randn_like(vc)
    vc.backward(g)
    vt.backward(g.to(TPU))
    assert_close(xt.grad.cpu(), xc.grad)


@pytest.mark.parametrize("module", ["FractionalMaxPool2d", "FractionalMaxPool3d"])
def test_fractional_max_pool_modules(module):
    # The modules draw their samples on the input's device: compare with the
    # same samples through the functional form.
    layer = getattr(nn, module)(2, output_ratio=0.5, return_indices=True)
    shape = (3, 10, 12) if module.endswith("2d") else (2, 6, 8, 10)  # unbatched
    x = torch.randn(*shape, device=TPU)
    values, indices = layer(x)
    flat = x.reshape(x.shape[0], -1)
    taken = flat.gather(1, indices.reshape(x.shape[0], -1))
    assert torch.equal(taken.cpu(), values.reshape(x.shape[0], -1).cpu())
    # Every value is the max of some 2-wide window: no value exceeds the input max.
    assert values.max().item() <= x.max().item()
