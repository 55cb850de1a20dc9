#pragma once
// Between a runner's AgentProcesses and the guard it starts for each agent worker (agent_guard.cpp): the guard starts
// the agent as the leader of a process group, joins it, and kills the whole group when the runner is gone, even a
// runner killed with SIGKILL, whose agents' own children PDEATHSIG would not reach.
#include <csignal>

namespace arclight::agent::guard {

// The executable's name; AgentProcesses looks for it beside the running program, then where the build put it.
inline constexpr const char* executable = "arclight-agent-guard";

// The signal the guard gets when the runner thread that started it ends (PR_SET_PDEATHSIG, set before the exec):
// it kills its process group, itself included.
inline constexpr int runner_gone_signal = SIGHUP;

// Descriptor 3 of the guard (and of the agent until its exec, which closes it) carries records of two ints to the
// runner, which reads them until the pipe ends.
inline constexpr int status_fd = 3;
enum Record : int {
  agent_started = 1,      // the value: the agent's pid, also its process group's id
  agent_exec_failed = 2,  // the value: execve's errno
  guard_failed = 3,       // the value: the errno of the guard's own exec
  agent_fork_failed = 4,  // the value: fork's errno
};

}  // namespace arclight::agent::guard
