"""torchvision.ops on tpu (torch_tpu/integrations/torchvision.py) against
CPU: nms, roi_align, roi_pool, ps_roi_align, ps_roi_pool and deform_conv2d,
values and gradients, through torchvision's public functions.

The CPU side is torchvision's own CPU kernels where its C++ library loads,
and always the references below: each op written from its definition in a
different way from the tpu kernels (a greedy loop for nms, one
``grid_sample`` per roi for the RoIAlign family, Python loops over bins for
the RoIPool family, ``grid_sample`` per kernel tap for deform_conv2d), so a
shared mistake would have to be made twice. Then a torchvision detector in
eval on tpu against the same detector on the CPU running the references.
"""

import math

import pytest
import torch
import torch.nn.functional as F

torchvision = pytest.importorskip("torchvision")

from torchvision import ops  # noqa: E402

import torch_tpu  # noqa: E402
from torch_tpu.integrations import torchvision as tv_tpu  # noqa: E402

HAS_CPU_KERNELS = tv_tpu._load_error is None


def _f32(x):
    return torch.tensor(x, dtype=torch.float32)


# --------------------------------------------------------------- references --

def ref_nms(boxes, scores, thr):
    order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))
    keep = []
    for i in order:
        ok = True
        for j in keep:
            a, b = boxes[i], boxes[j]
            iw = max(0.0, float(min(a[2], b[2]) - max(a[0], b[0])))
            ih = max(0.0, float(min(a[3], b[3]) - max(a[1], b[1])))
            inter = iw * ih
            union = float((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1])) - inter
            if inter / union > thr:
                ok = False
                break
        if ok:
            keep.append(i)
    return torch.tensor(keep, dtype=torch.long)


def _sample_points(roi, scale, ph, pw, ratio, offset, clamp):
    """Per-axis sample coordinates of one roi (float32, as the CPU kernel)."""
    x1, y1, x2, y2 = (_f32(float(v)) * _f32(scale) - _f32(offset) for v in roi[1:])
    w, h = x2 - x1, y2 - y1
    if clamp:
        w, h = torch.clamp(w, min=1.0), torch.clamp(h, min=1.0)
    bh, bw = h / ph, w / pw
    gh = ratio if ratio > 0 else int(math.ceil(float(h / ph)))
    gw = ratio if ratio > 0 else int(math.ceil(float(w / pw)))
    ys = [[y1 + p * bh + (i + 0.5) * bh / gh for i in range(gh)] for p in range(ph)]
    xs = [[x1 + q * bw + (j + 0.5) * bw / gw for j in range(gw)] for q in range(pw)]
    return ys, xs, gh, gw


def _interp(img, ys, xs):
    """RoIAlign bilinear values of img [C, H, W] at the grid ys x xs
    (zero outside [-1, size], clamped to the image inside), by grid_sample."""
    c, height, width = img.shape
    if not ys or not xs:  # a roi of no extent has no samples
        return img.new_zeros(c, len(ys), len(xs))
    y = torch.stack([v.reshape(()) for v in ys])
    x = torch.stack([v.reshape(()) for v in xs])
    oky = (y >= -1) & (y <= height)
    okx = (x >= -1) & (x <= width)
    yc, xc = y.clamp(0, height - 1), x.clamp(0, width - 1)
    gy = yc / max(height - 1, 1) * 2 - 1 if height > 1 else torch.zeros_like(yc)
    gx = xc / max(width - 1, 1) * 2 - 1 if width > 1 else torch.zeros_like(xc)
    grid = torch.stack(torch.broadcast_tensors(gx[None, :], gy[:, None]), dim=-1)[None]
    vals = F.grid_sample(img[None], grid, mode="bilinear", align_corners=True)[0]
    return vals * (oky[:, None] & okx[None, :])


def _roi_samples(x, roi, scale, ph, pw, ratio, offset, clamp):
    """All bilinear samples of one roi in one grid_sample: [C, ph, pw] sums
    over each bin's grid, and the grid's size."""
    ys, xs, gh, gw = _sample_points(roi, scale, ph, pw, ratio, offset, clamp)
    vals = _interp(x[int(roi[0])], [v for row in ys for v in row], [v for row in xs for v in row])
    return vals.view(x.shape[1], ph, gh, pw, gw).sum(dim=(2, 4)), gh * gw


def ref_roi_align(x, rois, scale, ph, pw, ratio, aligned):
    out = []
    for roi in rois:
        sums, n = _roi_samples(x, roi, scale, ph, pw, ratio, 0.5 if aligned else 0.0, not aligned)
        out.append(sums / max(n, 1))
    return torch.stack(out) if out else x.new_zeros(0, x.shape[1], ph, pw)


def ref_ps_roi_align(x, rois, scale, ph, pw, ratio):
    cout = x.shape[1] // (ph * pw)
    out = []
    for roi in rois:
        sums, n = _roi_samples(x, roi, scale, ph, pw, ratio, 0.5, False)
        # Output (c, p, q) reads input channel (c * ph + p) * pw + q.
        sums = sums.view(cout, ph, pw, ph, pw)
        p, q = torch.meshgrid(torch.arange(ph), torch.arange(pw), indexing="ij")
        out.append(sums[:, p, q, p, q] / n)
    return torch.stack(out)


def _pool_bounds(roi, scale, ph, pw, height, width, inclusive):
    def rnd(v):  # std::round: halves away from zero
        v = float(_f32(float(v)) * _f32(scale))
        return int(math.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1)
    sx, sy, ex, ey = (rnd(v) for v in roi[1:])
    extra = 1 if inclusive else 0
    rw, rh = max(ex - sx + extra, 1), max(ey - sy + extra, 1)
    bh, bw = _f32(rh) / ph, _f32(rw) / pw
    for p in range(ph):
        for q in range(pw):
            hs = min(max(int(math.floor(float(p * bh))) + sy, 0), height)
            he = min(max(int(math.ceil(float((p + 1) * bh))) + sy, 0), height)
            ws = min(max(int(math.floor(float(q * bw))) + sx, 0), width)
            we = min(max(int(math.ceil(float((q + 1) * bw))) + sx, 0), width)
            yield p, q, hs, he, ws, we


def ref_roi_pool(x, rois, scale, ph, pw):
    k, c, height, width = rois.shape[0], x.shape[1], x.shape[2], x.shape[3]
    out, arg = [], torch.full((k, c, ph, pw), -1, dtype=torch.int32)
    for r, roi in enumerate(rois):
        img = x[int(roi[0])]
        cells = {}
        for p, q, hs, he, ws, we in _pool_bounds(roi, scale, ph, pw, height, width, True):
            if he <= hs or we <= ws:
                cells[p, q] = img.new_zeros(c)
                continue
            region = img[:, hs:he, ws:we].reshape(c, -1)
            cells[p, q] = region.amax(dim=1)
            i = region.argmax(dim=1)
            arg[r, :, p, q] = ((hs + i // (we - ws)) * width + ws + i % (we - ws)).to(torch.int32)
        out.append(torch.stack([torch.stack([cells[p, q] for q in range(pw)], -1) for p in range(ph)], -2))
    return torch.stack(out), arg


def ref_ps_roi_pool(x, rois, scale, ph, pw):
    c, height, width = x.shape[1:]
    cout = c // (ph * pw)
    out = []
    for roi in rois:
        img = x[int(roi[0])]
        o = [[[None] * pw for _ in range(ph)] for _ in range(cout)]
        for p, q, hs, he, ws, we in _pool_bounds(roi, scale, ph, pw, height, width, False):
            for co in range(cout):
                ch = (co * ph + p) * pw + q
                empty = he <= hs or we <= ws
                o[co][p][q] = img.new_zeros(()) if empty else img[ch, hs:he, ws:we].mean()
        out.append(torch.stack([torch.stack([torch.stack(r) for r in m]) for m in o]))
    return torch.stack(out)


def ref_deform_conv2d(x, offset, weight, bias, stride, padding, dilation, mask):
    """One grid_sample per kernel tap (zeros padding is torchvision's
    deformable interpolation), then the convolution as a matrix product."""
    b, c, height, width = x.shape
    cout, cin_g, kh, kw = weight.shape
    groups = c // cin_g
    oh, ow = offset.shape[2:]
    og = offset.shape[1] // (2 * kh * kw)
    cg = c // og
    base_y = torch.arange(oh, dtype=x.dtype)[:, None] * stride[0] - padding[0]
    base_x = torch.arange(ow, dtype=x.dtype)[None, :] * stride[1] - padding[1]
    taps = []
    for i in range(kh):
        for j in range(kw):
            t = i * kw + j
            per_group = []
            for g in range(og):
                y = base_y + i * dilation[0] + offset[:, g * 2 * kh * kw + 2 * t]
                xx = base_x + j * dilation[1] + offset[:, g * 2 * kh * kw + 2 * t + 1]
                grid = torch.stack([xx / (width - 1) * 2 - 1, y / (height - 1) * 2 - 1], dim=-1)
                v = F.grid_sample(x[:, g * cg:(g + 1) * cg], grid, mode="bilinear",
                                  padding_mode="zeros", align_corners=True)
                if mask is not None:
                    v = v * mask[:, g * kh * kw + t][:, None]
                per_group.append(v)
            taps.append(torch.cat(per_group, 1))  # [B, C, oh, ow]
    cols = torch.stack(taps, 2).reshape(b, groups, cin_g * kh * kw, oh * ow)
    w = weight.reshape(groups, cout // groups, cin_g * kh * kw)
    out = torch.stack([w[g] @ cols[:, g] for g in range(groups)], 1).reshape(b, cout, oh, ow)
    return out + bias.view(1, -1, 1, 1)


# -------------------------------------------------------------------- data --

def _boxes(n, size=40.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * size
    wh = torch.rand(n, 2, generator=g) * size / 2 + 0.5
    return torch.cat([xy, xy + wh], 1)


def _rois(k, n_images, h, w, scale, seed=0):
    g = torch.Generator().manual_seed(seed)
    b = _boxes(k, size=max(h, w) / scale, seed=seed)
    # Some rois reach past the image, one is degenerate (a point).
    b[0] = torch.tensor([-3.0, -2.0, w / scale + 2, h / scale + 1])
    b[1] = torch.tensor([5.0, 5.0, 5.0, 5.0])
    idx = torch.randint(0, n_images, (k, 1), generator=g).float()
    return torch.cat([idx, b], 1)


def _close(actual, expected, tol=1e-5):
    torch.testing.assert_close(actual.cpu(), expected, rtol=tol, atol=tol)


def _values_and_input_grad(out, ref, xt, x):
    """The tpu output against the reference, then the input gradients of
    the same random output gradient."""
    _close(out.detach(), ref.detach())
    g = torch.randn_like(ref)
    out.backward(g.to("tpu"))
    ref.backward(g)
    _close(xt.grad, x.grad)


# ------------------------------------------------------------------- tests --

@pytest.mark.parametrize("thr", [0.0, 0.3, 0.7])
def test_nms(thr, seed):
    boxes = _boxes(60, seed=seed)
    scores = torch.rand(60)
    scores[5] = scores[9]  # a tie: the lower index first, as a stable sort
    keep = ops.nms(boxes.to("tpu"), scores.to("tpu"), thr)
    assert keep.device.type == "tpu" and keep.dtype == torch.long
    assert keep.cpu().tolist() == ref_nms(boxes, scores, thr).tolist()
    if HAS_CPU_KERNELS:
        assert keep.cpu().tolist() == ops.nms(boxes, scores, thr).tolist()


def test_batched_nms_and_empty(seed):
    boxes = _boxes(40, seed=seed)
    scores, labels = torch.rand(40), torch.randint(0, 3, (40,))
    keep = ops.batched_nms(boxes.to("tpu"), scores.to("tpu"), labels.to("tpu"), 0.5).cpu()
    expected = []
    for lab in range(3):  # per class, then by score
        idx = (labels == lab).nonzero().flatten()
        expected += idx[ref_nms(boxes[idx], scores[idx], 0.5)].tolist()
    assert sorted(keep.tolist()) == sorted(expected)
    assert scores[keep].tolist() == sorted(scores[keep].tolist(), reverse=True)
    empty = ops.nms(torch.zeros(0, 4, device="tpu"), torch.zeros(0, device="tpu"), 0.5)
    assert empty.shape == (0,) and empty.dtype == torch.long


@pytest.mark.parametrize("aligned,ratio,scale", [(False, -1, 1.0), (True, 2, 0.5), (True, -1, 0.25)])
def test_roi_align(aligned, ratio, scale, seed):
    x = torch.randn(2, 3, 12, 14, requires_grad=True)
    rois = _rois(6, 2, 12, 14, scale, seed=seed)
    xt = x.detach().to("tpu").requires_grad_()
    out = ops.roi_align(xt, rois.to("tpu"), (3, 4), scale, ratio, aligned)
    ref = ref_roi_align(x, rois, scale, 3, 4, ratio, aligned)
    _values_and_input_grad(out, ref, xt, x)
    if HAS_CPU_KERNELS:
        _close(out.detach(), ops.roi_align(x.detach(), rois, (3, 4), scale, ratio, aligned))


def test_roi_align_many_rois_in_chunks(monkeypatch, seed):
    monkeypatch.setattr(tv_tpu, "_CHUNK_ELEMENTS", 3 * 2 * 2 * 2 * 2 * 5)  # 5 rois a chunk
    x = torch.randn(1, 3, 10, 10)
    rois = _rois(23, 1, 10, 10, 1.0, seed=seed)
    out = ops.roi_align(x.to("tpu"), rois.to("tpu"), 2, 1.0, 2, False)
    _close(out, ref_roi_align(x, rois, 1.0, 2, 2, 2, False))


def test_roi_pool(seed):
    x = torch.randn(2, 3, 11, 13, requires_grad=True)
    rois = _rois(6, 2, 11, 13, 0.5, seed=seed)
    xt = x.detach().to("tpu").requires_grad_()
    out = ops.roi_pool(xt, rois.to("tpu"), (3, 2), 0.5)
    ref, ref_arg = ref_roi_pool(x, rois, 0.5, 3, 2)
    _, arg = torch.ops.torchvision.roi_pool(xt.detach(), rois.to("tpu"), 0.5, 3, 2)
    assert torch.equal(arg.cpu(), ref_arg)
    _values_and_input_grad(out, ref, xt, x)
    if HAS_CPU_KERNELS:
        _close(out.detach(), ops.roi_pool(x.detach(), rois, (3, 2), 0.5))


@pytest.mark.parametrize("ratio", [-1, 2])
def test_ps_roi_align(ratio, seed):
    x = torch.randn(2, 2 * 3 * 2, 10, 12, requires_grad=True)
    rois = _rois(5, 2, 10, 12, 1.0, seed=seed)
    rois[1, 3:] += 2  # PSRoIAlign does not widen a point roi: keep it a box
    xt = x.detach().to("tpu").requires_grad_()
    out = ops.ps_roi_align(xt, rois.to("tpu"), (3, 2), 1.0, ratio)
    ref = ref_ps_roi_align(x, rois, 1.0, 3, 2, ratio)
    _values_and_input_grad(out, ref, xt, x)
    if HAS_CPU_KERNELS:
        _close(out.detach(), ops.ps_roi_align(x.detach(), rois, (3, 2), 1.0, ratio))


def test_ps_roi_pool(seed):
    x = torch.randn(2, 2 * 2 * 2, 9, 11, requires_grad=True)
    rois = _rois(5, 2, 9, 11, 1.0, seed=seed)
    xt = x.detach().to("tpu").requires_grad_()
    out = ops.ps_roi_pool(xt, rois.to("tpu"), 2, 1.0)
    ref = ref_ps_roi_pool(x, rois, 1.0, 2, 2)
    _values_and_input_grad(out, ref, xt, x)


@pytest.mark.parametrize("groups,offset_groups,use_mask,stride,dilation",
                         [(1, 1, True, 1, 1), (2, 2, False, 2, 1), (1, 2, True, 1, 2)])
def test_deform_conv2d(groups, offset_groups, use_mask, stride, dilation, seed, highest_matmul_precision):
    b, c, h, w, cout, k = 2, 4, 9, 8, 6, 3
    pad = dilation
    oh = (h + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    ow = (w + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    cpu = dict(x=torch.randn(b, c, h, w), offset=torch.randn(b, offset_groups * 2 * k * k, oh, ow) * 2,
               weight=torch.randn(cout, c // groups, k, k), bias=torch.randn(cout),
               mask=torch.rand(b, offset_groups * k * k, oh, ow) if use_mask else None)
    cpu = {n: (None if t is None else t.requires_grad_()) for n, t in cpu.items()}
    tpu = {n: (None if t is None else t.detach().to("tpu").requires_grad_()) for n, t in cpu.items()}

    def run(t, fn):
        return fn(t["x"], t["offset"], t["weight"], t["bias"], (stride, stride), (pad, pad),
                  (dilation, dilation), t["mask"])

    out = run(tpu, lambda x, o, wt, bs, s, p, d, m: ops.deform_conv2d(x, o, wt, bs, s, p, d, m))
    ref = run(cpu, ref_deform_conv2d)
    _close(out.detach(), ref.detach(), 1e-4)
    g = torch.randn_like(ref)
    out.backward(g.to("tpu"))
    ref.backward(g)
    for name, t in cpu.items():
        if t is not None:
            _close(tpu[name].grad, t.grad, 1e-4)


def test_bad_input_raises():
    x = torch.randn(1, 2, 6, 6, device="tpu")
    with pytest.raises(IndexError, match="batch index"):
        ops.roi_align(x, torch.tensor([[3.0, 0, 0, 2, 2]], device="tpu"), 2)
    with pytest.raises(RuntimeError, match=r"rois should have shape"):
        torch.ops.torchvision.roi_align(x, torch.zeros(2, 4, device="tpu"), 1.0, 2, 2, -1, False)
    with pytest.raises(RuntimeError, match="multiple of pooling"):
        ops.ps_roi_align(x, torch.tensor([[0.0, 0, 0, 2, 2]], device="tpu"), 2)
    with pytest.raises(RuntimeError, match="boxes should have 4 elements"):
        ops.nms(torch.zeros(3, 5, device="tpu"), torch.zeros(3, device="tpu"), 0.5)


@pytest.mark.skipif(HAS_CPU_KERNELS, reason="torchvision's own CPU kernels are loaded")
def test_cpu_without_torchvision_library_names_the_cause():
    with pytest.raises(NotImplementedError, match="torchvision's C\\+\\+ library failed to load"):
        ops.nms(torch.zeros(2, 4), torch.zeros(2), 0.5)


@pytest.fixture
def cpu_kernels():
    """torchvision's CPU kernels, or (where its C++ library is missing) the
    references above registered for the CPU."""
    if HAS_CPU_KERNELS:
        yield
        return
    lib = torch.library.Library("torchvision", "IMPL")
    lib.impl("nms", lambda d, s, t: ref_nms(d, s, t), "CPU", allow_override=True)
    lib.impl("roi_align", lambda *a: ref_roi_align(*a), "CPU", allow_override=True)
    try:
        yield
    finally:
        lib._destroy()


def test_faster_rcnn_eval(cpu_kernels, highest_matmul_precision):
    """A detector end to end: backbone, RPN (nms), MultiScaleRoIAlign
    (roi_align per pyramid level), box head, per-class nms."""
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn

    model = fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=4, min_size=96, max_size=96,
        rpn_pre_nms_top_n_test=60, rpn_post_nms_top_n_test=24, box_detections_per_img=12,
        box_score_thresh=0.0).eval()
    with torch.no_grad():  # random heads score every box alike: spread them
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    images = [torch.rand(3, 96, 80), torch.rand(3, 72, 96)]
    with torch.no_grad():
        expected = model(images)
        got = model.to("tpu")([im.to("tpu") for im in images])
    for g, e in zip(got, expected):
        assert len(e["boxes"]) > 0
        assert g["labels"].cpu().tolist() == e["labels"].tolist()
        _close(g["boxes"], e["boxes"], 1e-4)
        _close(g["scores"], e["scores"], 1e-4)


def test_import_after_an_availability_check():
    """Libraries probe with importlib.util.find_spec before importing
    (transformers does): the operators must still be declared in time."""
    import subprocess
    import sys

    code = ("import importlib.util, torch_tpu\n"
            "assert importlib.util.find_spec('torchvision') is not None\n"
            "import torchvision.ops, torch\n"
            "b = torch.tensor([[0., 0, 4, 4], [1, 1, 5, 5]], device='tpu')\n"
            "print(torchvision.ops.nms(b, torch.tensor([0.9, 0.8], device='tpu'), 0.1).tolist())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("[0]"), r.stderr[-2000:]
