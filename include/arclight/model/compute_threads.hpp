#pragma once

namespace arclight::model {

// Sizes LibTorch's and OpenBLAS's thread pools for this rank, so that ranks
// sharing a node don't oversubscribe its cores.
void set_compute_threads(int threads);

}  // namespace arclight::model
