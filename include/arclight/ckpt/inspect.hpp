#pragma once
#include <string>
#include <vector>

namespace arclight::ckpt {

struct VersionFile {
  std::string path;
  unsigned long long bytes = 0;
  bool valid = false;       // reads back and passes every checksum
  std::string problem;      // why not
  long long step = -1;
  long long policy_version = -1;
};

struct DirectoryReport {
  std::string dir;
  std::string latest;               // what LATEST names, or empty
  std::vector<VersionFile> versions;  // v<NNNNNNNN>.h5, oldest first
};

// Reads a checkpoint directory. Throws UsageError when `dir` is not a directory.
DirectoryReport inspect_directory(const std::string& dir);

// A human-readable description; says so plainly when there is no checkpoint.
std::string describe(const DirectoryReport& report);

}  // namespace arclight::ckpt
