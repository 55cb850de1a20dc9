#pragma once
// A fresh directory under the system's temporary directory, removed with everything in it.
#include <stdlib.h>

#include <filesystem>
#include <string>

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "arclight_test.XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string dir() const { return path.string(); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};
