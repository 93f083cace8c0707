// Sparse COO kernels that CPU and CUDA write separately, here composed of
// dense tpu ops on the indices and values: coalesce (a unique over the
// linearised indices and an index_add of the values), add (sparse + sparse
// concatenates, as CUDA does, and leaves the result uncoalesced; dense +
// sparse is an accumulating index_put), mul (an intersection of the
// coalesced operands through searchsorted, or a scale by a dense tensor
// read at the sparse indices), and dense -> sparse.
//
// Results whose number of entries depends on the data (coalesce, the
// intersection) read that count on the host, as CUDA's kernels do.
#include <ATen/ExpandUtils.h>
#include <ATen/SparseTensorImpl.h>
#include <ATen/native/Resize.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/ops/_to_sparse_native.h>
#include <ATen/ops/_to_sparse_ops.h>
#include <torch/library.h>

#include "aten/kernel_helpers.h"

namespace tpu::ops {

namespace {

at::Tensor NewSparse(const at::Tensor& indices, const at::Tensor& values, at::IntArrayRef sizes,
                     int64_t sparse_dim, bool coalesced) {
  at::Tensor r = at::_sparse_coo_tensor_with_dims_and_tensors(
      sparse_dim, static_cast<int64_t>(sizes.size()) - sparse_dim, sizes, indices, values,
      values.options().layout(c10::kSparse), /*is_coalesced=*/coalesced);
  return r;
}

// Makes `out` (a sparse tensor) hold `indices` and `values` with `sizes`.
at::Tensor& SetSparse(at::Tensor& out, const at::Tensor& indices, const at::Tensor& values,
                      at::IntArrayRef sizes, int64_t sparse_dim, bool coalesced) {
  out.sparse_resize_(sizes, sparse_dim, static_cast<int64_t>(sizes.size()) - sparse_dim);
  at::sparse::alias_into_sparse(out, indices, values);
  out._coalesced_(coalesced);
  return out;
}

// The row-major linear position of each index column over the sparse dims.
// (ATen's flatten_indices goes through a CPU/CUDA dispatch stub.)
at::Tensor Linearise(const at::Tensor& indices, at::IntArrayRef sparse_sizes) {
  const int64_t k = static_cast<int64_t>(sparse_sizes.size());
  if (k == 1) return indices.select(0, 0).clone();
  std::vector<int64_t> strides(k);
  int64_t stride = 1;
  for (int64_t d = k - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= sparse_sizes[d];
  }
  const at::Tensor s = at::tensor(strides, indices.options().device(c10::kCPU)).to(kTpu);
  return indices.mul(s.unsqueeze(1)).sum(0);
}

// Index columns [sparse_dim, n] from linear positions [n].
at::Tensor Delinearise(at::Tensor linear, at::IntArrayRef sparse_sizes) {
  std::vector<at::Tensor> rows(sparse_sizes.size());
  for (int64_t d = static_cast<int64_t>(sparse_sizes.size()) - 1; d >= 0; --d) {
    rows[d] = linear.remainder(sparse_sizes[d]);
    linear = linear.div(sparse_sizes[d], "floor");
  }
  return at::stack(rows, 0);
}

void CheckOutDtype(const char* op, at::ScalarType result, const at::Tensor& out) {
  TORCH_CHECK(at::canCast(result, out.scalar_type()), "Can't convert result type ", result,
              " to output ", out.scalar_type(), " in ", op, " operation");
}

// ---- coalesce ----

at::Tensor coalesce_sparse_tpu(const at::Tensor& self) {
  TORCH_INTERNAL_ASSERT(self.defined() && self.is_sparse());
  const int64_t nnz = self._nnz();
  if (self.is_coalesced()) return self;
  if (nnz < 2) {
    at::Tensor r = self.clone();
    r._coalesced_(true);
    return r;
  }
  const int64_t sparse_dim = self.sparse_dim();
  const at::IntArrayRef sparse_sizes = self.sizes().slice(0, sparse_dim);
  at::Tensor linear = Linearise(self._indices(), sparse_sizes);
  auto [unique, inverse, counts] = at::_unique2(linear, /*sorted=*/true, /*return_inverse=*/true,
                                                /*return_counts=*/false);
  (void)counts;
  const at::Tensor& values = self._values();
  std::vector<int64_t> value_sizes = values.sizes().vec();
  value_sizes[0] = unique.size(0);
  at::Tensor summed = at::zeros(value_sizes, values.options()).index_add_(0, inverse, values);
  return NewSparse(Delinearise(unique, sparse_sizes), summed, self.sizes(), sparse_dim,
                   /*coalesced=*/true);
}

// ---- add ----

// out = dense + alpha * sparse, written with an accumulating index_put.
at::Tensor& AddDenseSparse(const at::Tensor& dense, const at::Tensor& sparse,
                           const c10::Scalar& alpha, at::Tensor& out) {
  TORCH_CHECK(dense.sizes().equals(sparse.sizes()), "add: expected 'self' and 'other' to have "
              "same size, but self has size ", dense.sizes(), " while other has size ",
              sparse.sizes(), " (FYI: dense-sparse addition does not currently support "
              "broadcasting)");
  const at::ScalarType type = at::promoteTypes(dense.scalar_type(), sparse.scalar_type());
  CheckOutDtype("add", type, out);
  at::Tensor r = dense.to(type, /*non_blocking=*/false, /*copy=*/true);
  if (sparse._nnz() > 0) {
    at::Tensor values = sparse._values().to(type);
    if (!(alpha.isIntegral(true) && alpha.to<int64_t>() == 1)) values = values.mul(alpha);
    const at::Tensor indices = sparse._indices();
    c10::List<std::optional<at::Tensor>> idx;
    for (int64_t d = 0; d < sparse.sparse_dim(); ++d) idx.push_back(indices.select(0, d));
    r.index_put_(idx, values, /*accumulate=*/true);
  }
  if (!out.is_same(r)) {
    at::native::resize_output(out, r.sizes());
    out.copy_(r);
  }
  return out;
}

at::Tensor& add_out_sparse_tpu(const at::Tensor& self, const at::Tensor& other,
                               const c10::Scalar& alpha, at::Tensor& out) {
  if (!self.is_sparse()) return AddDenseSparse(self, other, alpha, out);
  TORCH_CHECK(other.is_sparse(), "add(sparse, dense) is not supported. Use add(dense, sparse) "
              "instead.");
  TORCH_CHECK(out.is_sparse(), "Expected !r.is_sparse() to be true, but got false.");
  TORCH_CHECK(self.sizes().equals(other.sizes()), "add: expected sizes of 'self' and 'other' "
              "to match, but ", self.sizes(), " != ", other.sizes());
  TORCH_CHECK(self.sparse_dim() == other.sparse_dim(), "add: expected 'self' and 'other' to "
              "have same sparse dimensions, but ", self.sparse_dim(), " != ",
              other.sparse_dim());
  const at::ScalarType type = at::promoteTypes(self.scalar_type(), other.scalar_type());
  CheckOutDtype("add", type, out);
  at::Tensor other_values = other._values().to(type);
  if (!(alpha.isIntegral(true) && alpha.to<int64_t>() == 1))
    other_values = other_values.mul(alpha);
  const at::Tensor indices = at::cat({self._indices(), other._indices()}, 1);
  const at::Tensor values =
      at::cat({self._values().to(type), other_values}, 0).to(out.scalar_type());
  const bool coalesced = other._nnz() == 0 ? self.is_coalesced()
                         : self._nnz() == 0 ? other.is_coalesced() : false;
  const std::vector<int64_t> sizes = self.sizes().vec();
  return SetSparse(out, indices, values, sizes, self.sparse_dim(), coalesced);
}

// ---- mul ----

// A sparse tensor times a dense one (a 0-d tensor or one that broadcasts to
// the sparse shape): the values scaled by the dense entries at the indices.
at::Tensor MulSparseDense(const at::Tensor& sparse, const at::Tensor& dense) {
  const at::ScalarType type = at::result_type(sparse, dense);
  at::Tensor values = sparse._values().to(type);
  if (dense.dim() == 0) {
    values = values.mul(dense.to(type));
  } else {
    TORCH_CHECK(at::is_expandable_to(dense.sizes(), sparse.sizes()), "The size of tensor a (",
                dense.sizes().back(), ") must match the size of tensor b (",
                sparse.sizes().back(), ") at non-singleton dimension ", sparse.dim() - 1);
    at::Tensor expanded = dense.to(type).expand(sparse.sizes());
    const at::Tensor indices = sparse._indices();
    c10::List<std::optional<at::Tensor>> idx;
    for (int64_t d = 0; d < sparse.sparse_dim(); ++d) idx.push_back(indices.select(0, d));
    values = values.mul(at::index(expanded, idx));
  }
  return NewSparse(sparse._indices().clone(), values, sparse.sizes(), sparse.sparse_dim(),
                   sparse.is_coalesced());
}

// Both sparse: the entries present in both, from the coalesced operands.
at::Tensor MulSparseSparse(const at::Tensor& a_in, const at::Tensor& b_in) {
  TORCH_CHECK(a_in.sizes().equals(b_in.sizes()) && a_in.sparse_dim() == b_in.sparse_dim(),
              "sparse_binary_op_intersection_tpu(): expects sparse inputs with equal "
              "dimensionality, number of sparse dimensions, and shape of sparse dimensions");
  const at::ScalarType type = at::promoteTypes(a_in.scalar_type(), b_in.scalar_type());
  const at::Tensor a = a_in.coalesce();
  const at::Tensor b = b_in.coalesce();
  const int64_t sparse_dim = a.sparse_dim();
  const at::IntArrayRef sparse_sizes = a.sizes().slice(0, sparse_dim);
  if (a._nnz() == 0 || b._nnz() == 0) {
    std::vector<int64_t> value_sizes = a._values().sizes().vec();
    value_sizes[0] = 0;
    return NewSparse(a._indices().narrow(1, 0, 0).clone(),
                     at::empty(value_sizes, a._values().options().dtype(type)), a.sizes(),
                     sparse_dim, /*coalesced=*/true);
  }
  const at::Tensor la = Linearise(a._indices(), sparse_sizes);
  const at::Tensor lb = Linearise(b._indices(), sparse_sizes);
  // Sorted (coalesced) lb: the position of each of a's entries in b.
  const at::Tensor pos = at::searchsorted(lb, la).clamp_max(b._nnz() - 1);
  const at::Tensor hit = at::nonzero(lb.index_select(0, pos).eq(la)).squeeze(1);
  const at::Tensor values = a._values().index_select(0, hit).to(type).mul(
      b._values().index_select(0, pos.index_select(0, hit)).to(type));
  return NewSparse(a._indices().index_select(1, hit), values, a.sizes(), sparse_dim,
                   /*coalesced=*/true);
}

at::Tensor& mul_out_sparse_tpu(const at::Tensor& self, const at::Tensor& other,
                               at::Tensor& out) {
  at::Tensor r;
  if (self.is_sparse() && other.is_sparse()) {
    r = MulSparseSparse(self, other);
  } else {
    r = self.is_sparse() ? MulSparseDense(self, other) : MulSparseDense(other, self);
  }
  TORCH_CHECK(out.is_sparse(), "mul: expected the output to be a sparse tensor when an input "
              "is sparse (got a ", out.layout(), " output)");
  CheckOutDtype("mul", r.scalar_type(), out);
  return SetSparse(out, r._indices(), r._values().to(out.scalar_type()), r.sizes(),
                   r.sparse_dim(), r.is_coalesced());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_coalesce", TORCH_FN(coalesce_sparse_tpu));
  m.impl("add.out", TORCH_FN(add_out_sparse_tpu));
  m.impl("mul.out", TORCH_FN(mul_out_sparse_tpu));
}

// Dense -> sparse is composed of dense ops (nonzero, index) in ATen.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_to_sparse.sparse_dim",
         TORCH_FN(static_cast<decltype(&at::_ops::_to_sparse_sparse_dim::call)>(
             &at::native::dense_to_sparse)));
  m.impl("_to_sparse", TORCH_FN(static_cast<decltype(&at::_ops::_to_sparse::call)>(
                           &at::native::dense_to_sparse)));
}

}  // namespace tpu::ops
