"""tpu kernels for the FBGEMM ops that TorchRec's sparse types call
(``KeyedJaggedTensor``, ``JaggedTensor``, ``KeyedTensor``, the embedding
modules), written as compositions of ATen ops. FBGEMM (``fbgemm-gpu-cpu``)
registers these ops for CPU and CUDA only; its schemas are defined when
``fbgemm_gpu`` is imported, and these kernels are registered for tpu then.

Sizes that depend on the data (the total length of permuted features when
the caller does not pass it) are read from the device, as on CUDA."""

import torch

_lib = None


def _complete_cumsum(t):
    """[..., N] -> [..., N+1]: 0, t0, t0+t1, ... along the last dim."""
    zero = torch.zeros(t.shape[:-1] + (1,), dtype=t.dtype, device=t.device)
    return torch.cat([zero, torch.cumsum(t, dim=-1).to(t.dtype)], dim=-1)


def asynchronous_complete_cumsum(t):
    return _complete_cumsum(t)


def asynchronous_exclusive_cumsum(t):
    return torch.cumsum(t, dim=-1).to(t.dtype) - t


def asynchronous_inclusive_cumsum(t):
    return torch.cumsum(t, dim=-1).to(t.dtype)


def _segment_index(starts, lengths, total=None):
    """The positions of segments [starts[j], starts[j] + lengths[j]), in
    order, as one index vector of `total` (their summed length) entries."""
    lengths = lengths.long()
    if total is None:
        total = int(lengths.sum())
    out_starts = _complete_cumsum(lengths)[:-1]
    src = torch.repeat_interleave(starts.long(), lengths, output_size=total)
    dst = torch.repeat_interleave(out_starts, lengths, output_size=total)
    return src + torch.arange(total, device=lengths.device) - dst


def _permute_sparse(permute, lengths, values, weights, permuted_lengths_sum):
    """Features (rows of lengths [T, B]) reordered by `permute`, with their
    values and weights."""
    permute = permute.long()
    feature_lengths = lengths.sum(1)
    offsets = _complete_cumsum(feature_lengths)
    index = _segment_index(offsets[:-1].index_select(0, permute),
                           feature_lengths.index_select(0, permute), permuted_lengths_sum)
    permuted_weights = None if weights is None else weights.index_select(0, index)
    return lengths.index_select(0, permute), values.index_select(0, index), permuted_weights


def permute_2D_sparse_data(permute, lengths, values, weights=None, permuted_lengths_sum=None):
    return _permute_sparse(permute, lengths, values, weights, permuted_lengths_sum)


def permute_2D_sparse_data_input1D(permute, lengths, values, stride, weights=None,
                                   permuted_lengths_sum=None):
    plengths, pvalues, pweights = _permute_sparse(permute, lengths.view(-1, stride), values,
                                                  weights, permuted_lengths_sum)
    return plengths.reshape(-1), pvalues, pweights


def permute_1D_sparse_data(permute, lengths, values, weights=None, permuted_lengths_sum=None):
    plengths, pvalues, pweights = _permute_sparse(permute, lengths.view(-1, 1), values, weights,
                                                  permuted_lengths_sum)
    return plengths.reshape(-1), pvalues, pweights


def segment_sum_csr(batch_size, csr_seg, values):
    """out[i] = sum(values[csr_seg[i] * batch_size : csr_seg[i + 1] * batch_size])."""
    bounds = csr_seg.long() * batch_size
    n = bounds.numel() - 1
    position = torch.arange(values.numel(), device=values.device)
    segment = torch.searchsorted(bounds, position, right=True) - 1
    inside = (position >= bounds[0]) & (position < bounds[-1])
    summed = torch.where(inside, values, torch.zeros((), dtype=values.dtype, device=values.device))
    out = torch.zeros(n, dtype=values.dtype, device=values.device)
    return out.index_add(0, segment.clamp(0, max(n - 1, 0)), summed)


def permute_pooled_embs(pooled_embs, offset_dim_list, permute_list, inv_offset_dim_list,
                        inv_permute_list):
    """Column blocks [offset_dim_list[p], offset_dim_list[p + 1]) of dim 1,
    in the order of permute_list."""
    p = permute_list.long()
    starts = offset_dim_list[:-1].index_select(0, p)
    widths = (offset_dim_list[1:] - offset_dim_list[:-1]).index_select(0, p)
    return pooled_embs.index_select(1, _segment_index(starts, widths, pooled_embs.shape[1]))


def group_index_select_dim0(input_group, indices_group):
    return [x.index_select(0, i) for x, i in zip(input_group, indices_group, strict=True)]


def _jagged_positions(offsets, max_length, device):
    """For [B, max_length] padded slots: the jagged row of each slot and
    whether the slot holds a value (sequences longer than max_length are cut)."""
    starts = offsets[:-1].long()
    lengths = offsets[1:].long() - starts
    pos = torch.arange(max_length, device=device)
    return starts.unsqueeze(1) + pos, pos < lengths.unsqueeze(1)


def jagged_to_padded_dense_forward(values, offsets, max_lengths, padding_value=0.0):
    if len(offsets) != 1:
        raise NotImplementedError("fbgemm::jagged_to_padded_dense_forward on tpu: one jagged "
                                  f"dimension is supported, got {len(offsets)}")
    length = int(max_lengths[0])
    rows, valid = _jagged_positions(offsets[0], length, values.device)
    batch = rows.shape[0]
    flat = values if values.dim() > 1 else values.unsqueeze(1)
    pad = torch.full((batch, length) + flat.shape[1:], padding_value, dtype=values.dtype,
                     device=values.device)
    if flat.shape[0] > 0:
        picked = flat.index_select(0, rows.clamp(0, flat.shape[0] - 1).reshape(-1))
        picked = picked.reshape((batch, length) + flat.shape[1:])
        mask = valid.reshape(valid.shape + (1,) * (flat.dim() - 1))
        pad = torch.where(mask, picked, pad)
    return pad if values.dim() > 1 else pad.squeeze(-1)


def jagged_to_padded_dense_backward(grad_output, offsets, total_L):
    length = grad_output.shape[1]
    rows, valid = _jagged_positions(offsets[0], length, grad_output.device)
    total = int(total_L)
    # Padding slots go to one extra row, dropped after.
    target = torch.where(valid, rows, torch.full_like(rows, total)).reshape(-1)
    flat = grad_output.reshape((-1,) + grad_output.shape[2:])
    out = torch.zeros((total + 1,) + grad_output.shape[2:], dtype=grad_output.dtype,
                      device=grad_output.device)
    return out.index_add(0, target, flat)[:total]


_KERNELS = {
    "asynchronous_complete_cumsum": asynchronous_complete_cumsum,
    "asynchronous_exclusive_cumsum": asynchronous_exclusive_cumsum,
    "asynchronous_inclusive_cumsum": asynchronous_inclusive_cumsum,
    "permute_2D_sparse_data": permute_2D_sparse_data,
    "permute_2D_sparse_data_input1D": permute_2D_sparse_data_input1D,
    "permute_1D_sparse_data": permute_1D_sparse_data,
    "segment_sum_csr": segment_sum_csr,
    "permute_pooled_embs": permute_pooled_embs,
    "jagged_to_padded_dense_forward": jagged_to_padded_dense_forward,
    "jagged_to_padded_dense_backward": jagged_to_padded_dense_backward,
}


def install(_module=None) -> None:
    """Registers the kernels for tpu (once fbgemm_gpu has defined the ops)."""
    global _lib
    if _lib is not None:
        return
    lib = torch.library.Library("fbgemm", "IMPL")
    for name, fn in _KERNELS.items():
        if hasattr(torch.ops.fbgemm, name):
            lib.impl(name, fn, "PrivateUse1")
    # FBGEMM gives this op autograd for CPU only: the tpu kernel sits at the
    # autograd key, so autograd records the index_selects themselves.
    if hasattr(torch.ops.fbgemm, "group_index_select_dim0"):
        lib.impl("group_index_select_dim0", group_index_select_dim0, "AutogradPrivateUse1")
    _lib = lib
