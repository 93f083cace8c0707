"""torch.compile(backend="tpu"): results equal eager / CPU, forward and
backward, optimizer steps, input mutation, RNG, graph breaks, recompiles,
precision, and the capture-and-replay machinery itself."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch_tpu
import torch_tpu.metrics as tm
from torch_tpu import EagerMode, Precision


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def graphs_compiled():
    return sum(1 for name, _ in torch.tpu._get_cache_stats()["entries"] if name.startswith("graph("))


def close(a, b, rtol=1e-5, atol=1e-5):
    torch.testing.assert_close(a.cpu() if isinstance(a, torch.Tensor) else a, b, rtol=rtol, atol=atol)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(24, 48)
        self.l2 = nn.Linear(48, 8)

    def forward(self, x):
        return self.l2(F.gelu(self.l1(x))).softmax(-1)


def test_backend_is_registered():
    assert "tpu" in torch._dynamo.list_backends()


@pytest.mark.parametrize("ctx", ["grad", "no_grad", "inference_mode"])
def test_inference_matches_cpu(ctx, highest_matmul_precision):
    m = MLP()
    mt = copy.deepcopy(m).to("tpu")
    cm = torch.compile(mt, backend="tpu")
    manager = {"grad": torch.enable_grad, "no_grad": torch.no_grad,
               "inference_mode": torch.inference_mode}[ctx]
    for _ in range(3):  # capture, then replays with fresh inputs
        x = torch.randn(5, 24)
        with manager():
            y = cm(x.to("tpu"))
        close(y, m(x).detach())


def test_replay_launches_one_program_per_call(highest_matmul_precision):
    f = torch.compile(lambda a, b: (a @ b).relu().sum(0) + b.mean(), backend="tpu")
    a, b = torch.randn(6, 7), torch.randn(7, 7)
    f(a.to("tpu"), b.to("tpu"))
    launches = torch.tpu._get_cache_stats()["launches"]
    for _ in range(4):
        a, b = torch.randn(6, 7), torch.randn(7, 7)
        close(f(a.to("tpu"), b.to("tpu")), (a @ b).relu().sum(0) + b.mean())
    # Each call: two uploads are not launches; one program per call.
    assert torch.tpu._get_cache_stats()["launches"] - launches == 4


def test_training_forward_backward_matches_cpu(highest_matmul_precision):
    m = MLP()
    mt = copy.deepcopy(m).to("tpu")
    cm = torch.compile(mt, backend="tpu")
    for _ in range(2):
        x = torch.randn(7, 24)
        t = torch.randn(7, 8)
        loss = F.mse_loss(m(x), t)
        loss.backward()
        loss_t = F.mse_loss(cm(x.to("tpu")), t.to("tpu"))
        loss_t.backward()
        close(loss_t, loss.detach())
        for p, pt in zip(m.parameters(), mt.parameters()):
            close(pt.grad, p.grad, rtol=1e-4, atol=1e-6)
        m.zero_grad()
        mt.zero_grad()


@pytest.mark.parametrize("opt_cls", [torch.optim.SGD, torch.optim.AdamW])
def test_compiled_training_step_with_optimizer(opt_cls, highest_matmul_precision):
    torch.manual_seed(0)
    m = MLP()
    mt = copy.deepcopy(m).to("tpu")
    kw = {"lr": 0.05, "momentum": 0.9} if opt_cls is torch.optim.SGD else {"lr": 1e-2}
    opt, opt_t = opt_cls(m.parameters(), **kw), opt_cls(mt.parameters(), **kw)

    def step(model, opt, x, t):
        loss = F.cross_entropy(model(x), t)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    cstep = torch.compile(step, backend="tpu")
    x, t = torch.randn(16, 24), torch.randint(0, 8, (16,))
    xt, tt = x.to("tpu"), t.to("tpu")
    held = []
    for i in range(5):
        ref = step(m, opt, x, t)
        got = cstep(mt, opt_t, xt, tt)
        close(got, ref.detach(), rtol=1e-4, atol=1e-6)
        if i == 1:
            compiled = graphs_compiled()
            torch.tpu.synchronize()
            tm.reset()
        if i >= 1:
            del got
            torch.tpu.synchronize()
            held.append(torch.tpu.memory_allocated())
    for p, pt in zip(m.parameters(), mt.parameters()):
        close(pt, p.detach(), rtol=1e-4, atol=1e-5)
    assert graphs_compiled() == compiled, "later steps must not capture new programs"
    # A replayed optimizer step updates the parameters and the state in
    # their own memory: each old value's buffer is donated to the new one.
    n_state = sum(torch.is_tensor(v) and v.dim() > 0 for st in opt_t.state.values()
                  for v in st.values())
    assert tm.metrics()["buffers_donated"] >= 3 * (len(list(mt.parameters())) + n_state)
    # A replayed step holds no earlier step's parameters or optimizer state.
    assert held == [held[0]] * len(held), held
    # As Dynamo does for CUDA: the step counters live on the device.
    for state in opt_t.state.values():
        if "step" in state:
            assert state["step"].device.type == "tpu"


def test_input_mutation_batchnorm_running_stats(highest_matmul_precision):
    m = nn.Sequential(nn.Linear(6, 10), nn.BatchNorm1d(10))
    mt = copy.deepcopy(m).to("tpu")
    cm = torch.compile(mt, backend="tpu")
    for _ in range(3):
        x = torch.randn(12, 6)
        y, yt = m(x), cm(x.to("tpu"))
        close(yt, y.detach(), rtol=1e-4, atol=1e-5)
    close(mt[1].running_mean, m[1].running_mean)
    close(mt[1].running_var, m[1].running_var, rtol=1e-4, atol=1e-5)
    assert mt[1].num_batches_tracked.item() == 3


def test_in_place_on_input_and_view_outputs():
    def f(a, b):
        a.add_(1)
        b[1:3].mul_(2)
        return a.t(), b[::2], a.sum()

    cf = torch.compile(f, backend="tpu")
    for _ in range(3):
        a, b = torch.randn(3, 4), torch.randn(5)
        at, bt = a.to("tpu"), b.to("tpu")
        got = cf(at, bt)
        ref = f(a, b)
        for g, r in zip(got, ref):
            close(g, r)
        close(at, a)
        close(bt, b)
        got[0].mul_(0)  # a view of the input, as in eager
        assert at.abs().sum().item() == 0


def test_outputs_sharing_storage():
    def f(x):
        y = x * 2
        return y, y.view(-1), y[1]

    cf = torch.compile(f, backend="tpu")
    for _ in range(2):
        x = torch.randn(3, 4)
        y, flat, row = cf(x.to("tpu"))
        close(y, x * 2)
        flat.zero_()
        assert y.abs().sum().item() == 0 and row.abs().sum().item() == 0


def test_dropout_draws_fresh_numbers_and_is_seeded():
    f = torch.compile(lambda x: F.dropout(x, 0.5, training=True), backend="tpu")
    x = torch.ones(2000, device="tpu")
    torch.manual_seed(1)
    a = f(x).cpu()
    b = f(x).cpu()
    c = f(x).cpu()
    assert not torch.equal(a, b) and not torch.equal(b, c)
    assert set(a.unique().tolist()) <= {0.0, 2.0}
    assert abs((a == 0).float().mean().item() - 0.5) < 0.05
    torch.manual_seed(1)
    assert torch.equal(f(x).cpu(), a)


def test_graph_break_falls_back_to_eager():
    def f(x):
        y = x.sin() * 2
        print("graph break", end="")  # Dynamo splits the graph here
        return y.cos() + 1

    cf = torch.compile(f, backend="tpu")
    for _ in range(2):
        x = torch.randn(9)
        close(cf(x.to("tpu")), x.sin().mul(2).cos() + 1)


def test_data_dependent_graph_runs_uncaptured():
    # A graph that needs a value on the host part-way cannot become one
    # program; it runs op by op, still correct.
    from torch_tpu._dynamo import _CompiledGraph

    def f(x):
        n = int(x.sum().item() > 0)
        return x * (n + 1)

    g = _CompiledGraph(f, "forward")  # any callable stands in for the FX graph
    for _ in range(3):
        x = torch.randn(6)
        close(g([x.to("tpu")]), f(x))
    assert g.eager_only and not g.variants


def test_shape_change_recompiles_and_matches(highest_matmul_precision):
    m = MLP()
    cm = torch.compile(copy.deepcopy(m).to("tpu"), backend="tpu", dynamic=False)
    for n in (3, 5, 3, 8):
        x = torch.randn(n, 24)
        close(cm(x.to("tpu")), m(x).detach())


def test_dynamic_shapes_graph_captures_per_size(highest_matmul_precision):
    m = MLP()
    cm = torch.compile(copy.deepcopy(m).to("tpu"), backend="tpu", dynamic=True)
    for n in (3, 5, 7):
        x = torch.randn(n, 24)
        close(cm(x.to("tpu")), m(x).detach())


def test_precision_is_honoured():
    a, b = torch.randn(64, 256), torch.randn(256, 64)
    f = torch.compile(lambda a, b: a @ b, backend="tpu")
    at, bt = a.to("tpu"), b.to("tpu")
    ref = (a.double() @ b.double()).float()
    with torch_tpu.precision(Precision.DEFAULT):
        d = f(at, bt).cpu()
        eager_d = (at @ bt).cpu()
    with torch_tpu.precision(Precision.HIGHEST):
        h = f(at, bt).cpu()
    torch.testing.assert_close(d, eager_d, rtol=0, atol=0)
    err_d = ((d - ref).abs().max() / ref.abs().max()).item()
    err_h = ((h - ref).abs().max() / ref.abs().max()).item()
    assert err_h < 1e-5 < err_d


@pytest.mark.parametrize("mode", list(EagerMode))
def test_eager_modes_around_compiled_graphs(mode, highest_matmul_precision):
    m = MLP()
    cm = torch.compile(copy.deepcopy(m).to("tpu"), backend="tpu")
    with torch_tpu.eager_mode(mode):
        for _ in range(2):
            x = torch.randn(4, 24)
            xt = x.to("tpu") * 1.0 + 0.0  # pending work in Fused mode
            close(cm(xt) * 2, m(x).detach() * 2)


def test_cpu_model_is_unaffected():
    # torch.compile of CPU code with the default backend still works with
    # torch_tpu loaded; backend="tpu" on CPU tensors runs them on CPU.
    f = torch.compile(lambda x: x.sin() + x.cos(), backend="tpu")
    x = torch.randn(8)
    y = f(x)
    assert y.device.type == "cpu"
    close(y, x.sin() + x.cos())
    g = torch.compile(lambda x: x * 3 - 1, backend="aot_eager")
    close(g(x), x * 3 - 1)


# ------------------------------------------------------- bounded dynamism --

class TinyLM(nn.Module):
    def __init__(self, vocab=64, d=32, seq=48):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.ln = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        q, k, v = self.qkv(self.ln(x)).chunk(3, dim=-1)
        x = x + F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None], is_causal=True)[:, 0]
        return self.head(x + self.mlp(x))


def test_bounded_dynamism_ten_lengths_one_compile(highest_matmul_precision):
    from torch_tpu._dynamo import stats
    m = TinyLM()
    mt = copy.deepcopy(m).to("tpu")

    def step(model, idx, tgt):
        logits = model(idx)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt.flatten())
        loss.backward()
        return logits, loss

    cstep = torch.compile(step, backend="tpu")
    before = stats["captures"]
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for s in (5, 11, 48, 2, 30, 17, 8, 41, 23, 36):
            idx, tgt = torch.randint(0, 64, (1, s)), torch.randint(0, 64, (1, s))
            it, tt = idx.to("tpu"), tgt.to("tpu")
            torch_tpu.mark_dynamic(it, 1, 2, 48)
            torch_tpu.mark_dynamic(tt, 1, 2, 48)
            logits_t, loss_t = cstep(mt, it, tt)
            logits, loss = step(m, idx, tgt)
            assert logits_t.shape == logits.shape
            close(logits_t, logits.detach(), rtol=1e-4, atol=1e-5)
            close(loss_t, loss.detach(), rtol=1e-4, atol=1e-5)
            for p, pt in zip(m.parameters(), mt.parameters()):
                close(pt.grad, p.grad, rtol=1e-4, atol=1e-5)
            m.zero_grad()
            mt.zero_grad()
    assert not [w for w in caught if "once per size" in str(w.message)]
    assert stats["captures"] - before == 2  # the forward and the backward graph, once each


def test_bounded_dynamism_size_out_of_range_raises():
    f = torch.compile(lambda x: x.sum(1), backend="tpu")
    x = torch.randn(1, 6, device="tpu")
    torch_tpu.mark_dynamic(x, 1, 2, 8)
    f(x)
    y = torch.randn(1, 10, device="tpu")
    torch._dynamo.mark_dynamic(y, 1)  # Dynamo's own marking: the graph may accept it ...
    with pytest.raises(ValueError, match="outside"):
        torch_tpu.mark_dynamic(y, 1, 2, 8)  # ... but tpu's bounds name the problem
    with pytest.raises(ValueError, match="lower <= upper"):
        torch_tpu.mark_dynamic(x, 1, 9, 3)


def test_bounded_dynamism_falls_back_where_xla_cannot_follow(highest_matmul_precision):
    # Batch 2: the linear layers merge the padded dimension with the batch
    # and split it again, which XLA's dynamic padder cannot follow. The
    # first padded call is checked, warns, and the graph compiles per size.
    lin = nn.Linear(8, 4)
    lin_t = copy.deepcopy(lin).to("tpu")
    f = torch.compile(lambda x: lin_t(x).relu(), backend="tpu")
    with pytest.warns(UserWarning, match="compiled once per size"):
        for s in (3, 6, 9):
            x = torch.randn(2, s, 8)
            xt = x.to("tpu")
            torch_tpu.mark_dynamic(xt, 1, 2, 16)
            close(f(xt), lin(x).relu().detach())


def test_grouped_mm_float32_compiles(highest_matmul_precision):
    # torch's meta function for _grouped_mm takes only bfloat16 (CUDA's rule);
    # tpu's fake-tensor rule lets a float32 MoE layer trace and compile.
    torch._dynamo.reset()
    a, b = torch.randn(12, 8, requires_grad=True), torch.randn(3, 8, 4, requires_grad=True)
    offs = torch.tensor([4, 9, 12], dtype=torch.int32)
    g = torch.randn(12, 4)
    want = torch._grouped_mm(a, b, offs=offs)
    want.backward(g)
    ta, tb = a.detach().to("tpu").requires_grad_(), b.detach().to("tpu").requires_grad_()
    f = torch.compile(lambda x, w, o: torch._grouped_mm(x, w, offs=o), backend="tpu")
    got = f(ta, tb, offs.to("tpu"))
    got.backward(g.to("tpu"))
    torch.testing.assert_close(got.cpu(), want.detach())
    torch.testing.assert_close(ta.grad.cpu(), a.grad)
    torch.testing.assert_close(tb.grad.cpu(), b.grad)
    assert torch_tpu._dynamo.stats["captures"] > 0


def test_view_planned_on_meta_strides_runs_on_tpu_layouts():
    # AOTAutograd plans a view from the meta strides (pad keeps a permuted
    # input's layout); tpu's pad returns a contiguous tensor, on which that
    # view is impossible: the backend runs the graph's views as reshapes.
    def f(x):
        y = torch.nn.functional.pad(x, (0, 0, 0, 0, 0, 112))  # dim 1: 16 -> 128
        return y.permute(0, 2, 1, 3).reshape(256, 128, 64) * 2

    x = torch.randn(2, 128, 64, 16).permute(0, 3, 1, 2)  # (2, 16, 128, 64), permuted
    out = torch.compile(f, backend="tpu")(x.to("tpu"))
    assert torch.equal(out.cpu(), f(x))


def test_split_sizes_read_from_a_tensor_stay_exact(highest_matmul_precision):
    # Sizes taken from a tensor's values (MoE routers' tokens per expert,
    # JetMoE) reach the next graph as ints; once they change, Dynamo makes
    # them dynamic and split's guards give them a finite range. They are not
    # mark_dynamic bounds: padded to that range, split's sizes no longer
    # summed to the rows.
    class Experts(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(4, 8, 8))

        def forward(self, x, sizes):
            parts = x.split(sizes, dim=0)
            return torch.cat([F.linear(p, self.weight[i]) for i, p in enumerate(parts)])

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = nn.Linear(8, 4, bias=False)
            self.experts = nn.ModuleList(Experts() for _ in range(2))

        def forward(self, x):
            for experts in self.experts:
                top = self.router(x).topk(1, dim=1).indices
                sizes = torch.zeros(x.shape[0], 4, device=x.device).scatter(1, top, 1)
                x = experts(x, sizes.long().sum(0).tolist())  # a graph break: ints on the host
            return x

    torch.manual_seed(0)
    model = Layer()
    compiled = torch.compile(copy.deepcopy(model).to("tpu"), backend="tpu")
    for _ in range(3):
        x = torch.randn(16, 8)
        torch.testing.assert_close(compiled(x.to("tpu")).cpu(), model(x), rtol=1e-4, atol=1e-4)
