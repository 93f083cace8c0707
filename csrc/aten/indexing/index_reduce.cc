// index_reduce (prod, mean, amax, amin), through scatter_reduce with the
// index spread along the reduced dim.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/scatter_reduce.h>
#include <torch/library.h>

#include <cmath>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/pointwise/complex.h"
#include "aten/kernel_helpers.h"
#include "aten/indexing/index_checks.h"
#include "aten/formula.h"
#include "aten/loops.h"

namespace tpu::ops {

namespace {

// ---- index_reduce, through scatter_reduce with the index spread ----

Tensor IndexReduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                   c10::string_view reduce, bool include_self) {
  TORCH_CHECK(reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin",
              "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got ",
              reduce, ".");
  TORCH_CHECK(index.dim() <= 1, "index_reduce_(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_reduce_(): Expected dtype int32/int64 for index but got: ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_reduce_(): self (",
              self.scalar_type(), ") and source (", source.scalar_type(),
              ") must have the same scalar type");
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  TORCH_CHECK(source.dim() == 0 || source.size(d) == index.numel(),
              "index_reduce_(): Expected index to have the same number of elements as source "
              "along dim ", d);
  if (index.numel() == 0) return self.clone();
  CheckIndexRange({"aten::index_reduce", true, false, "index out of range in self", "", false},
                  index, self.dim() == 0 ? 1 : self.size(d));
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  Tensor src = source.dim() == 0 ? source.reshape({1}) : source;
  std::vector<int64_t> view(src.dim(), 1);
  view[d] = -1;
  Tensor idx = index.to(at::kLong).reshape(view).expand(src.sizes());
  Tensor r = at::scatter_reduce(x, d, idx, src, reduce, include_self);
  return self.dim() == 0 ? r.reshape({}) : r;
}
Tensor index_reduce_tpu(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                        c10::string_view reduce, bool include_self) {
  return IndexReduce(self, dim, index, source, reduce, include_self);
}
Tensor& index_reduce_out_tpu(const Tensor& self, int64_t dim, const Tensor& index,
                             const Tensor& source, c10::string_view reduce, bool include_self,
                             Tensor& out) {
  return CopyInto("index_reduce", IndexReduce(self, dim, index, source, reduce, include_self), out);
}
Tensor& index_reduce__tpu(Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                          c10::string_view reduce, bool include_self) {
  return self.copy_(IndexReduce(self, dim, index, source, reduce, include_self));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_reduce", TORCH_FN(index_reduce_tpu));
  m.impl("index_reduce.out", TORCH_FN(index_reduce_out_tpu));
  m.impl("index_reduce_", TORCH_FN(index_reduce__tpu));
}

}  // namespace tpu::ops
