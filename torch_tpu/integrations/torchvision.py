"""torchvision.ops on tpu.

torchvision declares its detection operators (``torchvision::nms``,
``roi_align``, ``roi_pool``, ``ps_roi_align``, ``ps_roi_pool``,
``deform_conv2d``) in its C++ library and gives them kernels for CPU and
CUDA only. Here they get tpu kernels written with ATen ops, so each runs as
XLA programs like any other op, in every eager mode. The differentiable ones
are registered at the autograd key as well: autograd records their ATen ops,
so torchvision's backward kernels (CPU and CUDA code) are not needed.

The semantics are torchvision's CPU kernels': the same sampling points,
bounds rules, rounding and tie-breaking (a pooled bin's first maximum in
row-major order; nms keeps boxes in decreasing score order, the earlier of
two equal scores first). nms, whose output length depends on the data, works
as torchvision's CUDA kernel does: the overlap matrix on the device, the
greedy scan over it on the host.

When torchvision's C++ library cannot be loaded (the CUDA build of
torchvision beside a CPU-only torch: every ``import torchvision`` then fails
with "operator torchvision::nms does not exist"), the operators are declared
here, before torchvision's first import, with torchvision's own schemas, so
torchvision imports and its ops run on tpu; on the CPU they then raise an
error naming the load failure.
"""

import math
import os
from typing import List, Optional

import torch

_DEVICE = "PrivateUse1"
_libs: List[torch.library.Library] = []
# Why torchvision's C++ operators are missing (None: they are torchvision's).
_load_error: Optional[str] = None
_installed = False

# torchvision's operator schemas, for when its library cannot be loaded.
_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "roi_align": "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
                 "SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor",
    "roi_pool": "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
                "SymInt pooled_width) -> (Tensor, Tensor)",
    "ps_roi_align": "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
                    "SymInt pooled_width, int sampling_ratio) -> (Tensor, Tensor)",
    "ps_roi_pool": "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
                   "SymInt pooled_width) -> (Tensor, Tensor)",
    "deform_conv2d": "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, "
                     "SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, "
                     "SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask) -> Tensor",
}

# Bytes of gathered samples one roi_align chunk may hold (rois are taken in
# chunks so that thousands of proposals do not gather gigabytes at once).
_CHUNK_ELEMENTS = 1 << 24


# ------------------------------------------------------------------- checks --

def _check_rois(op, input, rois):
    torch._check(rois.dim() == 2 and rois.size(1) == 5,
                 lambda: f"torchvision::{op}: rois should have shape Tensor[K, 5], got {tuple(rois.shape)}")
    torch._check(input.dim() == 4,
                 lambda: f"torchvision::{op}: input should be 4-D (N, C, H, W), got {input.dim()}-D")
    torch._check(input.dtype == rois.dtype,
                 lambda: f"torchvision::{op}: input ({input.dtype}) and rois ({rois.dtype}) "
                         "should have the same dtype")
    torch._check(input.device == rois.device,
                 lambda: f"torchvision::{op}: input is on {input.device}, rois on {rois.device}")


def _check_batch_index(op, batch, n):
    """rois[:, 0] names an image of the batch: an index out of range is an
    error (torchvision's CPU kernel would read outside the input)."""
    if batch.numel() and bool(((batch < 0) | (batch >= n)).any()):  # one host read
        raise IndexError(f"torchvision::{op}: rois[:, 0] holds a batch index outside [0, {n}) "
                         f"(the input has {n} images)")


# ---------------------------------------------------------------------- nms --

def nms(dets, scores, iou_threshold):
    torch._check(dets.dim() == 2, lambda: f"boxes should be a 2d tensor, got {dets.dim()}D")
    torch._check(dets.size(1) == 4, lambda: f"boxes should have 4 elements in dimension 1, got {dets.size(1)}")
    torch._check(scores.dim() == 1, lambda: f"scores should be a 1d tensor, got {scores.dim()}")
    torch._check(dets.size(0) == scores.size(0),
                 lambda: "boxes and scores should have same number of elements in dimension 0, "
                         f"got {dets.size(0)} and {scores.size(0)}")
    n = dets.size(0)
    if n == 0:
        return torch.empty(0, dtype=torch.long, device=dets.device)
    order = torch.sort(scores, descending=True, stable=True).indices
    boxes = dets.index_select(0, order)
    x1, y1, x2, y2 = boxes.unbind(1)
    area = (x2 - x1) * (y2 - y1)
    w = (torch.minimum(x2[:, None], x2[None, :]) - torch.maximum(x1[:, None], x1[None, :])).clamp(min=0)
    h = (torch.minimum(y2[:, None], y2[None, :]) - torch.maximum(y1[:, None], y1[None, :])).clamp(min=0)
    inter = w * h
    iou = inter / (area[:, None] + area[None, :] - inter)
    # Row i: the later boxes that box i suppresses if it is kept.
    over = torch.triu(iou > iou_threshold, diagonal=1).cpu().numpy()
    import numpy as np

    removed = np.zeros(n, dtype=bool)
    keep = []
    for i in range(n):
        if not removed[i]:
            keep.append(i)
            removed |= over[i]
    return order.index_select(0, torch.tensor(keep, dtype=torch.long).to(dets.device))


# ---------------------------------------------------------------- sampling --

def _bilinear_1d(coord, size, valid):
    """Corner indices and weights along one axis for torchvision's RoIAlign
    interpolation: a sample outside [-1, size] (or NaN) weighs 0, one below
    0 is moved to 0, one past the last pixel to it."""
    inside = (coord >= -1.0) & (coord <= size) & valid
    # Samples that weigh nothing (NaN ones past an empty roi's grid too)
    # read pixel 0, so that every index is in range.
    c = torch.where(inside, coord, torch.zeros_like(coord)).clamp(min=0)
    low = c.floor()
    edge = low >= size - 1
    low = torch.where(edge, torch.full_like(low, size - 1), low)
    c = torch.where(edge, low, c)
    frac = c - low
    low = low.long()
    high = torch.where(edge, low, low + 1)
    zero = torch.zeros_like(frac)
    return low, high, torch.where(inside, 1 - frac, zero), torch.where(inside, frac, zero)


def _sample_grid(rois, spatial_scale, ph, pw, sampling_ratio, offset, clamp_size):
    """Sample coordinates of RoIAlign-style pooling, per roi: y [K, ph, Gh]
    and x [K, pw, Gw] with masks for the adaptive grid, and the divisor."""
    start_x = rois[:, 1] * spatial_scale - offset
    start_y = rois[:, 2] * spatial_scale - offset
    roi_w = rois[:, 3] * spatial_scale - offset - start_x
    roi_h = rois[:, 4] * spatial_scale - offset - start_y
    if clamp_size:
        roi_w = roi_w.clamp(min=1.0)
        roi_h = roi_h.clamp(min=1.0)
    bin_h = roi_h / ph
    bin_w = roi_w / pw
    if sampling_ratio > 0:
        grid_h = torch.full_like(bin_h, float(sampling_ratio))
        grid_w = grid_h
        gh = gw = int(sampling_ratio)
    else:
        grid_h = torch.ceil(roi_h / ph)
        grid_w = torch.ceil(roi_w / pw)
        # The largest grid of any roi: samples past a roi's own are masked.
        gh = max(int(grid_h.max().item()), 0)
        gw = max(int(grid_w.max().item()), 0)

    def axis(start, bin_size, grid, g, n):
        i = torch.arange(g, device=rois.device, dtype=rois.dtype)
        p = torch.arange(n, device=rois.device, dtype=rois.dtype)
        coord = (start[:, None, None] + p[None, :, None] * bin_size[:, None, None]
                 + (i[None, None, :] + 0.5) * bin_size[:, None, None] / grid[:, None, None])
        return coord, (i[None, None, :] < grid[:, None, None]).expand_as(coord)

    y, y_valid = axis(start_y, bin_h, grid_h, gh, ph)
    x, x_valid = axis(start_x, bin_w, grid_w, gw, pw)
    return y, y_valid, x, x_valid, grid_h * grid_w


def _pool_samples(input, batch, y, y_valid, x, x_valid, channel=None):
    """Sum over each bin's samples of the bilinear values: [K, C, ph, pw]
    (or, with `channel` [C', ph, pw], the position-sensitive [K, C', ph, pw],
    each output reading its own input channel)."""
    n, c, height, width = input.shape
    ylo, yhi, wyl, wyh = _bilinear_1d(y, height, y_valid)  # [K, ph, Gh]
    xlo, xhi, wxl, wxh = _bilinear_1d(x, width, x_valid)  # [K, pw, Gw]
    if channel is None:
        feats = input.permute(0, 2, 3, 1)  # N, H, W, C
        b = batch[:, None, None, None, None]

        def at(yi, xi):  # [K, ph, Gh, pw, Gw, C]
            return feats[b, yi[:, :, :, None, None], xi[:, None, None, :, :]]

        def w(a, bb):
            return (a[:, :, :, None, None] * bb[:, None, None, :, :])[..., None]

        total = (w(wyl, wxl) * at(ylo, xlo) + w(wyl, wxh) * at(ylo, xhi)
                 + w(wyh, wxl) * at(yhi, xlo) + w(wyh, wxh) * at(yhi, xhi))
        return total.sum(dim=(2, 4)).permute(0, 3, 1, 2)
    # Position-sensitive: output (c', p, q) reads input channel channel[c', p, q].
    co, ph, pw = channel.shape
    b = batch[:, None, None, None, None, None]
    ch = channel[None, :, :, None, :, None]

    def at_ps(yi, xi):  # [K, C', ph, Gh, pw, Gw]
        return input[b, ch, yi[:, None, :, :, None, None], xi[:, None, None, None, :, :]]

    def w_ps(a, bb):
        return a[:, None, :, :, None, None] * bb[:, None, None, None, :, :]

    total = (w_ps(wyl, wxl) * at_ps(ylo, xlo) + w_ps(wyl, wxh) * at_ps(ylo, xhi)
             + w_ps(wyh, wxl) * at_ps(yhi, xlo) + w_ps(wyh, wxh) * at_ps(yhi, xhi))
    return total.sum(dim=(3, 5))


def _chunks(k, per_roi):
    step = max(1, _CHUNK_ELEMENTS // max(per_roi, 1))
    return [(s, min(s + step, k)) for s in range(0, k, step)]


def _position_sensitive(op, input, rois, ph, pw):
    """PSRoI ops' channel map: output (c', p, q) reads input channel
    (c' * ph + p) * pw + q; returned as [C', ph, pw] and, for each roi, as
    the int32 mapping torchvision returns."""
    c = input.shape[1]
    torch._check(c % (ph * pw) == 0,
                 lambda: f"torchvision::{op}: input channels must be a multiple of "
                         "pooling height * pooling width")
    channel = torch.arange(c, device=input.device).view(c // (ph * pw), ph, pw)
    return channel, channel.to(torch.int32)[None].expand(rois.size(0), -1, -1, -1).contiguous()


def _align_pool(op, input, rois, spatial_scale, ph, pw, sampling_ratio, offset, clamp_size,
                channel=None):
    """RoIAlign (or, with `channel`, PSRoIAlign) of the rois, taken in
    chunks: the per-bin sums of the samples and each roi's sample count."""
    batch = rois[:, 0].long()
    _check_batch_index(op, batch, input.size(0))
    y, yv, x, xv, count = _sample_grid(rois, spatial_scale, ph, pw, sampling_ratio, offset, clamp_size)
    per_roi = (input.size(1) if channel is None else channel.size(0)) * y[0].numel() * x[0].numel()
    outs = [_pool_samples(input, batch[s:e], y[s:e], yv[s:e], x[s:e], xv[s:e], channel)
            for s, e in _chunks(rois.size(0), per_roi)]
    return (outs[0] if len(outs) == 1 else torch.cat(outs)), count


def roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    _check_rois("roi_align", input, rois)
    if rois.size(0) == 0:
        return input.new_zeros(0, input.size(1), pooled_height, pooled_width)
    out, count = _align_pool("roi_align", input, rois, spatial_scale, pooled_height, pooled_width,
                             sampling_ratio, 0.5 if aligned else 0.0, not aligned)
    return out / count.clamp(min=1.0)[:, None, None, None]


def ps_roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio):
    _check_rois("ps_roi_align", input, rois)
    channel, mapping = _position_sensitive("ps_roi_align", input, rois, pooled_height, pooled_width)
    if rois.size(0) == 0:
        return input.new_zeros(0, channel.size(0), pooled_height, pooled_width), mapping
    # PSRoIAlign always shifts by half a pixel and never widens a small roi.
    out, count = _align_pool("ps_roi_align", input, rois, spatial_scale, pooled_height, pooled_width,
                             sampling_ratio, 0.5, False, channel)
    return out / count[:, None, None, None], mapping


# ---------------------------------------------------------------- roi pool --

def _round_half_away(t):
    return torch.sign(t) * torch.floor(t.abs() + 0.5)


def _pool_bins(rois, spatial_scale, inclusive):
    """RoIPool's integer roi: its start (rounded half away from zero) and
    size (at least 1) in each axis; RoIPool counts the end pixel in
    (`inclusive`), PSRoIPool does not."""
    sx = _round_half_away(rois[:, 1] * spatial_scale)
    sy = _round_half_away(rois[:, 2] * spatial_scale)
    ex = _round_half_away(rois[:, 3] * spatial_scale)
    ey = _round_half_away(rois[:, 4] * spatial_scale)
    extra = 1 if inclusive else 0
    roi_w = (ex - sx + extra).clamp(min=1)
    roi_h = (ey - sy + extra).clamp(min=1)
    return roi_w, roi_h, sx, sy


def _bin_window(start, size, bins, limit, dtype):
    """Per roi and bin: [start, end) clipped to [0, limit], and the indices of
    a window as wide as the widest bin, with its mask."""
    bin_size = size / bins
    p = torch.arange(bins, device=start.device, dtype=dtype)
    lo = torch.floor(p[None] * bin_size[:, None]) + start[:, None]
    hi = torch.ceil((p[None] + 1) * bin_size[:, None]) + start[:, None]
    lo = lo.clamp(0, limit).long()
    hi = hi.clamp(0, limit).long()
    span = int((hi - lo).max().item()) if lo.numel() else 0
    span = max(span, 1)
    idx = lo[..., None] + torch.arange(span, device=start.device)
    valid = idx < hi[..., None]
    return idx.clamp(max=limit - 1), valid, lo, hi


def _roi_pool_common(op, input, rois, spatial_scale, ph, pw, channel=None):
    n, c, height, width = input.shape
    batch = rois[:, 0].long()
    _check_batch_index(op, batch, n)
    roi_w, roi_h, sx, sy = _pool_bins(rois, spatial_scale, inclusive=channel is None)
    yi, yv, ylo, yhi = _bin_window(sy, roi_h, ph, height, rois.dtype)  # [K, ph, Sy]
    xi, xv, xlo, xhi = _bin_window(sx, roi_w, pw, width, rois.dtype)  # [K, pw, Sx]
    empty = (yhi <= ylo)[:, :, None] | (xhi <= xlo)[:, None, :]  # [K, ph, pw]
    if channel is None:
        feats = input.permute(0, 2, 3, 1)
        vals = feats[batch[:, None, None, None, None], yi[:, :, :, None, None],
                     xi[:, None, None, :, :]]  # [K, ph, Sy, pw, Sx, C]
        vals = vals.permute(0, 5, 1, 3, 2, 4)  # [K, C, ph, pw, Sy, Sx]
    else:
        vals = input[batch[:, None, None, None, None, None], channel[None, :, :, None, :, None],
                     yi[:, None, :, :, None, None], xi[:, None, None, None, :, :]]  # [K, C', ph, Sy, pw, Sx]
        vals = vals.permute(0, 1, 2, 4, 3, 5)
    mask = (yv[:, :, None, :, None] & xv[:, None, :, None, :])[:, None]  # [K, 1, ph, pw, Sy, Sx]
    return vals, mask, empty, yi, xi


def roi_pool(input, rois, spatial_scale, pooled_height, pooled_width):
    _check_rois("roi_pool", input, rois)
    n, c, height, width = input.shape
    if rois.size(0) == 0:
        return (input.new_zeros(0, c, pooled_height, pooled_width),
                torch.zeros(0, c, pooled_height, pooled_width, dtype=torch.int32, device=input.device))
    vals, mask, empty, yi, xi = _roi_pool_common("roi_pool", input, rois, spatial_scale,
                                                 pooled_height, pooled_width)
    sy, sx = vals.shape[-2:]
    flat = vals.masked_fill(~mask, float("-inf")).flatten(-2)  # [K, C, ph, pw, Sy*Sx]
    # First maximum in row-major order, as the CPU kernel's strict '>' scan.
    best = flat.argmax(dim=-1, keepdim=True)
    out = flat.gather(-1, best).squeeze(-1)
    r, s = best.squeeze(-1) // sx, best.squeeze(-1) % sx
    h = yi[:, None, :, None, :].expand(-1, c, -1, pooled_width, -1).gather(-1, r[..., None]).squeeze(-1)
    w = xi[:, None, None, :, :].expand(-1, c, pooled_height, -1, -1).gather(-1, s[..., None]).squeeze(-1)
    argmax = h * width + w
    empty = empty[:, None].expand_as(out)
    out = torch.where(empty, torch.zeros_like(out), out)
    argmax = torch.where(empty, torch.full_like(argmax, -1), argmax).to(torch.int32)
    return out, argmax


def ps_roi_pool(input, rois, spatial_scale, pooled_height, pooled_width):
    _check_rois("ps_roi_pool", input, rois)
    channel, mapping = _position_sensitive("ps_roi_pool", input, rois, pooled_height, pooled_width)
    if rois.size(0) == 0:
        return input.new_zeros(0, channel.size(0), pooled_height, pooled_width), mapping
    vals, mask, empty, _, _ = _roi_pool_common("ps_roi_pool", input, rois, spatial_scale,
                                               pooled_height, pooled_width, channel)
    total = vals.masked_fill(~mask, 0).sum(dim=(-2, -1))
    area = mask.sum(dim=(-2, -1)).to(total.dtype)
    out = torch.where(empty[:, None], torch.zeros_like(total), total / area.clamp(min=1))
    return out, mapping


# ----------------------------------------------------------- deform conv2d --

def deform_conv2d(input, weight, offset, mask, bias, stride_h, stride_w, pad_h, pad_w,
                  dilation_h, dilation_w, groups, offset_groups, use_mask):
    torch._check(input.dim() == 4, lambda: f"torchvision::deform_conv2d: input must be 4-D, got {input.dim()}-D")
    b, c, height, width = input.shape
    cout, cin_g, kh, kw = weight.shape
    torch._check(c % offset_groups == 0 and offset.size(1) == offset_groups * 2 * kh * kw,
                 lambda: f"torchvision::deform_conv2d: offset has {offset.size(1)} channels, expected "
                         f"offset_groups * 2 * {kh} * {kw} = {offset_groups * 2 * kh * kw}")
    torch._check(c == cin_g * groups,
                 lambda: f"torchvision::deform_conv2d: input has {c} channels, weight expects "
                         f"{cin_g} * {groups} groups")
    oh = (height + 2 * pad_h - (dilation_h * (kh - 1) + 1)) // stride_h + 1
    ow = (width + 2 * pad_w - (dilation_w * (kw - 1) + 1)) // stride_w + 1
    torch._check(offset.shape[2:] == (oh, ow),
                 lambda: f"torchvision::deform_conv2d: offset spatial size {tuple(offset.shape[2:])} "
                         f"does not match the output's {(oh, ow)}")
    kk = kh * kw
    dev, dt = input.device, input.dtype
    off = offset.view(b, offset_groups, kk, 2, oh, ow)
    i = torch.arange(kh, device=dev, dtype=dt).repeat_interleave(kw) * dilation_h  # [kk]
    j = torch.arange(kw, device=dev, dtype=dt).repeat(kh) * dilation_w
    base_y = torch.arange(oh, device=dev, dtype=dt) * stride_h - pad_h
    base_x = torch.arange(ow, device=dev, dtype=dt) * stride_w - pad_w
    y = base_y[None, None, None, :, None] + i[None, None, :, None, None] + off[:, :, :, 0]
    x = base_x[None, None, None, None, :] + j[None, None, :, None, None] + off[:, :, :, 1]
    # torchvision's deformable sampling: zero outside (-1, size), each corner
    # read only where it lies inside the image.
    inside = (y > -1) & (y < height) & (x > -1) & (x < width)
    y0, x0 = y.floor(), x.floor()
    ly, lx = y - y0, x - x0
    y0, x0 = y0.long(), x0.long()
    cg = c // offset_groups
    src = input.reshape(b, offset_groups, cg, height * width)
    samples = None
    for dy, dx, wgt in ((0, 0, (1 - ly) * (1 - lx)), (0, 1, (1 - ly) * lx),
                        (1, 0, ly * (1 - lx)), (1, 1, ly * lx)):
        yy, xx = y0 + dy, x0 + dx
        ok = inside & (yy >= 0) & (yy < height) & (xx >= 0) & (xx < width)
        idx = (yy.clamp(0, height - 1) * width + xx.clamp(0, width - 1)).flatten(2)  # [B, G, kk*oh*ow]
        vals = src.gather(3, idx[:, :, None, :].expand(-1, -1, cg, -1))
        term = vals * torch.where(ok, wgt, torch.zeros_like(wgt)).flatten(2)[:, :, None, :]
        samples = term if samples is None else samples + term
    samples = samples.view(b, offset_groups, cg, kk, oh * ow)
    if use_mask:
        samples = samples * mask.view(b, offset_groups, 1, kk, oh * ow)
    columns = samples.reshape(b, groups, cin_g * kk, oh * ow)
    out = torch.einsum("gok,bgkl->bgol", weight.reshape(groups, cout // groups, cin_g * kk), columns)
    out = out.reshape(b, cout, oh, ow)
    return out + bias.view(1, cout, 1, 1)


# ------------------------------------------------------------ registration --

_KERNELS = {
    "nms": (nms, False),
    "roi_align": (roi_align, True),
    "roi_pool": (roi_pool, True),
    "ps_roi_align": (ps_roi_align, True),
    "ps_roi_pool": (ps_roi_pool, True),
    "deform_conv2d": (deform_conv2d, True),
}


def _cpu_unavailable(name):
    def kernel(*args, **kwargs):
        raise NotImplementedError(
            f"torchvision::{name} has no CPU kernel here: torchvision's C++ library failed to load "
            f"({_load_error}). Install the torchvision build that matches torch {torch.__version__}; "
            "torch_tpu declared torchvision's operators so that torchvision imports and its ops run on tpu.")
    return kernel


def before_import(spec) -> None:
    """Runs before torchvision's first import: declares its operators when
    its C++ library cannot be loaded (see the module's docstring)."""
    global _load_error
    if hasattr(torch.ops.torchvision, "nms"):
        return
    folder = (spec.submodule_search_locations or [None])[0]
    path = None
    if folder:
        for name in sorted(os.listdir(folder)):
            if name.startswith("_C.") and name.endswith((".so", ".pyd")):
                path = os.path.join(folder, name)
    if path is None:
        _load_error = "torchvision has no _C library"
    else:
        try:
            torch.ops.load_library(path)
            return
        except OSError as e:
            _load_error = str(e).splitlines()[0]
    lib = torch.library.Library("torchvision", "DEF")
    for name, schema in _SCHEMAS.items():
        lib.define(schema)
        lib.impl(name, _cpu_unavailable(name), "CPU")
    _libs.append(lib)


def install(module=None) -> None:
    """Registers the tpu kernels (after torchvision's import)."""
    global _installed
    if _installed or not hasattr(torch.ops.torchvision, "nms"):
        return
    _installed = True
    lib = torch.library.Library("torchvision", "IMPL")
    for name, (fn, differentiable) in _KERNELS.items():
        if not hasattr(torch.ops.torchvision, name):
            continue
        lib.impl(name, fn, _DEVICE)
        if differentiable:
            lib.impl(name, fn, "Autograd" + _DEVICE)
    _libs.append(lib)
    if _load_error is not None and module is not None:
        # torchvision checks its own load before calling an op; the ops are
        # declared here, so let the calls through.
        import torchvision.extension as ext

        ext._has_ops = lambda: True
