"""Bugs found by the OpInfo sweep and by training runs, each with the test that
would have caught it."""

import torch
import torch.nn.functional as F
from torch.testing import assert_close

TPU = torch.device("tpu")


def test_reductions_with_dim_on_0d_tensors():
    # Used to write past the end of a vector (segfault).
    x = torch.randn(())
    t = x.to(TPU)
    for f in (lambda v: v.sum(0), lambda v: v.mean(-1), lambda v: v.amax(0),
              lambda v: v.argmax(0), lambda v: v.max(0)[0], lambda v: v.logsumexp(0),
              lambda v: v.sum(0, keepdim=True)):
        assert_close(f(t).cpu(), f(x))


def test_conj_and_neg_views_copy_without_recursion():
    # clone() of a conj view recursed through the conjugate fallback.
    a = torch.randn(5, dtype=torch.complex64)
    x = a.to(TPU)
    assert torch.equal(x.conj().clone().cpu(), a.conj().resolve_conj())
    assert torch.equal(x.conj().cpu(), a.conj().resolve_conj())
    b = torch.randn(6)
    assert torch.equal(b.to(TPU)._neg_view().clone().cpu(), -b)
    assert torch.equal(a.conj().to(TPU).cpu(), a.conj().resolve_conj())


def test_noncontiguous_real_to_complex():
    # Complex zero constants were printed as a single number.
    r = torch.randn(2, 3)
    got = r.t().to(TPU).to(torch.complex64).cpu()
    assert torch.equal(got, r.t().to(torch.complex64))


def test_conv_transpose_backward_with_output_padding_beyond_stride(highest_matmul_precision):
    x = torch.randn(1, 2, 4, 4)
    w = torch.randn(2, 3, 3, 3)
    grads = []
    for dev in ("cpu", TPU):
        xi = x.detach().clone().to(dev).requires_grad_()
        wi = w.detach().clone().to(dev).requires_grad_()
        F.conv_transpose2d(xi, wi, stride=1, output_padding=1, dilation=2).square().sum().backward()
        grads.append((xi.grad.cpu(), wi.grad.cpu()))
    assert_close(grads[1][0], grads[0][0], rtol=1e-4, atol=1e-4)
    assert_close(grads[1][1], grads[0][1], rtol=1e-4, atol=1e-4)


def test_inputs_outlive_the_programs_that_read_them(highest_matmul_precision):
    # Strict Eager returns before a program has run; a tensor freed or
    # overwritten right after must not release the buffer the program is
    # still reading (new allocations would reuse its memory). Long matmuls,
    # then the inputs dropped and fresh buffers written at once.
    torch.manual_seed(0)
    for _ in range(4):
        a = torch.randn(768, 768)
        x = a.to("tpu")
        y = x @ x @ x
        x.mul_(0.0)                      # the program still reads the old value
        del x
        junk = [torch.full((768, 768), 7.0, device="tpu") for _ in range(4)]
        torch.testing.assert_close(y.cpu(), a @ a @ a, rtol=1e-4, atol=0.05)
        del junk


def test_dot_with_a_new_weight_at_a_freed_weights_address(highest_matmul_precision):
    # XLA CPU's XNNPACK dot packs a right-hand operand that is a program
    # argument once and reuses the packing while the argument's address stays
    # the same; a new weight allocated where a freed one was got multiplied
    # with the old values (about 1 step in 8 here; in a Strict Eager GPT the
    # gradients of a LayerNorm came out wrong). The runtime keeps XLA CPU's
    # dots off XNNPACK.
    torch.manual_seed(0)
    a = torch.randn(1024, 768)
    x = a.to(TPU)
    for _ in range(60):
        w = torch.randn(768, 256, device=TPU) * 1.0
        assert_close(torch.mm(x, w).cpu(), a @ w.cpu(), rtol=1e-4, atol=1e-3)
        del w


def test_strict_training_matches_cpu(highest_matmul_precision):
    # A GPT trained in Strict Eager (the host running ahead of the device)
    # once drifted ~2e-3 from CPU within a few steps: the XNNPACK weight
    # packing above, with weights freed and reallocated every step.
    import copy
    import os
    import sys
    from gpt import GPT, train_step
    import torch_tpu
    torch.manual_seed(0)
    model = GPT(d=128, heads=4, layers=2, seq=64)
    idx = torch.randint(0, 1024, (8, 64))
    runs = []
    for device in ("cpu", "tpu"):
        m = copy.deepcopy(model).to(device)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        x = idx.to(device)
        with torch_tpu.eager_mode(torch_tpu.EagerMode.DEFER_NEVER):
            runs.append(torch.tensor([train_step(m, opt, x, x).item() for _ in range(12)]))
    assert_close(runs[1], runs[0], rtol=1e-4, atol=1e-5)
