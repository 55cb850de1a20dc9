#pragma once
#include <string>

namespace arclight {

// An errno as a message: its text and its name ("No space left on device (ENOSPC)").
std::string os_error(int number);

// Puts a file's bytes, or a directory's entries, on disk (fsync(2)): a new name survives a
// crash only once the directory holding it is synced. Throws Error("cannot fsync PATH: why").
void sync_to_disk(const std::string& path, bool directory = false);

}  // namespace arclight
