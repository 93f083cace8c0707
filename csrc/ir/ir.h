// A small StableHLO IR: a function of SSA values built op by op, printed as
// MLIR text in the generic form (which every StableHLO parser accepts).
// No torch headers here; ir_test.cc holds golden-text tests.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tpu::ir {

enum class DType : uint8_t {
  PRED, S8, S16, S32, S64, U8, U16, U32, U64, F16, BF16, F32, F64, C64, C128,
  // float8 (OCP e5m2 and e4m3fn; the fnuz variants: no negative zero, one NaN)
  F8E5M2, F8E4M3FN, F8E5M2FNUZ, F8E4M3FNUZ,
  // complex32 (torch.chalf): StableHLO has no complex<f16>, so it is a
  // storage type. Each element is one ui32 holding the real part's f16 bits
  // (low half) and the imaginary part's (high half), the bytes of
  // c10::complex<c10::Half>. Ops move these values as they are (slice,
  // gather, concatenate, select, bitcast) and compute in complex64:
  // Convert unpacks and packs, and the Builder refuses any other op on them.
  C32,
};
bool IsFloat8(DType t);
const char* DTypeName(DType t);  // MLIR element type: "i1", "f32", "ui8", ...
bool IsFloat(DType t);
bool IsComplex(DType t);
bool IsSigned(DType t);    // signed integers
bool IsUnsigned(DType t);  // unsigned integers (not PRED)
bool IsInteger(DType t);   // signed or unsigned, not PRED
int BitWidth(DType t);

struct TensorType {
  DType dtype = DType::F32;
  std::vector<int64_t> dims;
  int64_t numel() const;
  int rank() const { return static_cast<int>(dims.size()); }
  bool operator==(const TensorType& o) const { return dtype == o.dtype && dims == o.dims; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
};
std::string TypeText(const TensorType& t);  // "tensor<2x3xf32>"

// An SSA value of the function being built.
struct Value {
  int32_t id = -1;
  bool valid() const { return id >= 0; }
};

// Attribute: a name and its MLIR attribute text, e.g.
// {"dimensions", "array<i64: 1, 0>"}.
using Attr = std::pair<std::string, std::string>;

class Builder;
// Builds a region body: gets the block arguments, returns the values that
// the region's terminator returns.
using RegionFn = std::function<std::vector<Value>(Builder&, const std::vector<Value>&)>;

struct Region {
  std::vector<TensorType> arg_types;
  RegionFn body;
};

class Builder {
 public:
  Builder();
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;
  // Adds a function parameter. `attrs` are argument attributes (e.g.
  // tf.aliasing_output).
  Value Param(const TensorType& type, std::vector<Attr> attrs = {});
  // Emits `name` with operands, result types, attributes and regions.
  std::vector<Value> Op(const std::string& name, const std::vector<Value>& operands,
                        const std::vector<TensorType>& results, std::vector<Attr> attrs = {},
                        std::vector<Region> regions = {});
  Value Op1(const std::string& name, const std::vector<Value>& operands, const TensorType& result,
            std::vector<Attr> attrs = {}, std::vector<Region> regions = {}) {
    return Op(name, operands, {result}, std::move(attrs), std::move(regions))[0];
  }
  const TensorType& type(Value v) const;
  size_t num_params() const { return params_.size(); }
  // A program with bounded dynamic sizes (stablehlo.set_dimension_size on
  // some parameters): types stay static at the bounds and XLA's dynamic
  // padder masks the padding; lowerings that need an element count take
  // it from the data (CountOver) instead of the static type.
  void set_dynamic(bool d) { dynamic_ = d; }
  bool dynamic() const { return dynamic_; }

  // Adds a function to the module beside @main (MLIR text of one
  // func.func, private, named `name`), once per name: a custom kernel's
  // program (torch_tpu.kernels), called with Op("func.call", ...,
  // {{"callee", "@name"}}).
  void AddFunction(const std::string& name, const std::string& text);

  // Prints the module with @main returning `results`. Module attributes are
  // set for one replica, one partition unless given.
  std::string Print(const std::vector<Value>& results, int num_replicas = 1,
                    int num_partitions = 1) const;

 private:
  bool dynamic_ = false;
  struct OpRec;
  struct Block {
    std::vector<Value> args;
    std::vector<int> ops;  // indices into ops_
  };
  struct OpRec {
    std::string name;
    std::vector<Value> operands;
    std::vector<Value> results;
    std::vector<Attr> attrs;
    std::vector<Block> regions;  // each region has one block
  };
  Value NewValue(const TensorType& t);
  void PrintOp(std::string& out, const OpRec& op, int indent) const;

  // By value id. A deque, so references from type() stay valid while more
  // values are added.
  std::deque<TensorType> types_;
  std::vector<std::string> names_;      // printed name by value id ("%3", "%4#1")
  std::vector<Value> params_;
  std::vector<std::vector<Attr>> param_attrs_;
  std::vector<OpRec> ops_;
  std::vector<std::pair<std::string, std::string>> functions_;  // (name, text)
  Block top_;
  Block* current_;
};

}  // namespace tpu::ir
