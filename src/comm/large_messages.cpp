#include "arclight/comm/large_messages.hpp"

#include <algorithm>

namespace arclight::comm {
namespace {
template <class Post>
std::vector<MPI_Request> in_chunks(std::size_t size, std::size_t chunk, const Post& post) {
  std::vector<MPI_Request> requests;
  std::size_t at = 0;
  do {  // at least one, so that an empty payload still completes a broadcast and is a message
    const std::size_t n = std::min(chunk, size - at);
    requests.emplace_back();
    post(at, static_cast<int>(n), &requests.back());
    at += n;
  } while (at < size);
  return requests;
}
}  // namespace

std::vector<MPI_Request> ibcast_large(void* data, std::size_t size, int root, MPI_Comm comm, std::size_t chunk) {
  char* bytes = static_cast<char*>(data);
  return in_chunks(size, chunk,
                   [&](std::size_t at, int n, MPI_Request* r) { MPI_Ibcast(bytes + at, n, MPI_BYTE, root, comm, r); });
}

std::vector<MPI_Request> isend_large(const void* data, std::size_t size, int dest, int tag, MPI_Comm comm,
                                     std::size_t chunk) {
  const char* bytes = static_cast<const char*>(data);
  return in_chunks(size, chunk, [&](std::size_t at, int n, MPI_Request* r) {
    MPI_Isend(bytes + at, n, MPI_BYTE, dest, tag, comm, r);
  });
}

std::vector<MPI_Request> irecv_large(void* data, std::size_t size, int source, int tag, MPI_Comm comm,
                                     std::size_t chunk) {
  char* bytes = static_cast<char*>(data);
  return in_chunks(size, chunk, [&](std::size_t at, int n, MPI_Request* r) {
    MPI_Irecv(bytes + at, n, MPI_BYTE, source, tag, comm, r);
  });
}

}  // namespace arclight::comm
