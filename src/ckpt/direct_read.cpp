#include "direct_read.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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
// Bytes between two datasets of a file (HDF5's metadata) read over rather than sought past: not a tensor's moments,
// which a read of the parameters alone (an export) leaves.
constexpr std::uint64_t largest_gap = std::uint64_t(64) << 10;
// The copy into place goes in pieces that stay in the cache between their checksum and their copy.
constexpr std::size_t copy_piece = std::size_t(256) << 10;

std::uint64_t align_down(std::uint64_t x) { return x & ~(block - 1); }
std::uint64_t align_up(std::uint64_t x) { return align_down(x + block - 1); }

}  // namespace

// The aligned buffers the disk reads into, each lent to one chunk until the helper has copied it
// (or dropped its copy: a job dropped after a failed check returns its buffer as it goes).
class DirectFiles::Ring : public std::enable_shared_from_this<Ring> {
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

namespace {

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

// Reads up to `bytes` at `offset`, on through short reads; fewer only at the file's end (or, direct, where a read
// comes back short off a block's edge: the next would be refused). -1 (errno set) on an error.
std::int64_t read_fully(int fd, char* into, std::uint64_t bytes, std::uint64_t offset, bool direct) {
  std::uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, into + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += static_cast<std::uint64_t>(n);
    if (direct && done % block != 0) break;
  }
  return static_cast<std::int64_t>(done);
}

// What the helper's jobs share: each dataset's place, its checksum so far, and its check.
struct Targets {
  std::vector<DirectRead> reads;
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
    char* into = reinterpret_cast<char*>(r.values->data() + r.at) + (lo - r.where.begin);
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
  std::uint64_t wanted = 0, cached = 0;
  for (std::size_t first = 0, end = 0; first < reads.size(); first = end) {
    // The reads of one file, whose span is mapped (not read) once and asked which of its pages are in memory.
    for (end = first + 1; end < reads.size() && reads[end].where.device == reads[first].where.device &&
                          reads[end].where.inode == reads[first].where.inode;
         ++end) {
    }
    const std::uint64_t from = reads[first].where.begin & ~(page - 1), bytes = reads[end - 1].where.end - from;
    std::vector<unsigned char> resident((bytes + page - 1) / page);
    void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, reads[first].descriptor, static_cast<off_t>(from));
    const bool known = map != MAP_FAILED && ::mincore(map, bytes, resident.data()) == 0;
    if (map != MAP_FAILED) ::munmap(map, bytes);
    for (std::size_t i = first; i < end; ++i) {
      const DirectRead& r = reads[i];
      wanted += r.where.end - r.where.begin;
      if (!known) continue;  // counted as not cached
      // The dataset's own bytes of each page it touches (two small datasets may share a page).
      for (std::uint64_t at = r.where.begin; at < r.where.end;) {
        const std::uint64_t p = (at - from) / page, page_end = std::min(r.where.end, from + (p + 1) * page);
        if (resident[p] & 1) cached += page_end - at;
        at = page_end;
      }
    }
  }
  return 2 * cached > wanted;
}

std::atomic<DirectReads> direct_reads{DirectReads::automatic};

}  // namespace

void set_direct_reads(DirectReads how) { direct_reads = how; }
DirectReads direct_reads_now() { return direct_reads; }

std::unique_ptr<DirectFiles> DirectFiles::open(const std::vector<DirectRead>& reads) {
  const DirectReads how = direct_reads;
  if (reads.empty() || how == DirectReads::never || (how == DirectReads::automatic && mostly_cached(reads)))
    return nullptr;
  std::unique_ptr<DirectFiles> opened(new DirectFiles);
  for (const DirectRead& r : reads) {
    if (r.values->capacity() < r.at + r.count) return nullptr;  // room not reserved: a read through HDF5 grows it
    File& file = opened->files_[{r.where.device, r.where.inode}];
    if (file.direct >= 0) continue;
    file.buffered = r.descriptor;
    file.direct = open_direct(r.descriptor, r.where);
    if (file.direct < 0) return nullptr;
  }
  opened->ring_ = std::make_shared<Ring>();
  // A file system may open with O_DIRECT and refuse the reads (EINVAL): one block of each file, tried first.
  const std::shared_ptr<char> probe = opened->ring_->lend();
  for (const auto& [id, file] : opened->files_)
    if (read_fully(file.direct, probe.get(), block, 0, true) < 0) return nullptr;
  return opened;
}

DirectFiles::~DirectFiles() {
  for (const auto& [id, file] : files_)
    if (file.direct >= 0) ::close(file.direct);
}

void DirectFiles::read(const std::vector<DirectRead>& reads, RestoreHelper& helper) {
  auto targets = std::make_shared<Targets>();
  targets->reads = reads;
  targets->crcs.assign(reads.size(), 0);

  for (std::size_t first = 0, end = 0; first < reads.size(); first = end) {
    // A run: datasets of one file with little between them, read in chunks of the buffers' size.
    for (end = first + 1;
         end < reads.size() && reads[end].where.device == reads[first].where.device &&
         reads[end].where.inode == reads[first].where.inode && reads[end].where.begin >= reads[end - 1].where.end &&
         reads[end].where.begin - reads[end - 1].where.end <= largest_gap;
         ++end) {
    }
    const File& file = files_.at({reads[first].where.device, reads[first].where.inode});
    const std::uint64_t run_end = reads[end - 1].where.end;
    std::size_t in_chunk = first;  // the first dataset that the chunk may hold
    for (std::uint64_t from = align_down(reads[first].where.begin); from < run_end; from += buffer_bytes) {
      if (helper.failed()) return;  // a check failed: helper.finish() says which
      const std::uint64_t wanted = std::min(buffer_bytes, align_up(run_end) - from),
                          needed = std::min(wanted, run_end - from);
      std::shared_ptr<char> buffer = ring_->lend();
      std::int64_t got = read_fully(file.direct, buffer.get(), wanted, from, true);
      // What the direct reads did not return (an error, or a file system that ends them short) through the page
      // cache, which has no rules of alignment.
      if (got < 0 || std::uint64_t(got) < needed) got = read_fully(file.buffered, buffer.get(), needed, from, false);
      const int error = errno;
      while (reads[in_chunk].where.end <= from) ++in_chunk;
      if (got < 0 || std::uint64_t(got) < needed) {
        std::size_t short_of = in_chunk;  // the dataset whose bytes did not come
        while (got >= 0 && reads[short_of].where.end <= from + std::uint64_t(got)) ++short_of;
        throw CorruptCheckpoint(reads[short_of].what + ": cannot read it" +
                                (got < 0 ? std::string(": ") + std::strerror(error) : " (the file ends before it)"));
      }
      std::size_t past = in_chunk;  // one past the last dataset that begins in the chunk
      while (past < end && reads[past].where.begin < from + wanted) ++past;
      helper.post([targets, buffer, from, got, in_chunk, past] {
        copy_out(*targets, buffer.get(), from, std::uint64_t(got), in_chunk, past);
      });
    }
  }
}

}  // namespace arclight::ckpt
