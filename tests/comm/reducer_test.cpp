// The gradient reducers under MPI (mpirun -np 3): every rank runs the same cases.
#include "../mpi_test_main.hpp"

#include <numeric>

#include "arclight/comm/gpu.hpp"
#include "arclight/comm/reducer.hpp"
#include "arclight/core/error.hpp"

using namespace arclight;
using namespace arclight::comm;

namespace {
int rank_ = 0, size_ = 1;

struct Grads {
  std::vector<std::vector<float>> storage;
  std::vector<FloatBuffer> buffers() {
    std::vector<FloatBuffer> out;
    for (auto& s : storage) out.push_back({s.data(), s.size()});
    return out;
  }
};

// Integer values below 2^24: float sums are exact.
Grads make_grads(const std::vector<std::size_t>& sizes, int rank, int modulus = 977) {
  Grads g;
  for (std::size_t b = 0; b < sizes.size(); ++b) {
    g.storage.emplace_back(sizes[b]);
    for (std::size_t i = 0; i < sizes[b]; ++i) g.storage[b][i] = float(rank * 1000 + (i + b) % modulus);
  }
  return g;
}

void expect_sums(const Grads& g, const std::vector<std::size_t>& sizes, int modulus = 977) {
  const float rank_sum = float(1000 * (size_ * (size_ - 1) / 2));
  for (std::size_t b = 0; b < sizes.size(); ++b)
    for (std::size_t i = 0; i < sizes[b]; ++i) {
      float want = rank_sum + size_ * float((i + b) % modulus);
      if (g.storage[b][i] != want) {
        BOOST_ERROR("buffer " << b << " element " << i << ": " << g.storage[b][i] << " != " << want);
        return;
      }
    }
}

bool no_gpu() { return visible_gpu_count() == 0; }
}  // namespace

BOOST_AUTO_TEST_SUITE(reducer)

BOOST_AUTO_TEST_CASE(sums_exactly_across_ranks) {
  const std::vector<std::size_t> sizes{1, 1000, 300000, 7, 2000000, 64};
  ReducerConfig config;
  config.first_bucket_bytes = 64 << 10;
  config.bucket_bytes = 1 << 20;
  MpiReducer reducer(MPI_COMM_WORLD, config);
  for (int step = 0; step < 2; ++step) {  // the plan is reused on the second step
    Grads g = make_grads(sizes, rank_);
    reducer.all_reduce(g.buffers());
    expect_sums(g, sizes);
  }
  // Buckets run from the last buffer to the first, and the first bucket is the small one.
  auto members = reducer.bucket_members();
  BOOST_REQUIRE(members.size() >= 3u);
  BOOST_TEST(members.front().front() == sizes.size() - 1);
  BOOST_TEST(members.back().back() == 0u);
}

BOOST_AUTO_TEST_CASE(every_rank_gets_the_first_ones_value) {
  MpiReducer reducer(MPI_COMM_WORLD, ReducerConfig{});
  BOOST_TEST(reducer.leaders_value(0.25 + rank_) == 0.25);
}

BOOST_AUTO_TEST_CASE(buffers_announced_during_backward_give_the_same_sums) {
  const std::vector<std::size_t> sizes{5000, 3, 70000, 12000, 1};
  ReducerConfig config;
  config.first_bucket_bytes = 4 << 10;
  config.bucket_bytes = 64 << 10;
  MpiReducer reducer(MPI_COMM_WORLD, config);
  Grads g = make_grads(sizes, rank_);
  reducer.begin(g.buffers());
  for (std::size_t i = sizes.size(); i-- > 0;) reducer.ready(i);  // backward's order
  reducer.finish();
  expect_sums(g, sizes);
}

BOOST_AUTO_TEST_CASE(compressed_sums_of_small_integers_are_exact) {
  for (const Compression compression : {Compression::bf16, Compression::fp16}) {
    const std::vector<std::size_t> sizes{100, 4000};
    ReducerConfig config;
    config.compression = compression;
    MpiReducer reducer(MPI_COMM_WORLD, config);
    Grads g;
    for (std::size_t n : sizes) g.storage.emplace_back(n);
    for (auto& s : g.storage)
      for (std::size_t i = 0; i < s.size(); ++i) s[i] = float(rank_ + i % 40);  // sums stay below 256
    reducer.all_reduce(g.buffers());
    for (auto& s : g.storage)
      for (std::size_t i = 0; i < s.size(); ++i) {
        float want = float(size_ * (size_ - 1) / 2 + size_ * (i % 40));
        if (s[i] != want) {
          BOOST_ERROR(name_of(compression) << " element " << i << ": " << s[i] << " != " << want);
          break;
        }
      }
  }
}

// fp16 has 5 exponent bits: unscaled, gradients below 6e-5 lose their precision (below 3e-8 they are 0) and sums above
// 65504 are infinite (the step skipped). Each bucket is scaled by a power of two the trainers agree on: both keep
// fp16's relative precision. Buffers announced during backward, each its own bucket.
BOOST_AUTO_TEST_CASE(fp16_sums_keep_tiny_and_huge_gradients) {
  // The last: every trainer holds the largest value (rounded up to fp16 at a scale that only just fits, three shares
  // summed to 65520: inf).
  const std::vector<float> magnitudes{1e-7f, 3e-9f, 2e-3f, 30000.f, 1e6f, 21834.f};
  const std::size_t n = 1000;
  ReducerConfig config;
  config.compression = Compression::fp16;
  config.first_bucket_bytes = config.bucket_bytes = n * sizeof(float);
  MpiReducer reducer(MPI_COMM_WORLD, config);
  auto value = [&](float magnitude, int rank, std::size_t i) {
    if (magnitude == magnitudes.back()) return magnitude;
    return magnitude * (1.0f + 0.37f * float(rank) + 0.001f * float(i % 97)) * (i % 3 == 0 ? -1.0f : 1.0f);
  };
  for (int step = 0; step < 2; ++step) {
    Grads g;
    for (float magnitude : magnitudes) {
      g.storage.emplace_back(n);
      for (std::size_t i = 0; i < n; ++i) g.storage.back()[i] = value(magnitude, rank_, i);
    }
    reducer.begin(g.buffers());
    for (std::size_t i = magnitudes.size(); i-- > 0;) reducer.ready(i);
    reducer.finish();
    BOOST_TEST(reducer.bucket_count() == magnitudes.size());
    for (std::size_t b = 0; b < magnitudes.size(); ++b)
      for (std::size_t i = 0; i < n; ++i) {
        double want = 0;
        for (int r = 0; r < size_; ++r) want += value(magnitudes[b], r, i);
        // Each trainer's share rounded, and each partial sum: a few of fp16's 2^-11.
        if (!(std::abs(g.storage[b][i] - want) <= 2e-3 * std::abs(want))) {
          BOOST_ERROR("step " << step << ", magnitude " << magnitudes[b] << ", element " << i << ": " << g.storage[b][i]
                              << " != " << want);
          break;
        }
      }
  }
}

boost::test_tools::assertion_result gpu_present(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result present(!no_gpu());
  present.message() << "no GPU on this machine: the NCCL reducer is built and linked but not run";
  return present;
}

BOOST_AUTO_TEST_CASE(nccl_sums_exactly_on_gpus, *boost::unit_test::precondition(gpu_present)) {
  BOOST_REQUIRE(nccl_available());
  const int device = rank_ % visible_gpu_count();
  const std::vector<std::size_t> sizes{1000, 250000};
  Grads host = make_grads(sizes, rank_);
  std::vector<std::unique_ptr<DeviceFloats>> on_gpu;
  std::vector<FloatBuffer> buffers;
  for (auto& s : host.storage) {
    on_gpu.push_back(std::make_unique<DeviceFloats>(device, s.size()));
    on_gpu.back()->upload(s.data());
    buffers.push_back({on_gpu.back()->data(), s.size(), device});
  }
  auto reducer = make_reducer(MPI_COMM_WORLD, device, ReducerConfig{});
  reducer->all_reduce(buffers);
  for (std::size_t b = 0; b < sizes.size(); ++b) on_gpu[b]->download(host.storage[b].data());
  expect_sums(host, sizes);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(half_floats)

BOOST_AUTO_TEST_CASE(known_encodings) {
  BOOST_TEST(to_bf16(1.0f) == 0x3F80);
  BOOST_TEST(to_fp16(1.0f) == 0x3C00);
  BOOST_TEST(to_fp16(-2.0f) == 0xC000);
  BOOST_TEST(to_fp16(65504.0f) == 0x7BFF);
  BOOST_TEST(to_fp16(1e6f) == 0x7C00);           // overflow to infinity
  BOOST_TEST(to_fp16(5.9604645e-8f) == 0x0001);  // the smallest subnormal
  BOOST_TEST(from_fp16(0x0001) == 5.9604645e-8f);
  for (float v : {0.0f, 0.5f, 3.0f, -7.25f, 1000.0f, 0.099975586f}) BOOST_TEST(from_fp16(to_fp16(v)) == v);
  for (float v : {0.0f, 0.5f, 3.0f, -7.25f, 256.0f}) BOOST_TEST(from_bf16(to_bf16(v)) == v);
  // Round to nearest even: 1 + 2^-8 is halfway between two bf16 values and goes to the even one.
  BOOST_TEST(from_bf16(to_bf16(1.0f + 1.0f / 256)) == 1.0f);
  BOOST_TEST(std::abs(from_fp16(to_fp16(0.1f)) - 0.1f) < 1e-4f);
}

BOOST_AUTO_TEST_SUITE_END()

int main(int argc, char** argv) { return mpi_test_main(argc, argv, rank_, size_); }
