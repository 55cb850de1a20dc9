#include "arclight/comm/reducer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

namespace arclight::comm {

// ---- 16-bit floats -------------------------------------------------------------------------

std::uint16_t to_bf16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if (std::isnan(value)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<std::uint16_t>(bits >> 16);
}

float from_bf16(std::uint16_t value) {
  std::uint32_t bits = static_cast<std::uint32_t>(value) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

std::uint16_t to_fp16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const std::uint32_t sign = (bits >> 16) & 0x8000;
  const std::uint32_t abs = bits & 0x7FFFFFFF;
  if (abs >= 0x7F800000) return static_cast<std::uint16_t>(sign | 0x7C00 | (abs > 0x7F800000 ? 0x200 : 0));
  if (abs >= 0x477FF000) return static_cast<std::uint16_t>(sign | 0x7C00);  // rounds past the largest half
  if (abs < 0x38800000) {                                                   // a subnormal half (or zero)
    float f;
    std::memcpy(&f, &abs, sizeof f);
    const float scaled = f * 16777216.0f;  // 2^24: units of the smallest subnormal
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(scaled)));
  }
  std::uint32_t rounded = abs + 0xFFF + ((abs >> 13) & 1);
  return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000) >> 13));
}

float from_fp16(std::uint16_t value) {
  const std::uint32_t sign = static_cast<std::uint32_t>(value & 0x8000) << 16;
  const std::uint32_t exponent = (value >> 10) & 0x1F;
  const std::uint32_t mantissa = value & 0x3FF;
  float out;
  if (exponent == 0) {
    out = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -out : out;
  }
  std::uint32_t bits =
      exponent == 0x1F ? (sign | 0x7F800000 | (mantissa << 13)) : (sign | ((exponent + 112) << 23) | (mantissa << 13));
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

namespace {
// The largest power of two s with s * ranks * largest <= 2^15, half fp16's largest value: no partial sum overflows,
// also where each share rounds up to fp16 (3 shares at the bound rounded to 21840 each, 65520: inf). Zeros, or a
// non-finite gradient (the step is skipped), go unscaled.
float fp16_scale(float largest, int ranks) {
  constexpr double sums_below = 32768.0;
  const double bound = double(largest) * ranks;
  if (!(bound > 0) || !std::isfinite(bound)) return 1.0f;
  int k = std::clamp(static_cast<int>(std::floor(std::log2(sums_below / bound))), -126, 126);
  while (k > -126 && std::ldexp(bound, k) > sums_below) --k;  // log2's rounding at a power of two
  return std::ldexp(1.0f, k);
}

float largest_magnitude(const std::vector<FloatBuffer>& buffers, const std::vector<std::size_t>& members) {
  float largest = 0;
  for (std::size_t m : members)
    for (std::size_t k = 0; k < buffers[m].size; ++k) {
      const float magnitude = std::abs(buffers[m].data[k]);
      if (!(magnitude <= largest)) largest = std::isnan(magnitude) ? INFINITY : magnitude;
    }
  return largest;
}

template <float (*From)(std::uint16_t), std::uint16_t (*To)(float)>
void half_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = To(From(a[i]) + From(b[i]));
}
}  // namespace

// ---- MPI -------------------------------------------------------------------------------------

MpiReducer::MpiReducer(MPI_Comm comm, ReducerConfig config) : comm_(comm), config_(std::move(config)) {
  if (config_.compression == Compression::bf16) MPI_Op_create(&half_sum<from_bf16, to_bf16>, 1, &half_sum_);
  if (config_.compression == Compression::fp16) MPI_Op_create(&half_sum<from_fp16, to_fp16>, 1, &half_sum_);
  if (config_.bucket_bytes < sizeof(float) || config_.first_bucket_bytes < sizeof(float))
    throw UsageError("comm bucket sizes must hold at least one float");
  MPI_Comm_size(comm_, &ranks_);
}

MpiReducer::~MpiReducer() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (half_sum_ != MPI_OP_NULL && !finalized) MPI_Op_free(&half_sum_);
}

void MpiReducer::plan(const std::vector<FloatBuffer>& buffers) {
  buckets_.clear();
  bucket_of_.assign(buffers.size(), 0);
  std::size_t limit = config_.first_bucket_bytes;
  for (std::size_t i = buffers.size(); i-- > 0;) {
    const std::size_t bytes = buffers[i].size * sizeof(float);
    if (buckets_.empty() ||
        (buckets_.back().elements > 0 && (buckets_.back().elements * sizeof(float) + bytes > limit))) {
      if (!buckets_.empty()) limit = config_.bucket_bytes;
      buckets_.emplace_back();
    }
    buckets_.back().members.push_back(i);
    buckets_.back().elements += buffers[i].size;
    bucket_of_[i] = buckets_.size() - 1;
  }
  for (Bucket& b : buckets_) {
    if (b.elements > static_cast<std::size_t>(INT32_MAX)) throw Error("a gradient bucket exceeds 2^31 elements");
    // Members run from a higher index to a lower one: adjacent when each starts where the next lower one ends.
    bool adjacent = true;
    for (std::size_t k = 0; k + 1 < b.members.size(); ++k) {
      const FloatBuffer& hi = buffers[b.members[k]];
      const FloatBuffer& lo = buffers[b.members[k + 1]];
      adjacent = adjacent && lo.data + lo.size == hi.data;
    }
    if (half_sum_ != MPI_OP_NULL)
      b.packed.resize(b.elements);
    else if (adjacent)
      b.in_place = buffers[b.members.back()].data;
    else
      b.fused.resize(b.elements);
  }
}

std::vector<std::vector<std::size_t>> MpiReducer::bucket_members() const {
  std::vector<std::vector<std::size_t>> out;
  for (const Bucket& b : buckets_) out.push_back(b.members);
  return out;
}

void MpiReducer::begin(const std::vector<FloatBuffer>& buffers) {
  bool same = buffers.size() == buffers_.size();
  for (std::size_t i = 0; same && i < buffers.size(); ++i)
    same = buffers[i].size == buffers_[i].size && buffers[i].data == buffers_[i].data;
  for (const FloatBuffer& b : buffers)
    if (b.device >= 0) throw Error("MpiReducer: buffers on a GPU need the NCCL reducer");
  scaling_ = nullptr;
  if (!same) plan(buffers);
  buffers_ = buffers;
  for (Bucket& b : buckets_) {
    b.waiting = b.members.size();
    b.launched = false;
  }
  next_launch_ = 0;
}

void MpiReducer::launch_ready_buckets(bool blocking) {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].waiting == 0) {
    Bucket& b = buckets_[next_launch_++];
    b.launched = true;
    if (config_.compression != Compression::fp16) {
      launch_data(b, blocking);
      continue;
    }
    launch_scaled_data(blocking);
    b.local_max = largest_magnitude(buffers_, b.members);
    if (blocking)
      MPI_Allreduce(&b.local_max, &b.global_max, 1, MPI_FLOAT, MPI_MAX, comm_);
    else
      MPI_Iallreduce(&b.local_max, &b.global_max, 1, MPI_FLOAT, MPI_MAX, comm_, &b.max_request);
    scaling_ = &b;
  }
  // Give the outstanding all-reduces a chance to progress while backward goes on.
  for (std::size_t i = 0; i < next_launch_; ++i)
    for (MPI_Request* request : {&buckets_[i].max_request, &buckets_[i].request}) {
      int done = 0;
      if (*request != MPI_REQUEST_NULL) MPI_Test(request, &done, MPI_STATUS_IGNORE);
    }
}

void MpiReducer::launch_scaled_data(bool blocking) {
  if (!scaling_) return;
  Bucket& b = *scaling_;
  scaling_ = nullptr;
  MPI_Wait(&b.max_request, MPI_STATUS_IGNORE);
  b.scale = fp16_scale(b.global_max, ranks_);
  launch_data(b, blocking);
}

void MpiReducer::launch_data(Bucket& b, bool blocking) {
  const int count = static_cast<int>(b.elements);
  if (b.in_place) {
    if (blocking)
      MPI_Allreduce(MPI_IN_PLACE, b.in_place, count, MPI_FLOAT, MPI_SUM, comm_);
    else
      MPI_Iallreduce(MPI_IN_PLACE, b.in_place, count, MPI_FLOAT, MPI_SUM, comm_, &b.request);
    return;
  }
  std::size_t offset = 0;
  for (std::size_t m : b.members) {
    const FloatBuffer& buf = buffers_[m];
    if (half_sum_ == MPI_OP_NULL) {
      std::memcpy(b.fused.data() + offset, buf.data, buf.size * sizeof(float));
    } else if (config_.compression == Compression::bf16) {
      for (std::size_t k = 0; k < buf.size; ++k) b.packed[offset + k] = to_bf16(buf.data[k]);
    } else {
      for (std::size_t k = 0; k < buf.size; ++k) b.packed[offset + k] = to_fp16(buf.data[k] * b.scale);
    }
    offset += buf.size;
  }
  void* data = half_sum_ == MPI_OP_NULL ? static_cast<void*>(b.fused.data()) : static_cast<void*>(b.packed.data());
  MPI_Datatype type = half_sum_ == MPI_OP_NULL ? MPI_FLOAT : MPI_UINT16_T;
  MPI_Op op = half_sum_ == MPI_OP_NULL ? MPI_SUM : half_sum_;
  if (blocking)
    MPI_Allreduce(MPI_IN_PLACE, data, count, type, op, comm_);
  else
    MPI_Iallreduce(MPI_IN_PLACE, data, count, type, op, comm_, &b.request);
}

void MpiReducer::ready(std::size_t index) {
  if (index >= bucket_of_.size()) throw Error("MpiReducer::ready: no such buffer");
  Bucket& b = buckets_[bucket_of_[index]];
  if (b.waiting > 0) --b.waiting;
  launch_ready_buckets(false);
}

void MpiReducer::unpack(Bucket& b) {
  if (b.in_place) return;
  std::size_t offset = 0;
  const float unscale = 1.0f / b.scale;  // a power of two: exact
  for (std::size_t m : b.members) {
    const FloatBuffer& buf = buffers_[m];
    if (half_sum_ == MPI_OP_NULL) {
      std::memcpy(buf.data, b.fused.data() + offset, buf.size * sizeof(float));
    } else if (config_.compression == Compression::bf16) {
      for (std::size_t k = 0; k < buf.size; ++k) buf.data[k] = from_bf16(b.packed[offset + k]);
    } else {
      for (std::size_t k = 0; k < buf.size; ++k) buf.data[k] = from_fp16(b.packed[offset + k]) * unscale;
    }
    offset += buf.size;
  }
}

double MpiReducer::leaders_value(double value) {
  MPI_Bcast(&value, 1, MPI_DOUBLE, 0, comm_);
  return value;
}

void MpiReducer::finish() {
  // What backward has not sent yet goes now, blocking: Open MPI's blocking all-reduce
  // is about twice as fast as its non-blocking one when there is nothing left to overlap.
  // Which buckets went early depends only on the ready() calls, the same on every trainer.
  for (Bucket& b : buckets_) b.waiting = 0;
  launch_ready_buckets(true);
  launch_scaled_data(true);
  for (Bucket& b : buckets_) {
    MPI_Wait(&b.request, MPI_STATUS_IGNORE);
    unpack(b);
  }
}

std::unique_ptr<GradientReducer> make_reducer(MPI_Comm comm, int device, const ReducerConfig& config) {
  if (device >= 0) return make_nccl_reducer(comm, device);
  return std::make_unique<MpiReducer>(comm, config);
}

}  // namespace arclight::comm
