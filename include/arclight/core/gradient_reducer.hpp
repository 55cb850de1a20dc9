#pragma once
#include <cstddef>
#include <vector>

namespace arclight {

// A view of a float buffer's storage, for communication without LibTorch.
struct FloatBuffer {
  float* data = nullptr;
  std::size_t size = 0;
  int device = -1;  // -1: host memory; otherwise the CUDA device that holds it
};

// Sums gradients across the trainers, in place. The caller may announce each
// buffer as backward finishes it, so that communication overlaps the rest of
// backward; finish() returns when every buffer holds the sum.
class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  // Starts a step over these buffers (same count and sizes, same order, on every trainer).
  virtual void begin(const std::vector<FloatBuffer>& buffers) = 0;
  // Buffer `index` is final for this step; its bucket may go once all its buffers are.
  virtual void ready(std::size_t index) = 0;
  // Sends whatever has not gone and waits for every sum.
  virtual void finish() = 0;
  // The first trainer's `value`, on every trainer. A figure computed from the summed gradient (its norm) can differ in
  // its last bits between trainers (threads sum in other orders where their counts differ); scaled by it, their
  // weights would drift apart.
  virtual double leaders_value(double value) = 0;

  void all_reduce(const std::vector<FloatBuffer>& buffers) {
    begin(buffers);
    finish();
  }
};

}  // namespace arclight
