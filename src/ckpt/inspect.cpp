#include "arclight/ckpt/inspect.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/core/error.hpp"
#include "hdf5_io.hpp"

namespace arclight::ckpt {
namespace fs = std::filesystem;

DirectoryReport inspect_directory(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw UsageError("inspect: '" + dir + "' is not a directory");
  DirectoryReport report;
  report.dir = dir;
  report.latest = latest_version(dir);
  report.latest_names_no_version = report.latest.empty() && fs::exists(fs::symlink_status(fs::path(dir) / "LATEST"));
  static const std::regex version_name{R"(v[0-9]{8}\.h5)"};
  fs::directory_iterator entries(dir, ec);
  if (ec) throw Error("inspect: cannot list '" + dir + "': " + ec.message());  // not "no checkpoint"
  for (const fs::directory_entry& entry : entries) {
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, version_name)) continue;
    VersionFile v;
    v.path = entry.path().string();
    // Named as a version but no file to read (a dangling link, a link loop, a directory): said, not skipped.
    std::error_code entry_error;
    if (!entry.is_regular_file(entry_error)) {
      v.problem = "not a readable file" + (entry_error ? " (" + entry_error.message() + ")" : std::string());
      report.versions.push_back(v);
      continue;
    }
    v.bytes = entry.file_size(entry_error);
    try {
      v.links_to = linked_files(v.path);
      v.linked_bytes = version_sizes(v.path).linked;
      Checkpoint c = read_checkpoint(v.path);
      v.parent = c.parent;
      v.damaged_logs = c.damaged_logs;
      v.valid = true;
      v.step = c.step;
      v.policy_version = c.policy_version;
    } catch (const Error& e) {  // damaged, or a file that does not open now: said, and the others still listed
      v.problem = e.what();
    }
    report.versions.push_back(v);
  }
  std::sort(report.versions.begin(), report.versions.end(),
            [](const VersionFile& a, const VersionFile& b) { return a.path < b.path; });
  return report;
}

std::string describe(const DirectoryReport& report) {
  std::ostringstream out;
  if (report.versions.empty()) {
    out << "no checkpoint in " << report.dir;
    return out.str();
  }
  out << "checkpoints in " << printable(report.dir) << " ("
      << (report.latest_names_no_version ? std::string("LATEST does not name a version file")
                                         : "LATEST: " + (report.latest.empty() ? std::string("none") : report.latest))
      << ")";
  for (const VersionFile& v : report.versions) {
    out << "\n  " << fs::path(v.path).filename().string() << "  own " << v.bytes << " bytes, linked " << v.linked_bytes
        << " bytes  ";
    if (v.valid) {
      out << "step " << v.step << "  policy version " << v.policy_version << "  "
          << (v.parent.empty() ? std::string("full") : "parent " + v.parent);
      std::vector<std::string> versions;
      std::size_t segments = 0;
      for (const std::string& f : v.links_to) {
        if (f.rfind("segments/", 0) == 0)
          ++segments;
        else
          versions.push_back(f);
      }
      out << " (links to";
      for (const std::string& f : versions) out << " " << f;
      out << (versions.empty() ? " " : " and ") << segments << " log segments)";
      out << "  valid";
      for (const std::string& damaged : v.damaged_logs)
        out << "\n    DAMAGED, left out of its logs on restore: " << printable(damaged);
    } else {
      out << "INVALID: " << printable(v.problem);
    }
  }
  return out.str();
}

}  // namespace arclight::ckpt
