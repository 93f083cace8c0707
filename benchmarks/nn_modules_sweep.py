"""Every layer class of torch.nn on the tpu device, checked against PyTorch CPU.

The layer classes are those exported in ``torch.nn`` that are defined in
``torch.nn.modules`` and subclass ``nn.Module``, less the abstract bases and
the containers (Module, Container, Sequential, ModuleList, ModuleDict,
ParameterList, ParameterDict, RNNBase, RNNCellBase). Each has a hand-written
recipe below (constructor arguments and small inputs: batch 2, 3 channels,
spatial size 8); a class without one is listed and counted as SKIP.

For each class the module is built on CPU with a fixed seed and a deep copy is
moved with ``.to("tpu")`` (a lazy module is built a second time, since
uninitialized buffers cannot be deep-copied, and moved before its first call,
so the tpu copy materializes its own parameters; the CPU values are then
loaded into it). Both run forward on the same inputs (floating inputs require grad)
and the outputs and buffers (running statistics) are compared with
``torch.testing.assert_close`` (rtol 1e-4, atol 1e-5 unless the recipe says
otherwise); then both run backward with the same random upstream gradient and
the gradients of the inputs and of the parameters are compared. Everything
runs at ``torch.set_float32_matmul_precision("highest")``.

Random layers (the Dropout family and RReLU in training mode,
FractionalMaxPool) are compared on shape and dtype only; a layer that behaves
differently in eval mode (random layers, batch norm, attention and the
Transformer layers, whose eval forward without grad takes PyTorch's fused
fast path) also runs an eval-mode forward without grad compared on values, and
FractionalMaxPool also runs with fixed sampling positions, compared on values.

One line per class: ``PASS``, ``FAIL(fwd)`` (the tpu forward raised),
``FAIL(bwd)`` (the tpu backward raised), ``FAIL(mismatch)`` (values, shapes,
dtypes or devices differ) or ``SKIP`` (no recipe, or the CPU reference itself
raised: a recipe bug), with the first error line; an op without a tpu
lowering reads ``missing aten::X`` (only the first such op of a class is
found). Then a summary and the missing aten ops with the classes each blocks.

Usage: python benchmarks/nn_modules_sweep.py [--only Name1,Name2]
"""

import argparse
import collections
import contextlib
import copy
import inspect
import re
import sys
import time
import traceback
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parameter import is_lazy
from torch.utils._pytree import keystr, tree_flatten, tree_flatten_with_path, tree_map

import torch_tpu

DEV = "tpu"
RTOL, ATOL = 1e-4, 1e-5
NOT_LAYERS = {"Module", "Container", "Sequential", "ModuleList", "ModuleDict",
              "ParameterList", "ParameterDict", "RNNBase", "RNNCellBase"}
_MISSING_RE = re.compile(r"'(aten::[A-Za-z0-9_.]+)'")


class Recipe:
    def __init__(self, ctor, inputs, call=None, tol=None, rand=False, ev=False, fix=None,
                 ng=()):
        self.ctor = ctor        # () -> module, built under torch.manual_seed(0)
        self.inputs = inputs    # () -> list of CPU inputs (nested allowed), under manual_seed(1)
        self.call = call or (lambda m, *xs: m(*xs))
        self.tol = tol or (RTOL, ATOL)
        self.rand = rand        # training-mode results compared on shape/dtype only
        self.ev = ev            # also an eval-mode forward without grad, compared on values
        self.fix = fix          # () -> {attr: tensor}: set on both to make a random layer fixed
        self.ng = ng            # indices of floating inputs that do not require grad


def x(*s):
    return torch.randn(*s)


def u(*s):
    return torch.rand(*s)


def ri(high, *s):
    return torch.randint(high, s)


def pm1(*s):
    return torch.randint(2, s).float() * 2 - 1


X1, X2, X3 = (lambda: [x(2, 3, 8)]), (lambda: [x(2, 3, 8, 8)]), (lambda: [x(2, 3, 8, 8, 8)])
XV = lambda: [x(4, 5), x(4, 5)]                     # (input, target) for regression losses
LOGP = lambda n, c: torch.log_softmax(x(n, c), 1)    # log-probabilities
SEQ = lambda: [x(2, 5, 8)]                          # (batch, seq, features), batch_first
SEQ2 = lambda: [x(2, 5, 8), x(2, 4, 8)]             # (src, tgt) / (memory, tgt)
ENC = lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
DEC = lambda: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True)


def causal(t):
    return nn.Transformer.generate_square_subsequent_mask(t.shape[1], device=t.device)


def unpool_in(nd):
    def make():
        out, idx = getattr(F, f"max_pool{nd}d")(x(2, 3, *[8] * nd), 2, return_indices=True)
        return [out, idx]
    return make


R = Recipe
RECIPES = {
    # convolution
    "Conv1d": R(lambda: nn.Conv1d(3, 4, 3, padding=1), X1),
    "Conv2d": R(lambda: nn.Conv2d(3, 6, 3, stride=2, padding=1, groups=3), X2),
    "Conv3d": R(lambda: nn.Conv3d(3, 4, 3, padding=1, dilation=1), X3),
    "ConvTranspose1d": R(lambda: nn.ConvTranspose1d(3, 4, 3, stride=2), X1),
    "ConvTranspose2d": R(lambda: nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1), X2),
    "ConvTranspose3d": R(lambda: nn.ConvTranspose3d(3, 4, 2, stride=2), X3),
    "LazyConv1d": R(lambda: nn.LazyConv1d(4, 3, padding=1), X1),
    "LazyConv2d": R(lambda: nn.LazyConv2d(4, 3, stride=2), X2),
    "LazyConv3d": R(lambda: nn.LazyConv3d(4, 3), X3),
    "LazyConvTranspose1d": R(lambda: nn.LazyConvTranspose1d(4, 3, stride=2), X1),
    "LazyConvTranspose2d": R(lambda: nn.LazyConvTranspose2d(4, 3), X2),
    "LazyConvTranspose3d": R(lambda: nn.LazyConvTranspose3d(4, 2, stride=2), X3),
    "Fold": R(lambda: nn.Fold(output_size=(4, 5), kernel_size=2), lambda: [x(2, 12, 12)]),
    "Unfold": R(lambda: nn.Unfold(kernel_size=2, padding=1, stride=2), X2),
    # pooling
    "MaxPool1d": R(lambda: nn.MaxPool1d(2), X1),
    "MaxPool2d": R(lambda: nn.MaxPool2d(3, stride=2, padding=1), X2),
    "MaxPool3d": R(lambda: nn.MaxPool3d(2, return_indices=True), X3),
    "AvgPool1d": R(lambda: nn.AvgPool1d(3, stride=2, padding=1), X1),
    "AvgPool2d": R(lambda: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), X2),
    "AvgPool3d": R(lambda: nn.AvgPool3d(2, ceil_mode=True), lambda: [x(2, 3, 7, 7, 7)]),
    "AdaptiveAvgPool1d": R(lambda: nn.AdaptiveAvgPool1d(3), X1),
    "AdaptiveAvgPool2d": R(lambda: nn.AdaptiveAvgPool2d((3, 5)), X2),
    "AdaptiveAvgPool3d": R(lambda: nn.AdaptiveAvgPool3d(3), X3),
    "AdaptiveMaxPool1d": R(lambda: nn.AdaptiveMaxPool1d(3), X1),
    "AdaptiveMaxPool2d": R(lambda: nn.AdaptiveMaxPool2d((3, 5), return_indices=True), X2),
    "AdaptiveMaxPool3d": R(lambda: nn.AdaptiveMaxPool3d(3), X3),
    "LPPool1d": R(lambda: nn.LPPool1d(2, 2), X1),
    "LPPool2d": R(lambda: nn.LPPool2d(2, 2), X2),
    "LPPool3d": R(lambda: nn.LPPool3d(2, 2), X3),
    "FractionalMaxPool2d": R(lambda: nn.FractionalMaxPool2d(2, output_size=4), X2, rand=True,
                             fix=lambda: {"_random_samples": u(2, 3, 2)}),
    "FractionalMaxPool3d": R(lambda: nn.FractionalMaxPool3d(2, output_size=3), X3, rand=True,
                             fix=lambda: {"_random_samples": u(2, 3, 3)}),
    "MaxUnpool1d": R(lambda: nn.MaxUnpool1d(2), unpool_in(1)),
    "MaxUnpool2d": R(lambda: nn.MaxUnpool2d(2), unpool_in(2)),
    "MaxUnpool3d": R(lambda: nn.MaxUnpool3d(2), unpool_in(3)),
    # normalization
    "BatchNorm1d": R(lambda: nn.BatchNorm1d(3), X1, ev=True),
    "BatchNorm2d": R(lambda: nn.BatchNorm2d(3), X2, ev=True),
    "BatchNorm3d": R(lambda: nn.BatchNorm3d(3, momentum=None), X3, ev=True),
    "LazyBatchNorm1d": R(lambda: nn.LazyBatchNorm1d(), X1, ev=True),
    "LazyBatchNorm2d": R(lambda: nn.LazyBatchNorm2d(), X2, ev=True),
    "LazyBatchNorm3d": R(lambda: nn.LazyBatchNorm3d(), X3, ev=True),
    "SyncBatchNorm": R(lambda: nn.SyncBatchNorm(3), X2, ev=True),  # no process group: batch norm
    "InstanceNorm1d": R(lambda: nn.InstanceNorm1d(3, affine=True), X1),
    "InstanceNorm2d": R(lambda: nn.InstanceNorm2d(3, affine=True, track_running_stats=True), X2,
                        ev=True),
    "InstanceNorm3d": R(lambda: nn.InstanceNorm3d(3), X3),
    "LazyInstanceNorm1d": R(lambda: nn.LazyInstanceNorm1d(affine=True), X1),
    "LazyInstanceNorm2d": R(lambda: nn.LazyInstanceNorm2d(affine=True), X2),
    "LazyInstanceNorm3d": R(lambda: nn.LazyInstanceNorm3d(affine=True), X3),
    "GroupNorm": R(lambda: nn.GroupNorm(2, 6), lambda: [x(2, 6, 8, 8)]),
    "LayerNorm": R(lambda: nn.LayerNorm((8, 8)), X2),
    "RMSNorm": R(lambda: nn.RMSNorm(8), X2),
    "LocalResponseNorm": R(lambda: nn.LocalResponseNorm(2), X2),
    "CrossMapLRN2d": R(lambda: nn.CrossMapLRN2d(3), X2),
    # activations
    "ReLU": R(nn.ReLU, X2), "ReLU6": R(lambda: nn.ReLU6(), lambda: [x(2, 3, 8, 8) * 4]),
    "LeakyReLU": R(lambda: nn.LeakyReLU(0.1), X2), "PReLU": R(lambda: nn.PReLU(3), X2),
    "ELU": R(lambda: nn.ELU(0.7), X2), "SELU": R(nn.SELU, X2), "CELU": R(lambda: nn.CELU(1.5), X2),
    "GELU": R(lambda: nn.GELU(approximate="tanh"), X2), "GLU": R(lambda: nn.GLU(-1), X2),
    "Hardshrink": R(lambda: nn.Hardshrink(0.5), X2), "Hardsigmoid": R(nn.Hardsigmoid, X2),
    "Hardswish": R(nn.Hardswish, X2), "Hardtanh": R(lambda: nn.Hardtanh(-0.5, 0.5), X2),
    "LogSigmoid": R(nn.LogSigmoid, X2), "LogSoftmax": R(lambda: nn.LogSoftmax(1), X2),
    "Mish": R(nn.Mish, X2), "RReLU": R(nn.RReLU, X2, rand=True, ev=True),
    "Sigmoid": R(nn.Sigmoid, X2), "SiLU": R(nn.SiLU, X2), "Softmax": R(lambda: nn.Softmax(-1), X2),
    "Softmax2d": R(nn.Softmax2d, X2), "Softmin": R(lambda: nn.Softmin(1), X2),
    "Softplus": R(lambda: nn.Softplus(beta=2, threshold=1), X2),
    "Softshrink": R(lambda: nn.Softshrink(0.5), X2), "Softsign": R(nn.Softsign, X2),
    "Tanh": R(nn.Tanh, X2), "Tanhshrink": R(nn.Tanhshrink, X2),
    "Threshold": R(lambda: nn.Threshold(0.1, 20.0), X2),
    "Identity": R(lambda: nn.Identity(3, unused=1), X2),
    # dropout (random in training mode)
    "Dropout": R(lambda: nn.Dropout(0.5), X2, rand=True, ev=True),
    "Dropout1d": R(lambda: nn.Dropout1d(0.5), X1, rand=True, ev=True),
    "Dropout2d": R(lambda: nn.Dropout2d(0.5), X2, rand=True, ev=True),
    "Dropout3d": R(lambda: nn.Dropout3d(0.5), X3, rand=True, ev=True),
    "AlphaDropout": R(lambda: nn.AlphaDropout(0.5), X2, rand=True, ev=True),
    "FeatureAlphaDropout": R(lambda: nn.FeatureAlphaDropout(0.5), X2, rand=True, ev=True),
    # padding
    "ConstantPad1d": R(lambda: nn.ConstantPad1d((1, 2), 0.5), X1),
    "ConstantPad2d": R(lambda: nn.ConstantPad2d((1, 2, 0, 1), 0.5), X2),
    "ConstantPad3d": R(lambda: nn.ConstantPad3d(1, 0.5), X3),
    "ZeroPad1d": R(lambda: nn.ZeroPad1d((2, 1)), X1),
    "ZeroPad2d": R(lambda: nn.ZeroPad2d((1, 2, 0, 1)), X2),
    "ZeroPad3d": R(lambda: nn.ZeroPad3d((1, 0, 0, 1, 2, 1)), X3),
    "ReflectionPad1d": R(lambda: nn.ReflectionPad1d((2, 3)), X1),
    "ReflectionPad2d": R(lambda: nn.ReflectionPad2d((1, 2, 2, 1)), X2),
    "ReflectionPad3d": R(lambda: nn.ReflectionPad3d(1), X3),
    "ReplicationPad1d": R(lambda: nn.ReplicationPad1d((2, 3)), X1),
    "ReplicationPad2d": R(lambda: nn.ReplicationPad2d((1, 2, 2, 1)), X2),
    "ReplicationPad3d": R(lambda: nn.ReplicationPad3d(1), X3),
    "CircularPad1d": R(lambda: nn.CircularPad1d((2, 3)), X1),
    "CircularPad2d": R(lambda: nn.CircularPad2d((1, 2, 2, 1)), X2),
    "CircularPad3d": R(lambda: nn.CircularPad3d(1), X3),
    # resampling and reshaping
    "Upsample": R(lambda: nn.Upsample(scale_factor=2, mode="bicubic"), X2),
    "UpsamplingNearest2d": R(lambda: nn.UpsamplingNearest2d(scale_factor=2), X2),
    "UpsamplingBilinear2d": R(lambda: nn.UpsamplingBilinear2d(size=(5, 11)), X2),
    "PixelShuffle": R(lambda: nn.PixelShuffle(2), lambda: [x(2, 8, 4, 4)]),
    "PixelUnshuffle": R(lambda: nn.PixelUnshuffle(2), X2),
    "ChannelShuffle": R(lambda: nn.ChannelShuffle(2), lambda: [x(2, 4, 4, 4)]),
    "Flatten": R(nn.Flatten, X2),
    "Unflatten": R(lambda: nn.Unflatten(2, (2, 4)), X1),
    # linear, embedding, distance
    "Linear": R(lambda: nn.Linear(8, 4), lambda: [x(2, 3, 8)]),
    "LazyLinear": R(lambda: nn.LazyLinear(4), lambda: [x(2, 3, 8)]),
    "Bilinear": R(lambda: nn.Bilinear(8, 6, 4), lambda: [x(2, 8), x(2, 6)]),
    "Embedding": R(lambda: nn.Embedding(10, 4, padding_idx=0), lambda: [ri(10, 2, 5)]),
    "EmbeddingBag": R(lambda: nn.EmbeddingBag(10, 4, mode="mean"),
                      lambda: [ri(10, 8), torch.tensor([0, 3])]),
    "CosineSimilarity": R(lambda: nn.CosineSimilarity(dim=1), XV),
    "PairwiseDistance": R(lambda: nn.PairwiseDistance(p=3), XV),
    # recurrent
    "RNN": R(lambda: nn.RNN(8, 6, num_layers=2, batch_first=True), SEQ),
    "LSTM": R(lambda: nn.LSTM(8, 6, num_layers=2, batch_first=True), SEQ),
    "GRU": R(lambda: nn.GRU(8, 6, bidirectional=True), lambda: [x(5, 2, 8), x(2, 2, 6)]),
    "RNNCell": R(lambda: nn.RNNCell(8, 6, nonlinearity="relu"), lambda: [x(2, 8), x(2, 6)]),
    "LSTMCell": R(lambda: nn.LSTMCell(8, 6), lambda: [x(2, 8), (x(2, 6), x(2, 6))]),
    "GRUCell": R(lambda: nn.GRUCell(8, 6), lambda: [x(2, 8), x(2, 6)]),
    # attention and transformer (dropout 0; the eval pass takes the fused fast path)
    "MultiheadAttention": R(lambda: nn.MultiheadAttention(8, 2, batch_first=True), SEQ,
                            call=lambda m, q: m(q, q, q), ev=True),
    "TransformerEncoderLayer": R(ENC, SEQ, ev=True),
    "TransformerEncoder": R(lambda: nn.TransformerEncoder(ENC(), 2, enable_nested_tensor=False),
                            SEQ, ev=True),
    "TransformerDecoderLayer": R(DEC, SEQ2, call=lambda m, mem, t: m(t, mem, tgt_mask=causal(t)),
                                 ev=True),
    "TransformerDecoder": R(lambda: nn.TransformerDecoder(DEC(), 2), SEQ2,
                            call=lambda m, mem, t: m(t, mem, tgt_mask=causal(t)), ev=True),
    "Transformer": R(lambda: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True), SEQ2,
                     call=lambda m, s, t: m(s, t, tgt_mask=causal(t)), ev=True),
    # losses: (input, target, ...) with valid targets
    "L1Loss": R(nn.L1Loss, XV), "MSELoss": R(nn.MSELoss, XV),
    "SmoothL1Loss": R(lambda: nn.SmoothL1Loss(beta=0.5), XV),
    "HuberLoss": R(lambda: nn.HuberLoss(delta=0.5), XV),
    "BCELoss": R(nn.BCELoss, lambda: [u(4, 5) * 0.9 + 0.05, u(4, 5)]),
    "BCEWithLogitsLoss": R(lambda: nn.BCEWithLogitsLoss(pos_weight=u(5) + 0.5),
                           lambda: [x(4, 5), u(4, 5)]),
    "CrossEntropyLoss": R(lambda: nn.CrossEntropyLoss(label_smoothing=0.1),
                          lambda: [x(4, 5), ri(5, 4)]),
    "NLLLoss": R(lambda: nn.NLLLoss(weight=u(5) + 0.5), lambda: [LOGP(4, 5), ri(5, 4)]),
    "NLLLoss2d": R(nn.NLLLoss2d, lambda: [torch.log_softmax(x(2, 5, 4, 4), 1), ri(5, 2, 4, 4)]),
    "KLDivLoss": R(lambda: nn.KLDivLoss(reduction="batchmean"),
                   lambda: [LOGP(4, 5), torch.softmax(x(4, 5), 1)]),
    "PoissonNLLLoss": R(nn.PoissonNLLLoss, lambda: [x(4, 5), ri(5, 4, 5).float()]),
    "GaussianNLLLoss": R(nn.GaussianNLLLoss, lambda: [x(4, 5), x(4, 5), u(4, 5) + 0.1]),
    "CosineEmbeddingLoss": R(lambda: nn.CosineEmbeddingLoss(margin=0.2),
                             lambda: [x(4, 5), x(4, 5), pm1(4)]),
    "HingeEmbeddingLoss": R(nn.HingeEmbeddingLoss, lambda: [x(4, 5), pm1(4, 5)]),
    "MarginRankingLoss": R(lambda: nn.MarginRankingLoss(0.1), lambda: [x(6), x(6), pm1(6)]),
    "MultiLabelMarginLoss": R(nn.MultiLabelMarginLoss, lambda: [
        x(2, 5), torch.tensor([[3, 0, -1, 1, 2], [1, 2, 4, -1, 0]])]),
    "MultiLabelSoftMarginLoss": R(nn.MultiLabelSoftMarginLoss,
                                  lambda: [x(4, 5), ri(2, 4, 5).float()]),
    "MultiMarginLoss": R(lambda: nn.MultiMarginLoss(margin=0.5), lambda: [x(4, 5), ri(5, 4)]),
    "SoftMarginLoss": R(nn.SoftMarginLoss, lambda: [x(4, 5), pm1(4, 5)], ng=(1,)),
    "TripletMarginLoss": R(nn.TripletMarginLoss, lambda: [x(4, 5), x(4, 5), x(4, 5)]),
    "TripletMarginWithDistanceLoss": R(nn.TripletMarginWithDistanceLoss,
                                       lambda: [x(4, 5), x(4, 5), x(4, 5)]),
    "CTCLoss": R(nn.CTCLoss, lambda: [torch.log_softmax(x(12, 2, 5), 2), 1 + ri(4, 2, 4),
                                       torch.tensor([12, 10]), torch.tensor([4, 3])]),
    "AdaptiveLogSoftmaxWithLoss": R(lambda: nn.AdaptiveLogSoftmaxWithLoss(16, 10, [4, 8], 2.0),
                                    lambda: [x(4, 16), torch.tensor([0, 5, 9, 3])]),
    "LinearCrossEntropyLoss": R(lambda: nn.LinearCrossEntropyLoss(8, 5, bias=True),
                                lambda: [x(4, 8), ri(5, 4)]),
}


def layer_classes():
    """(layer class names, exported nn.Module subclasses outside torch.nn.modules)."""
    layers, outside = [], []
    for name in sorted(dir(nn)):
        c = getattr(nn, name)
        if not (inspect.isclass(c) and issubclass(c, nn.Module)) or name.startswith("_"):
            continue
        if not c.__module__.startswith("torch.nn.modules"):
            outside.append(name)
        elif name not in NOT_LAYERS and not inspect.isabstract(c):
            layers.append(name)
    return layers, outside


class Fail(Exception):
    def __init__(self, kind, reason, op=None):
        super().__init__(reason)
        self.kind, self.reason, self.op = kind, reason, op
        cause = sys.exc_info()[1]  # the exception being handled where this is raised, if any
        self.tb = "".join(traceback.format_exception(cause)) if cause else ""


def short(exc):
    """(first error line, missing aten op or None)."""
    msg = str(exc).strip()
    if isinstance(exc, NotImplementedError):
        m = _MISSING_RE.search(msg)
        if m and "not implemented for the tpu device" in msg:
            return "missing " + m.group(1), m.group(1)
    first = msg.splitlines()[0] if msg else ""
    return f"{type(exc).__name__}: {first[:150]}", None


def tensors(obj):
    return [t for t in tree_flatten(obj)[0] if isinstance(t, torch.Tensor)]


def prep(inputs, dev, grad, ng):
    """A fresh copy of the inputs on `dev`; floating ones require grad when `grad`."""
    def one(k, obj):
        def f(t):
            if not isinstance(t, torch.Tensor):
                return t
            t = t.detach().to(dev, copy=True)
            return t.requires_grad_(grad and t.is_floating_point() and k not in ng)
        return tree_map(f, obj)
    return [one(k, a) for k, a in enumerate(inputs)]


def diff(t, c, rtol, atol):
    if t.shape != c.shape or t.dtype != c.dtype:
        return f"shape/dtype {tuple(t.shape)} {t.dtype}, cpu {tuple(c.shape)} {c.dtype}"
    if not (c.is_floating_point() or c.is_complex()):
        return f"{int((t != c).sum())}/{c.numel()} elements differ (exact compare)"
    t, c = t.double(), c.double()
    bad = ~torch.isclose(t, c, rtol, atol, equal_nan=True)
    d = (t - c).abs()[bad]
    rel = d / c.abs()[bad]
    return (f"{int(bad.sum())}/{c.numel()} elements, max abs diff {d.nan_to_num(float('inf')).max():.2g}, "
            f"max rel {rel.nan_to_num(float('inf')).max():.2g}")


def compare(pairs, values, tol):
    """pairs: (label, cpu value, tpu value); raises Fail('mismatch', ...) on the first difference."""
    for label, c, t in pairs:
        if isinstance(c, torch.Tensor) != isinstance(t, torch.Tensor):
            raise Fail("mismatch", f"{label}: {type(t).__name__} on tpu, {type(c).__name__} on cpu")
        if not isinstance(c, torch.Tensor):
            if c != t:
                raise Fail("mismatch", f"{label}: {t!r} on tpu, {c!r} on cpu")
            continue
        if t.device.type != DEV:
            raise Fail("mismatch", f"{label}: result on {t.device}, not on tpu")
        t, c = t.detach().cpu(), c.detach()
        if not values:
            if t.shape != c.shape or t.dtype != c.dtype:
                raise Fail("mismatch", f"{label}: {diff(t, c, *tol)}")
            continue
        try:
            torch.testing.assert_close(t, c, rtol=tol[0], atol=tol[1], equal_nan=True)
        except AssertionError:
            raise Fail("mismatch", f"{label}: {diff(t, c, *tol)}") from None


def flat(label, obj):
    leaves, spec = tree_flatten_with_path(obj)
    return [(label + keystr(p), v) for p, v in leaves], spec


def run_pass(rec, mc, mt, inputs, values, grad, tag=""):
    xc, xt = prep(inputs, "cpu", grad, rec.ng), prep(inputs, DEV, grad, rec.ng)
    ctx = contextlib.nullcontext() if grad else torch.no_grad()
    with ctx:
        try:
            oc = rec.call(mc, *xc)
        except Exception as e:
            raise Fail("cpu", f"{tag}cpu reference forward raised {short(e)[0]}") from None
        try:
            ot = rec.call(mt, *xt)
            torch_tpu.synchronize(tensors(ot))
        except Exception as e:
            raise Fail("fwd", tag + short(e)[0], short(e)[1]) from None
    (lc, sc), (lt, st) = flat(tag + "out", oc), flat(tag + "out", ot)
    if sc != st:
        raise Fail("mismatch", f"{tag}output structure {st} on tpu, {sc} on cpu")
    compare([(a, c, t) for (a, c), (_, t) in zip(lc, lt)], values, rec.tol)
    if values:
        bc, bt = dict(mc.named_buffers()), dict(mt.named_buffers())
        compare([(f"{tag}buffer {n}", bc[n], bt.get(n)) for n in bc], True, rec.tol)
    if not grad:
        return
    outs = [(i, label, c) for i, (label, c) in enumerate(lc)
            if isinstance(c, torch.Tensor) and c.requires_grad]
    if not outs:
        return
    for i, label, _ in outs:
        if not lt[i][1].requires_grad:
            raise Fail("bwd", f"{tag}{label} does not require grad on tpu")
    wc, names = [], []
    for k, a in enumerate(xc):
        for label, t in flat(f"input{k}", a)[0]:
            if isinstance(t, torch.Tensor) and t.requires_grad:
                wc.append(t), names.append(label)
    wt = [t for a in xt for t in tensors(a) if t.requires_grad]
    pc = [(n, p) for n, p in mc.named_parameters() if p.requires_grad]
    pt = [p for _, p in mt.named_parameters() if p.requires_grad]
    names += [n for n, _ in pc]
    wc += [p for _, p in pc]
    wt += pt
    if len(wt) != len(wc):
        raise Fail("mismatch", f"{tag}{len(wt)} tensors require grad on tpu, {len(wc)} on cpu")
    torch.manual_seed(2)
    gs = [torch.randn_like(c) for _, _, c in outs]
    try:
        gc = torch.autograd.grad([c for _, _, c in outs], wc, gs, allow_unused=True)
    except Exception as e:
        raise Fail("cpu", f"{tag}cpu reference backward raised {short(e)[0]}") from None
    try:
        gt = torch.autograd.grad([lt[i][1] for i, _, _ in outs], wt, [g.to(DEV) for g in gs],
                                 allow_unused=True)
        torch_tpu.synchronize([g for g in gt if g is not None])
    except Exception as e:
        raise Fail("bwd", tag + short(e)[0], short(e)[1]) from None
    compare([(f"{tag}grad {n}", c, t) for n, c, t in zip(names, gc, gt)], values, rec.tol)


def check(rec):
    """Runs the passes of one recipe; returns a note on what was compared."""
    torch.manual_seed(0)
    mc = rec.ctor()
    torch.manual_seed(1)
    inputs = rec.inputs()
    lazy = any(is_lazy(t) for t in list(mc.parameters()) + list(mc.buffers()))
    try:  # uninitialized buffers cannot be deep-copied: a lazy module is built again
        torch.manual_seed(0)
        mt = (rec.ctor() if lazy else copy.deepcopy(mc)).to(DEV)
    except Exception as e:
        raise Fail("fwd", "to(tpu): " + short(e)[0], short(e)[1]) from None
    if lazy:  # both materialize on their first call; then the tpu copy gets the CPU values
        with torch.no_grad():
            try:
                rec.call(mc, *prep(inputs, "cpu", False, ()))
            except Exception as e:
                raise Fail("cpu", f"cpu reference forward raised {short(e)[0]}") from None
            try:
                rec.call(mt, *prep(inputs, DEV, False, ()))
            except Exception as e:
                raise Fail("fwd", "lazy init: " + short(e)[0], short(e)[1]) from None
        sc, st = mc.state_dict(), mt.state_dict()
        compare([(f"lazy init {n}", v, st.get(n)) for n, v in sc.items()], False, rec.tol)
        mt.load_state_dict(sc)
    notes = []
    run_pass(rec, mc, mt, inputs, values=not rec.rand, grad=True)
    if rec.rand:
        notes.append("random: train compared on shape/dtype only")
    if rec.fix:
        torch.manual_seed(3)
        for k, v in rec.fix().items():
            setattr(mc, k, v), setattr(mt, k, v.to(DEV))
        run_pass(rec, mc, mt, inputs, values=True, grad=True, tag="fixed ")
        notes.append("fixed samples compared on values")
    if rec.ev:
        mc.eval(), mt.eval()
        run_pass(rec, mc, mt, inputs, values=True, grad=False, tag="eval ")
        notes.append("eval no-grad compared on values")
    return "; ".join(notes)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", help="comma-separated class names (e.g. Conv2d,LSTM)")
    p.add_argument("--traceback", action="store_true", help="print the traceback of failures")
    args = p.parse_args()
    torch.set_float32_matmul_precision("highest")
    torch_tpu.cpu_fallback_mode(False)  # a missing op must raise, not run on the CPU
    warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.nn")
    warnings.filterwarnings("ignore", category=FutureWarning)

    layers, outside = layer_classes()
    no_recipe = [n for n in layers if n not in RECIPES]
    stale = sorted(set(RECIPES) - set(layers))
    print(f"device: {torch.tpu.get_device_name()}; torch {torch.__version__}")
    print(f"{len(layers)} layer classes in torch.nn (excluded as bases/containers: "
          f"{', '.join(sorted(NOT_LAYERS))}; exported from outside torch.nn.modules, "
          f"not checked: {', '.join(outside) or 'none'})")
    print(f"no recipe (SKIP): {', '.join(no_recipe) or 'none'}")
    if stale:
        print(f"recipes for classes not found in this torch: {', '.join(stale)}")
    print("random layers (Dropout family, RReLU, FractionalMaxPool) are compared on shape/dtype "
          "only in training mode; their eval-mode (or fixed-sample) results on values\n")
    if args.only:
        wanted = args.only.split(",")
        unknown = [n for n in wanted if n not in layers]
        if unknown:
            p.error(f"not layer classes of torch.nn: {', '.join(unknown)}")
        layers = [n for n in layers if n in wanted]

    t_start = time.perf_counter()
    results = {}
    for name in layers:
        t0 = time.perf_counter()
        if name not in RECIPES:
            status, reason, op = "SKIP", "no recipe", None
        else:
            try:
                status, reason, op = "PASS", check(RECIPES[name]), None
            except Fail as f:
                status = "SKIP" if f.kind == "cpu" else f"FAIL({f.kind})"
                reason, op = f.reason, f.op
                tb = f.tb or traceback.format_exc()
            except Exception as e:  # a bug of this script
                status, (reason, op) = "FAIL(fwd)", short(e)
                reason, tb = "harness: " + reason, traceback.format_exc()
            if status != "PASS" and args.traceback:
                print(tb, end="")
        results[name] = (status, reason, op)
        dt = time.perf_counter() - t0
        print(f"{name:30s} {status:15s} {dt:5.1f}s  {reason}", flush=True)

    counts = collections.Counter(s for s, _, _ in results.values())
    failed = sum(v for k, v in counts.items() if k.startswith("FAIL"))
    kinds = ", ".join(f"{k[5:-1]} {v}" for k, v in sorted(counts.items()) if k.startswith("FAIL"))
    print(f"\nsummary: {counts['PASS']} passed, {failed} failed ({kinds or 'none'}), "
          f"{counts['SKIP']} skipped, of {len(results)} layer classes "
          f"in {time.perf_counter() - t_start:.0f} s")
    missing = collections.defaultdict(list)
    for name, (_, _, op) in results.items():
        if op:
            missing[op].append(name)
    print("missing aten ops (layer classes blocked):" + ("" if missing else " none"))
    for op, names in sorted(missing.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"  {op:45s} {len(names):3d}  {', '.join(names)}")


if __name__ == "__main__":
    main()
