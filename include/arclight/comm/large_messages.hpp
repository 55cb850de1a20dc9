#pragma once
// MPI counts are ints: a broadcast of more than 2 GiB (the weights of a 1.2 B parameter
// model are 4.8 GB) goes as several, of at most `chunk` bytes each, in order.
#include <mpi.h>

#include <cstddef>
#include <vector>

namespace arclight::comm {

inline constexpr std::size_t default_chunk = std::size_t(1) << 30;

// Posts a broadcast of `size` bytes from `root`; the caller completes the requests (MPI_Testall).
std::vector<MPI_Request> ibcast_large(void* data, std::size_t size, int root, MPI_Comm comm,
                                      std::size_t chunk = default_chunk);

}  // namespace arclight::comm
