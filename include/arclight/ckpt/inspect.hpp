#pragma once
#include <string>
#include <vector>

namespace arclight::ckpt {

struct VersionFile {
  std::string path;
  unsigned long long bytes = 0;           // the file's own size
  unsigned long long linked_bytes = 0;    // dataset bytes it reaches through links to other versions
  std::string parent;                     // the version it is incremental on; empty when full
  std::vector<std::string> links_to;      // every version file it links to
  bool valid = false;                     // reads back and passes every checksum
  std::string problem;                    // why not
  std::vector<std::string> damaged_logs;  // valid, but these segments of its metrics or span log are not
  long long step = -1;
  long long policy_version = -1;
};

struct DirectoryReport {
  std::string dir;
  std::string latest;                    // the version LATEST names, or empty
  bool latest_names_no_version = false;  // LATEST is there but holds no version's name
  std::vector<VersionFile> versions;     // v<NNNNNNNN>.h5, oldest first
};

// Reads a checkpoint directory. Throws UsageError when `dir` is not a directory.
DirectoryReport inspect_directory(const std::string& dir);

// A human-readable description; says so plainly when there is no checkpoint.
std::string describe(const DirectoryReport& report);

}  // namespace arclight::ckpt
