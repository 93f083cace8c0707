"""torch_tpu.kernels: JAX and Pallas functions as ops on tpu tensors, against
CPU, in every eager mode and under torch.compile."""

import pytest
import torch

import torch_tpu
import torch_tpu.metrics as tm
from torch_tpu import EagerMode

jax = pytest.importorskip("jax", reason="torch_tpu.kernels needs JAX (pip install torch_tpu[jax])")
jnp = jax.numpy
tk = pytest.importorskip("torch_tpu.kernels")

MODES = [EagerMode.DEFER_NEVER, EagerMode.DEFER_AND_FUSE, EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING]


def _rms_norm(x, w, *, eps):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _rms_ref(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


rms_norm = tk.jax_op("torch_tpu_test::rms_norm", _rms_norm, static_argnames=("eps",))


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_forward_and_backward_match_cpu(mode):
    x = torch.randn(6, 32, requires_grad=True)
    w = torch.randn(32, requires_grad=True)
    xt = x.detach().to("tpu").requires_grad_()
    wt = w.detach().to("tpu").requires_grad_()
    with torch_tpu.eager_mode(mode):
        y = rms_norm(xt, wt, eps=1e-5)
        (y * y).sum().backward()
        got = (y.detach().cpu(), xt.grad.cpu(), wt.grad.cpu())
    ref = _rms_ref(x, w, 1e-5)
    (ref * ref).sum().backward()
    torch.testing.assert_close(got[0], ref.detach())
    torch.testing.assert_close(got[1], x.grad)
    torch.testing.assert_close(got[2], w.grad)


def test_cpu_kernel_runs_the_function_on_the_host():
    x, w = torch.randn(3, 16), torch.randn(16)
    torch.testing.assert_close(rms_norm(x, w, eps=1e-6), _rms_ref(x, w, 1e-6))


def test_compile_splices_the_kernel_into_one_program():
    def f(a, b):
        return (rms_norm(a, b, eps=1e-6) * 2).relu().sum(dim=-1)

    x, w = torch.randn(5, 24), torch.randn(24)
    xt, wt = x.to("tpu"), w.to("tpu")
    explanation = torch._dynamo.explain(f)(xt, wt)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1
    g = torch.compile(f, backend="tpu")
    g(xt, wt)
    torch_tpu.synchronize()
    tm.reset()
    out = g(xt, wt)
    torch_tpu.synchronize()
    assert tm.metrics()["programs_executed"] == 1
    torch.testing.assert_close(out.cpu(), (_rms_ref(x, w, 1e-6) * 2).relu().sum(-1))


def test_second_call_lowers_and_compiles_nothing():
    op = tk.jax_op("torch_tpu_test::softplus2", lambda x: jax.nn.softplus(x) * 2)
    x = torch.randn(7, 3, device="tpu")
    with torch_tpu.eager_mode(EagerMode.DEFER_NEVER):
        first = op(x).cpu()
        lowerings = op.lowerings
        tm.reset()
        second = op(x).cpu()
    assert op.lowerings == lowerings == 1
    m = tm.metrics()
    assert m["compiles"] == 0 and m["disk_hits"] == 0 and m["memory_hits"] >= 1
    torch.testing.assert_close(first, second)
    torch.testing.assert_close(first, torch.nn.functional.softplus(x.cpu()) * 2)


def test_static_arguments_get_their_own_lowering():
    x, w = torch.randn(2, 8, device="tpu"), torch.randn(8, device="tpu")
    a = rms_norm(x, w, eps=1e-2).cpu()
    b = rms_norm(x, w, eps=10.0).cpu()
    torch.testing.assert_close(a, _rms_ref(x.cpu(), w.cpu(), 1e-2))
    torch.testing.assert_close(b, _rms_ref(x.cpu(), w.cpu(), 10.0))
    with pytest.raises(TypeError, match="unexpected keyword arguments"):
        rms_norm(x, w, eps=1.0, scale=2)


def test_donated_input_aliases_the_output():
    op = tk.jax_op("torch_tpu_test::axpy", lambda x, y: x * 2 + y, donate_argnums=(0,))
    x, y = torch.randn(128, 64), torch.randn(128, 64)
    xt, yt = x.to("tpu"), y.to("tpu")
    torch_tpu.synchronize()
    before = torch.tpu.memory_allocated()
    out = op(xt, yt)
    torch_tpu.synchronize()
    assert out is xt
    torch.testing.assert_close(xt.cpu(), x * 2 + y)
    # The donated buffer was reused: no second 32 KiB buffer stays alive.
    assert torch.tpu.memory_allocated() <= before


def test_multiple_outputs_and_integer_outputs():
    op = tk.jax_op("torch_tpu_test::stats", lambda x: (x.max(axis=-1), jnp.argmax(x, axis=-1)))
    x = torch.randn(4, 9)
    values, index = op(x.to("tpu"))
    assert index.dtype == torch.int64 and index.device.type == "tpu"
    torch.testing.assert_close(values.cpu(), x.max(-1).values)
    torch.testing.assert_close(index.cpu(), x.argmax(-1))


def test_custom_vjp_rule_is_used():
    @jax.custom_vjp
    def clip(x):
        return jnp.clip(x, -1.0, 1.0)

    def fwd(x):
        return clip(x), None

    def bwd(_, g):
        return (g * 3.0,)  # straight-through, scaled: not the true derivative

    clip.defvjp(fwd, bwd)
    op = tk.jax_op("torch_tpu_test::clip_st", clip)
    x = (torch.randn(10) * 2).to("tpu").requires_grad_()
    op(x).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), torch.full((10,), 3.0))


def test_call_jax_one_off():
    x = torch.randn(3, 5)
    out = tk.call_jax(lambda a, *, k: jnp.sin(a) * k, x.to("tpu"), k=3.0)
    torch.testing.assert_close(out.cpu(), torch.sin(x) * 3.0)


def test_unsupported_custom_call_is_rejected_naming_it():
    op = tk.jax_op("torch_tpu_test::cholesky", lambda a: jnp.linalg.cholesky(a))
    a = torch.eye(4, device="tpu") * 2
    with pytest.raises(tk.KernelError, match=r"custom call '.*(lapack|potrf).*'.*cpu plugin"):
        op(a)
    cb = tk.jax_op("torch_tpu_test::callback",
                   lambda x: jax.pure_callback(lambda v: v, jax.ShapeDtypeStruct(x.shape, x.dtype), x))
    with pytest.raises(tk.KernelError, match="custom call .*callback"):
        cb(torch.ones(3, device="tpu"))


def test_version_mismatch_names_both_versions(monkeypatch):
    monkeypatch.setattr(tk, "_plugin", lambda: ("cpu", "0.1.0"))
    op = tk.jax_op("torch_tpu_test::mismatch", lambda x: x + 1)
    with pytest.raises(tk.KernelError, match=r"StableHLO 0\.1\.0.*JAX .* writes StableHLO \d"):
        op(torch.ones(2, device="tpu"))


# ---- Pallas: blockwise (flash) attention inside a small model ----
# (the kernel is benchmarks/pallas_attention.py's, which times it)

from pallas_attention import Block as _Block  # noqa: E402


def test_pallas_flash_attention_in_a_model_matches_cpu_sdpa():
    torch.manual_seed(0)
    ref = _Block(32, 2, "sdpa")
    model = _Block(32, 2, "pallas")
    model.load_state_dict(ref.state_dict())
    model.to("tpu")
    x = torch.randn(2, 32, 32)
    with torch_tpu.precision(torch_tpu.Precision.HIGHEST):
        out = model(x.to("tpu"))
        out.square().mean().backward()
    expect = ref(x)
    expect.square().mean().backward()
    torch.testing.assert_close(out.detach().cpu(), expect.detach(), rtol=1e-4, atol=1e-4)
    for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-3, atol=1e-4, msg=name)
