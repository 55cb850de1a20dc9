// Writing a version: the steps of write_checkpoint, each a function of its own.
#include <unistd.h>

#include <cerrno>

#include <deque>
#include <exception>
#include <filesystem>
#include <map>
#include <set>

#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/core/files.hpp"
#include "hdf5_io.hpp"
#include "plan.hpp"

namespace arclight::ckpt {
namespace fs = std::filesystem;

namespace {

// One write of a version, as this rank sees it.
struct VersionWrite {
  std::string dir;
  std::int64_t version = 0;
  const WriteOptions& options;
  bool parallel = false;
  int me = 0, ranks = 1;
  std::string final_path, tmp_path;
  std::deque<std::string> keep;  // bytes the blobs point into
  std::vector<Blob> blobs;

  VersionWrite(const std::string& d, std::int64_t v, const WriteOptions& o)
      : dir(d), version(v), options(o), parallel(o.comm != MPI_COMM_NULL) {
    if (parallel) {
      MPI_Comm_rank(options.comm, &me);
      MPI_Comm_size(options.comm, &ranks);
    }
    final_path = (fs::path(dir) / version_file_name(version)).string();
    tmp_path = final_path + ".tmp";
  }
};

// A handle in a file that several ranks write together. Closing it is collective: a rank whose
// own part failed leaves it open on the way out, rather than wait in a close that the others
// (busy with the next dataset, or a flush) never reach. The job ends on such a failure anyway.
struct SharedHandle : Handle {
  SharedHandle(const VersionWrite& w, hid_t id, herr_t (*close)(hid_t), const std::string& what)
      : Handle(id, close, what), parallel(w.parallel) {}
  ~SharedHandle() {
    if (parallel && std::uncaught_exceptions() > 0) id = -1;
  }
  bool parallel;
};

// 1. What every rank holds (describe_blobs), gathered at rank 0: one string a rank there.
std::vector<std::string> gather_descriptions(const VersionWrite& w) {
  const std::string mine = describe_blobs(w.blobs);
  std::vector<std::string> described(static_cast<std::size_t>(w.ranks));
  if (!w.parallel) {
    described[0] = mine;
    return described;
  }
  int size = static_cast<int>(mine.size());
  std::vector<int> sizes(static_cast<std::size_t>(w.ranks)), offsets(static_cast<std::size_t>(w.ranks));
  MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, w.options.comm);
  std::string all;
  if (w.me == 0) {
    int total = 0;
    for (int r = 0; r < w.ranks; ++r) offsets[r] = total, total += sizes[r];
    all.resize(static_cast<std::size_t>(total));
  }
  MPI_Gatherv(mine.data(), size, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE, 0, w.options.comm);
  if (w.me == 0)
    for (int r = 0; r < w.ranks; ++r) described[r] = all.substr(offsets[r], sizes[r]);
  return described;
}

// 2. Rank 0 plans (full or incremental on LATEST, links for what did not change) and every
// rank receives the plan.
std::vector<PlanEntry> plan_on_rank0(VersionWrite& w, const std::vector<std::string>& described) {
  std::string plan;
  if (w.me == 0) {
    remove_stale(w.tmp_path);  // before the plan reaches the others: they create the file with it
    plan = plan_version(w.dir, w.version, w.options, described, w.blobs, w.keep);
  }
  if (w.parallel) {
    std::uint64_t size = plan.size();
    MPI_Bcast(&size, 1, MPI_UINT64_T, 0, w.options.comm);
    plan.resize(size);
    MPI_Bcast(plan.data(), static_cast<int>(size), MPI_BYTE, 0, w.options.comm);
  }
  return decode_plan(plan);
}

// The file, created by every rank of a parallel write together (MPI-IO, collective metadata).
hid_t create_file(const VersionWrite& w) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "file access list");
  if (w.parallel) {
    H5Pset_fapl_mpio(fapl.id, w.options.comm, MPI_INFO_NULL);
    H5Pset_all_coll_metadata_ops(fapl.id, true);
    H5Pset_coll_metadata_write(fapl.id, true);
  }
  // O_EXCL (rank 0 removed a stale one): a link planted under the name fails the create.
  return H5Fcreate(w.tmp_path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.id);
}

void create_groups(hid_t file, const std::vector<PlanEntry>& entries) {
  std::set<std::string> groups;
  for (const PlanEntry& e : entries)
    for (std::size_t at = e.path.find('/', 1); at != std::string::npos; at = e.path.find('/', at + 1))
      groups.insert(e.path.substr(0, at));
  for (const std::string& g : groups)  // in name order: a group before its children
    Handle(H5Gcreate2(file, g.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose, "cannot create group " + g);
}

// Every rank creates every dataset and link (metadata is collective); only the owner writes
// a dataset's data.
void write_entries(const VersionWrite& w, hid_t file, const std::vector<PlanEntry>& entries) {
  std::map<std::string, const Blob*> by_path;
  for (const Blob& b : w.blobs) by_path[b.path] = &b;
  for (const PlanEntry& e : entries) {
    if (!e.link_file.empty()) {
      if (H5Lcreate_external(e.link_file.c_str(), e.link_object.c_str(), file, e.path.c_str(), H5P_DEFAULT,
                             H5P_DEFAULT) < 0)
        throw Error("checkpoint: cannot link " + e.path);
      continue;
    }
    hsize_t dims[1] = {e.count};
    Handle space(H5Screate_simple(1, dims, nullptr), H5Sclose, e.path);
    SharedHandle set(w,
                     H5Dcreate2(file, e.path.c_str(), h5type(e.kind), space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                     H5Dclose, "checkpoint: cannot create " + e.path);
    if (e.owner == w.me && e.count > 0)
      write_in_pieces(set.id, space.id, e.kind, e.count, static_cast<const char*>(by_path.at(e.path)->data), e.path,
                      w.tmp_path);
    write_checksums(set.id, e.sums, e.path);
  }
}

// 3. Every rank: create the file and its datasets together, write what it holds, close.
void write_file(const VersionWrite& w, const std::vector<PlanEntry>& entries) {
  SharedHandle file(w, create_file(w), H5Fclose, "checkpoint: cannot create " + w.tmp_path);
  create_groups(file.id, entries);
  write_entries(w, file.id, entries);
  if (w.options.before_close && w.me == 0) w.options.before_close();
  if (w.parallel && H5Fflush(file.id, H5F_SCOPE_GLOBAL) < 0) throw Error("checkpoint: cannot flush " + w.tmp_path);
  const hid_t id = file.id;
  file.id = -1;
  if (H5Fclose(id) < 0) throw Error("checkpoint: cannot close " + w.tmp_path);
}

// 4. Every rank's bytes are on disk (each rank fsyncs what it wrote, from its own node)
// before rank 0 commits.
void sync_all(const VersionWrite& w) {
  sync_to_disk(w.tmp_path, false);
  if (w.parallel) MPI_Barrier(w.options.comm);
}

// 5. Rank 0 commits: the file's bytes, then its name, then LATEST; each survives a crash of the next. `renamed` says
// the temporary is gone into place.
void commit(const VersionWrite& w, bool& renamed) {
  fs::rename(w.tmp_path, w.final_path);
  renamed = true;
  sync_to_disk(w.dir, true);
  set_latest(w.dir, version_file_name(w.version));
}

}  // namespace

std::string write_checkpoint(const std::string& dir, std::int64_t version, const Checkpoint& c,
                             const WriteOptions& options) {
  const std::lock_guard<std::recursive_mutex> hdf5(hdf5_mutex());
  const QuietHdf5Errors quiet;
  VersionWrite w(dir, version, options);
  w.blobs = blobs_of(c, options.part, w.keep);
  const std::vector<std::string> described = gather_descriptions(w);
  const std::vector<PlanEntry> entries = plan_on_rank0(w, described);
  bool renamed = false;
  try {
    write_file(w, entries);
    sync_all(w);
    if (w.me == 0) commit(w, renamed);
  } catch (const std::exception& e) {
    // Whichever rank fails removes the temporary: no other rank can commit it now (the commit
    // follows a barrier this rank never reaches), and nothing else would remove it. Gone
    // already, and not by rank 0's own commit: another rank failed first, and this failure is likely the consequence.
    if (!renamed && ::unlink(w.tmp_path.c_str()) != 0 && errno == ENOENT && w.parallel)
      throw PeerWriteFailed(std::string("checkpoint: another rank's write of ") + w.tmp_path + " failed first (" +
                            e.what() + ")");
    throw;
  }
  return w.final_path;
}

}  // namespace arclight::ckpt
