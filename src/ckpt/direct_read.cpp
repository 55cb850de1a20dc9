#include "direct_read.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <utility>

#include "arclight/core/crc32c.hpp"

namespace arclight::ckpt {

namespace {

// O_DIRECT's alignment of offsets, lengths and memory: 4 KB suits disks of 512-byte and of 4 KB sectors.
constexpr std::uint64_t block = 4096;
// One read of the disk, and how many may wait for their copy: the disk reads on while the helper copies.
constexpr std::uint64_t buffer_bytes = std::uint64_t(4) << 20;
constexpr std::size_t buffer_count = 4;
// Bytes between two datasets of a file (HDF5's metadata, a checksum) read over rather than sought past.
constexpr std::uint64_t largest_gap = std::uint64_t(1) << 20;
// The copy into place goes in pieces that stay in the cache between their checksum and their copy.
constexpr std::size_t copy_piece = std::size_t(256) << 10;

std::uint64_t align_down(std::uint64_t x) { return x & ~(block - 1); }
std::uint64_t align_up(std::uint64_t x) { return align_down(x + block - 1); }

class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  Descriptor(Descriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// The aligned buffers the disk reads into, each lent to one chunk until the helper has copied it
// (or dropped its copy: a job dropped after a failed check returns its buffer as it goes).
class Ring : public std::enable_shared_from_this<Ring> {
 public:
  Ring() : memory_(static_cast<char*>(std::aligned_alloc(std::size_t(2) << 20, buffer_count * buffer_bytes))) {
    if (!memory_) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    ::madvise(memory_, buffer_count * buffer_bytes, MADV_HUGEPAGE);  // a hint: failure is harmless
#endif
    for (std::size_t i = 0; i < buffer_count; ++i) free_.push_back(memory_ + i * buffer_bytes);
  }
  ~Ring() { std::free(memory_); }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  // A buffer, once one is free; it returns to the ring when the last copy of the pointer goes.
  std::shared_ptr<char> lend() {
    std::unique_lock<std::mutex> lock(mutex_);
    returned_.wait(lock, [this] { return !free_.empty(); });
    char* buffer = free_.back();
    free_.pop_back();
    return std::shared_ptr<char>(buffer, [ring = shared_from_this()](char* b) { ring->give_back(b); });
  }

 private:
  void give_back(char* buffer) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      free_.push_back(buffer);
    }
    returned_.notify_one();
  }

  char* memory_;
  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<char*> free_;
};

// The file behind HDF5's descriptor opened again with O_DIRECT; -1 where it does not open so, or
// is not the same file.
int open_direct(int descriptor, const StoredBytes& where) {
  const std::string self = "/proc/self/fd/" + std::to_string(descriptor);
  const int fd = ::open(self.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (::fstat(fd, &st) != 0 || st.st_dev != where.device || st.st_ino != where.inode) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads up to `bytes` at `offset`, on through short reads; fewer only at the file's end. -1 (errno set) on an error.
std::int64_t read_fully(int fd, char* into, std::uint64_t bytes, std::uint64_t offset) {
  std::uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, into + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += static_cast<std::uint64_t>(n);
    if (done % block != 0) break;  // a short read off a block's edge: the file ends there
  }
  return static_cast<std::int64_t>(done);
}

// What the helper's jobs share: each dataset's place, its checksum so far, and its check.
struct Targets {
  std::vector<DirectRead> reads;
  std::vector<float*> into;
  std::vector<std::uint32_t> crcs;
};

// The part of a chunk (the file's bytes [from, from + bytes), in `buffer`) that datasets
// [first, last) hold, copied into place with their checksums; a dataset's last part is checked.
void copy_out(Targets& t, const char* buffer, std::uint64_t from, std::uint64_t bytes, std::size_t first,
              std::size_t last) {
  for (std::size_t i = first; i < last; ++i) {
    const DirectRead& r = t.reads[i];
    const std::uint64_t lo = std::max(r.where.begin, from), hi = std::min(r.where.end, from + bytes);
    if (lo >= hi) continue;
    // A vector grows to hold a dataset where its first bytes arrive: room was reserved, so its data stays in place.
    if (lo == r.where.begin && r.values->size() < r.at + r.count) r.values->resize(r.at + r.count);
    char* into = reinterpret_cast<char*>(t.into[i]) + (lo - r.where.begin);
    for (std::uint64_t at = lo; at < hi; at += copy_piece) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(copy_piece, hi - at));
      t.crcs[i] = crc32c_extend(t.crcs[i], buffer + (at - from), n);
      std::memcpy(into + (at - lo), buffer + (at - from), n);
    }
    if (hi == r.where.end) r.check(t.crcs[i]);
  }
}

// Whether most of the bytes `reads` name are in the page cache (a version written or read moments ago: a restart on
// the same node, an export after a run), where a read through the cache is faster than the disk again.
bool mostly_cached(const std::vector<DirectRead>& reads) {
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  std::map<std::pair<dev_t, ino_t>, std::pair<const DirectRead*, std::uint64_t>> spans;  // first read, end
  std::uint64_t wanted = 0, cached = 0;
  for (const DirectRead& r : reads) {
    auto [span, added] = spans.try_emplace({r.where.device, r.where.inode}, &r, r.where.end);
    if (!added) span->second.second = std::max(span->second.second, r.where.end);
    wanted += r.where.end - r.where.begin;
  }
  for (const auto& [file, span] : spans) {
    const std::uint64_t from = span.first->where.begin & ~(page - 1), bytes = span.second - from;
    void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, span.first->descriptor, static_cast<off_t>(from));
    if (map == MAP_FAILED) continue;  // not known: counted as not cached
    std::vector<unsigned char> resident((bytes + page - 1) / page);
    if (::mincore(map, bytes, resident.data()) == 0)
      for (unsigned char in : resident) cached += (in & 1) * page;
    ::munmap(map, bytes);
  }
  return cached >= wanted / 2;
}

}  // namespace

bool read_direct(const std::vector<DirectRead>& reads, RestoreHelper& helper) {
  if (reads.empty()) return true;
  if (mostly_cached(reads)) return false;
  auto targets = std::make_shared<Targets>();
  std::map<std::pair<dev_t, ino_t>, Descriptor> files;
  for (const DirectRead& r : reads) {
    if (r.values->capacity() < r.at + r.count) return false;  // room not reserved: a read through HDF5 grows it
    const auto file = std::make_pair(r.where.device, r.where.inode);
    if (files.count(file) == 0) {
      const int fd = open_direct(r.descriptor, r.where);
      if (fd < 0) return false;
      files.emplace(file, Descriptor(fd));
    }
  }
  auto ring = std::make_shared<Ring>();
  {
    // A file system may open with O_DIRECT and refuse the reads (EINVAL): one block of each file, tried first.
    const std::shared_ptr<char> probe = ring->lend();
    for (const auto& [file, descriptor] : files)
      if (read_fully(descriptor.fd(), probe.get(), block, 0) < 0) return false;
  }
  targets->reads = reads;
  targets->crcs.assign(reads.size(), 0);
  for (const DirectRead& r : reads) targets->into.push_back(r.values->data() + r.at);

  for (std::size_t first = 0; first < reads.size();) {
    // A run: datasets of one file with little between them, read in chunks of the buffers' size.
    std::size_t end = first + 1;
    while (end < reads.size() && reads[end].where.device == reads[first].where.device &&
           reads[end].where.inode == reads[first].where.inode && reads[end].where.begin >= reads[end - 1].where.end &&
           reads[end].where.begin - reads[end - 1].where.end <= largest_gap)
      ++end;
    const int fd = files.at({reads[first].where.device, reads[first].where.inode}).fd();
    const std::uint64_t run_end = reads[end - 1].where.end;
    std::size_t in_chunk = first;  // the first dataset that the chunk may hold
    for (std::uint64_t from = align_down(reads[first].where.begin); from < run_end; from += buffer_bytes) {
      if (helper.failed()) return true;  // a check failed: helper.finish() says which
      const std::uint64_t wanted = std::min(buffer_bytes, align_up(run_end) - from);
      std::shared_ptr<char> buffer = ring->lend();
      const std::int64_t got = read_fully(fd, buffer.get(), wanted, from);
      while (reads[in_chunk].where.end <= from) ++in_chunk;
      if (got < 0 || std::uint64_t(got) < std::min(wanted, run_end - from))
        throw CorruptCheckpoint(reads[in_chunk].what + ": cannot read it" +
                                (got < 0 ? std::string(": ") + std::strerror(errno) : " (the file ends before it)"));
      std::size_t past = in_chunk;  // one past the last dataset that begins in the chunk
      while (past < end && reads[past].where.begin < from + wanted) ++past;
      helper.post([targets, buffer, from, got, in_chunk, past] {
        copy_out(*targets, buffer.get(), from, std::uint64_t(got), in_chunk, past);
      });
    }
    first = end;
  }
  return true;
}

}  // namespace arclight::ckpt
