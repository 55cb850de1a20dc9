#pragma once
// MPI counts are ints: a broadcast or message of more than 2 GiB (the weights of a 1.2 B parameter model
// are 4.8 GB) goes as several, of at most `chunk` bytes each, in order.
#include <mpi.h>

#include <cstddef>
#include <vector>

namespace arclight::comm {

inline constexpr std::size_t default_chunk = std::size_t(1) << 30;

// Posts a broadcast of `size` bytes from `root`; the caller completes the requests (MPI_Testall).
std::vector<MPI_Request> ibcast_large(void* data, std::size_t size, int root, MPI_Comm comm,
                                      std::size_t chunk = default_chunk);

// Posts the sends of `size` bytes to `dest` with `tag`, one per chunk (at least one, so that an
// empty payload is a message too); the caller completes the requests (MPI_Testall).
std::vector<MPI_Request> isend_large(const void* data, std::size_t size, int dest, int tag, MPI_Comm comm,
                                     std::size_t chunk = default_chunk);

// Posts the matching receives of up to `size` bytes from `source`. A shorter message may take
// the first one's place (a few bytes of control): the caller reads it and cancels the rest.
std::vector<MPI_Request> irecv_large(void* data, std::size_t size, int source, int tag, MPI_Comm comm,
                                     std::size_t chunk = default_chunk);

}  // namespace arclight::comm
