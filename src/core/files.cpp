#include "arclight/core/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "arclight/core/error.hpp"

namespace arclight {

std::string os_error(int number) {
  const char* name = strerrorname_np(number);
  return std::string(std::strerror(number)) + (name ? std::string(" (") + name + ")" : std::string());
}

void sync_to_disk(const std::string& path, bool directory) {
  // O_CLOEXEC: runner ranks start agent processes, which must not inherit the descriptor.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  const bool synced = fd >= 0 && ::fsync(fd) == 0;
  const int error = errno;
  if (fd >= 0) ::close(fd);
  if (!synced) throw Error("cannot fsync " + path + ": " + os_error(error));
}

}  // namespace arclight
