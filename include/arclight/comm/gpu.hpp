#pragma once
#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>

namespace arclight::comm {

// GPUs this process can use: 0 when CUDA was not compiled in, or no driver or device is there.
int visible_gpu_count();

// The PCI bus id of CUDA device `device` ("0000:3b:00.0"): the GPU itself, whatever number CUDA_VISIBLE_DEVICES gives
// it in this process. Empty for -1 (the CPU).
std::string gpu_bus_id(int device);

// Makes `device` current for this process's CUDA calls; no-op for -1 (CPU).
void bind_device(int device);

// `count` floats from host memory into GPU memory, there when it returns (ordered after the default stream's work).
void copy_to_gpu(float* gpu, const float* host, std::size_t count);

// Floats in a GPU's memory (staging and tests). Throws where CUDA is absent.
class DeviceFloats {
 public:
  DeviceFloats(int device, std::size_t size);
  ~DeviceFloats();
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* data() const { return data_; }
  std::size_t size() const { return size_; }
  void upload(const float* host);
  void download(float* host) const;
  void download_bytes(void* host, std::size_t bytes) const;  // the first `bytes` (at most size() floats' worth)

 private:
  int device_;
  std::size_t size_;
  float* data_ = nullptr;
};

// Bytes in GPU memory broadcast over NCCL from rank 0 of an MPI communicator to its other ranks (the weights, from the
// trainer leader to the runners), on a stream of its own: start() enqueues after the default stream's work so far
// (LibTorch's), and nothing on the default stream waits for it; finished() looks, wait() waits. A CUDA or NCCL error (a
// peer's too) aborts the communicator and throws; abort() ends it where a peer hangs (the buffer of a broadcast under
// way may still be written: keep it).
class DeviceBroadcast {
 public:
  virtual ~DeviceBroadcast() = default;
  // Rank `root` sends `data`; the others receive into theirs. Broadcasts enqueued one after another run in order.
  virtual void start(void* data, std::size_t bytes, int root = 0) = 0;
  virtual bool finished() = 0;
  virtual void wait() = 0;  // finished(), sleeping between looks
  virtual void abort() = 0;
};

// Collective over `comm`, every rank with its own GPU `device` (NCCL takes one rank per GPU). Throws where NCCL was not
// compiled in.
std::unique_ptr<DeviceBroadcast> make_nccl_broadcast(MPI_Comm comm, int device);

// The NCCL library's version as "2.x.y", or empty when NCCL was not compiled in.
std::string nccl_version();

}  // namespace arclight::comm
