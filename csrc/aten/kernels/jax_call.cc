// User kernels written in JAX / Pallas (torch_tpu.kernels): the kernel's
// StableHLO function is spliced into the program that calls it, as a
// private func.func beside @main and a func.call, so it runs like any op in
// every mode (a program of its own in Strict Eager, inside the fused
// program in Fused Eager, inside the graph under torch.compile, where XLA
// fuses across it).
//
// The Python side lowers the JAX function once per (function, static
// arguments, input shapes and dtypes), checks it against the plugin, and
// registers its text under a symbol derived from the text's hash; the
// symbol is the op's attribute, so it is part of every cache key, the
// persistent one included.
#include <torch/csrc/utils/pybind.h>

#include <mutex>
#include <string>
#include <unordered_map>

#include "aten/tensor_bridge.h"

namespace tpu::ops {

namespace {

std::mutex g_mu;
std::unordered_map<std::string, std::string>& Kernels() {  // symbol -> func.func text
  static auto* k = new std::unordered_map<std::string, std::string>();
  return *k;
}

std::vector<ir::Value> KernelLowering(ir::Builder& b, const std::vector<ir::Value>& in,
                                      const lazy::Attrs& attrs,
                                      const std::vector<ir::TensorType>& out) {
  std::string text;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Kernels().find(attrs.str);
    if (it == Kernels().end())
      throw std::runtime_error("tpu: kernel " + attrs.str + " is not registered");
    text = it->second;
  }
  b.AddFunction(attrs.str, text);
  return b.Op("func.call", in, out, {{"callee", "@" + attrs.str}});
}

const lazy::Lowering kKernel{"torch_tpu::kernel", &KernelLowering};

}  // namespace

void RegisterKernels(pybind11::module& m) {
  namespace py = pybind11;
  m.def("_kernel_register", [](const std::string& symbol, const std::string& text) {
    std::lock_guard<std::mutex> lock(g_mu);
    Kernels().emplace(symbol, text);
  });
  m.def("_kernel_registered", [](const std::string& symbol) {
    std::lock_guard<std::mutex> lock(g_mu);
    return Kernels().count(symbol) != 0;
  });
  // Runs registered kernel `symbol` on tpu tensors; `outs` are the results'
  // (sizes, dtype).
  m.def("_kernel_call", [](const std::string& symbol, const std::vector<at::Tensor>& inputs,
                           const std::vector<std::pair<std::vector<int64_t>, at::ScalarType>>& outs) {
    {
      std::lock_guard<std::mutex> lock(g_mu);
      TORCH_CHECK(Kernels().count(symbol), "torch_tpu kernel ", symbol, " is not registered");
    }
    std::vector<lazy::Operand> operands;
    operands.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      CheckTpu(symbol.c_str(), inputs[i], "input");
      operands.push_back(OperandOf(inputs[i]));
    }
    std::vector<ir::TensorType> types;
    for (const auto& [sizes, dtype] : outs) types.push_back(TypeOf(sizes, dtype));
    lazy::Attrs attrs;
    attrs.str = symbol;
    return Run(kKernel, std::move(attrs), std::move(operands), types);
  });
}

}  // namespace tpu::ops
