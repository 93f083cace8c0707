// Recreating a strided view of a storage inside a program, and writing a
// value back through a view. A storage's node is read as a flat array of
// its elements; the view's sizes/strides/offset pick elements out of it.
#pragma once

#include "ir/ir.h"
#include "lazy/node.h"

namespace tpu::lazy {

// The row-major view of all of a node's elements.
ViewSpec WholeView(const ir::TensorType& t);

// True if `view` is exactly the whole of a storage holding `storage_numel`
// elements of view.dtype, in row-major order.
bool CoversWhole(const ViewSpec& view, int64_t storage_numel);

// The value of `view` read from `base` (the storage's node value, any dims).
ir::Value ReadView(ir::Builder& b, ir::Value base, const ViewSpec& view);

// The storage's new flat value ([numel of base]) after writing `update`
// (shaped view.sizes, dtype view.dtype) through `view`.
ir::Value WriteView(ir::Builder& b, ir::Value base, const ViewSpec& view, ir::Value update);

// A contiguous run of a storage starts at an offset that changes from call
// to call (a batch slice x[i:i+n]); such views take the offset as a
// run-time operand so the program is reused.
// `blocks`: strided blocks too (x[:, i]), not only contiguous runs; off in
// graphs with bounded dynamic sizes, whose padding XLA's dynamic padder
// does not follow through a block's dynamic slice.
// `read`: the view is read (a complex view of a real storage, or the
// reverse, may then take a run-time offset too; writes keep it static).
bool HasDynamicOffset(const ViewSpec& view, const ir::TensorType& base, bool blocks = true,
                      bool read = false);
// ReadView / WriteView for those views, with the offset as a 0-d s64 value.
ir::Value ReadViewAt(ir::Builder& b, ir::Value base, const ViewSpec& view, ir::Value offset);
ir::Value WriteViewAt(ir::Builder& b, ir::Value base, const ViewSpec& view, ir::Value update,
                      ir::Value offset);

}  // namespace tpu::lazy
