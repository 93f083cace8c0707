// Test hooks of the executable cache's bounds (executable_cache.cc).
#pragma once

#include <cstdint>

namespace tpu::lazy {

// Replaces the budget of memory mappings (half of vm.max_map_count) with
// `budget` (0: back to the default); the next cache request counts the
// process's mappings against it.
void SetMapBudgetForTesting(int64_t budget);
// The cache's limit that the mapping budget imposes now (0: none).
int64_t MapLimitForTesting();

}  // namespace tpu::lazy
