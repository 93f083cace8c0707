// The StableHLO programs of tpu_dist's XLA engine: one program per
// collective, compiled for the devices of the group (replica i = group rank
// i) and launched by every member. No torch headers: the same text is run by
// the engine (backend.cc) and by the lowering harness (harness.cc), which
// checks it on one process with a several-device CPU client.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace tpu::dist {

enum class Collective {
  kAllReduce,      // every rank: reduce(all inputs)            in [n...] -> [n...]
  kAllGather,      // every rank: concat(inputs) along dim 0    [n...] -> [G*n...]
  kReduceScatter,  // rank r: chunk r of reduce(inputs)         [G*n...] -> [n...]
  kAllToAll,       // rank r: concat(chunk r of each input)     [G*n...] -> [G*n...]
  kBroadcast,      // every rank: input of `root`               [n...] -> [n...]
  kScatter,        // rank r: chunk r of `root`'s input         [G*n...] -> [n...]
  kPermute,        // rank dst of each (src, dst) pair: src's input; others zeros
};

enum class Reduce { kSum, kAvg, kProduct, kMin, kMax, kPremulSum };

const char* CollectiveName(Collective c);
const char* ReduceName(Reduce r);

struct CollectiveSpec {
  Collective kind = Collective::kAllReduce;
  Reduce reduce = Reduce::kSum;  // kAllReduce, kReduceScatter
  ir::TensorType input;          // one rank's input
  // Replica groups: each a list of replica ids; the collective runs within
  // each group, all of the same size. Empty: one group of all replicas.
  std::vector<std::vector<int64_t>> groups;
  int num_replicas = 1;
  int root = 0;                                    // kBroadcast, kScatter: index within the group
  std::vector<std::pair<int64_t, int64_t>> pairs;  // kPermute: (source, target) replica ids
};

struct CollectiveProgram {
  std::string mlir;
  ir::TensorType output;  // one rank's result
  // Arguments: the input, then (kPremulSum) a 0-d factor of the input's dtype.
  int num_args = 1;
};

// Validates the spec (throws std::invalid_argument naming the problem) and
// prints the module.
CollectiveProgram EmitCollective(const CollectiveSpec& spec);

}  // namespace tpu::dist
