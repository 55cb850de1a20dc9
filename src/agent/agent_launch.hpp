#pragma once
// Starting an agent worker's process (agent-private; the supervisor is agent_processes.cpp): its command and
// environment, its descriptors, and the child's side of the fork, which becomes the worker's guard.
#include <sys/types.h>

#include <string>
#include <vector>

#include "arclight/agent/agent_processes.hpp"

namespace arclight::agent {

std::string error_text(int err);  // errno's meaning, for messages

// argv[0] as execve needs it; UsageError where it is not found.
std::string resolve_command(const std::string& name, const std::vector<std::string>& environment);

// The environment of every worker; UsageError for an entry that is not NAME=VALUE.
std::vector<std::string> worker_environment(const std::vector<std::string>& extra);

// argv / envp over `strings` (which must outlive them), ending in a null pointer.
std::vector<char*> c_strings(std::vector<std::string>& strings);

int above_stdio(int fd);
void close_fd(int& fd);

// What the child needs, prepared before fork: nothing in the child allocates.
struct ChildPlan {
  const char* path;
  char* const* argv;
  char* const* envp;
  pid_t parent;
  int stdin_fd, output_fd, status_fd;
  int max_fd;
};

[[noreturn]] void exec_child(const ChildPlan& plan);

WorkerExit exit_of(int status);  // from waitpid's status

}  // namespace arclight::agent
