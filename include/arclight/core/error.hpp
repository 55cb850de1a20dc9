#pragma once
#include <stdexcept>
#include <string>

namespace arclight {

// Exit codes of the arclight binary. The Slurm scripts map `requeue` to a requeue.
enum ExitCode : int {
  exit_ok = 0,
  exit_failure = 1,  // a fault at run time
  exit_usage = 2,    // bad input: config, command line, checkpoint, wire message
  exit_requeue = 3,  // checkpointed on a pre-emption signal; run me again
};

// An error with the exit code the whole job should end with.
class Error : public std::runtime_error {
 public:
  Error(const std::string& what, int exit_code = exit_failure) : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// Bad input a user can fix: a config value, a command-line flag, a layout.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(what, exit_usage) {}
};

}  // namespace arclight
