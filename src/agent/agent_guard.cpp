// arclight-agent-guard PATH ARGV0 [ARG...]: started by a runner (AgentProcesses) for each agent worker, with the
// runner's death signal set (agent_guard.hpp). It runs PATH with ARGV0 ARG... as the leader of a process group of
// its own, which the guard joins; waits for it; kills what the agent left in its group; and ends the way the agent
// ended, so that the runner reads the agent's end. Should the runner go first, the guard kills the whole group: the
// agent and every process the agent started in it. A small program of its own: a guard forked from the runner
// without exec would keep, copy-on-write, every page the runner changes later.
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <initializer_list>

#include "agent_guard.hpp"

namespace guard = arclight::agent::guard;

namespace {

pid_t runner = 0;                            // the process that started the guard
volatile std::sig_atomic_t agent_group = 0;  // the agent's group while the agent is not reaped (its pid keeps the id)

void report(guard::Record kind, int value) {
  const int record[2] = {kind, value};
  [[maybe_unused]] ssize_t n = ::write(guard::status_fd, record, sizeof record);
}

void set_action(int sig, void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  ::sigaction(sig, &action, nullptr);
}

// The runner gone: the agent's group and the guard go. A SIGHUP from anyone else (an agent's `kill -HUP 0`) is not
// the runner's end: the runner's death signal comes from the runner, and the guard has a new parent by then.
void on_runner_signal(int, siginfo_t* info, void*) {
  if (info->si_pid != runner && ::getppid() == runner) return;
  if (agent_group > 0) ::kill(-agent_group, SIGKILL);
  ::kill(0, SIGKILL);
}

[[noreturn]] void exec_agent(char** argv, pid_t guard_pid) {
  ::setpgid(0, 0);                     // leads a group of its own (as the guard's parent also makes it)
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with its guard, whatever ends it
  if (::getppid() != guard_pid) ::_exit(127);
  // The agent starts with every signal at its default and none blocked, as from a shell.
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) set_action(sig, SIG_DFL);
  ::execve(argv[1], argv + 2, environ);
  report(guard::agent_exec_failed, errno);
  ::_exit(127);
}

// Ends this process as the agent ended: the same exit code, or killed by the same signal (with no core dump or
// crash report of the guard's own).
[[noreturn]] void end_like(int status) {
  if (WIFEXITED(status)) ::_exit(WEXITSTATUS(status));
  const int sig = WTERMSIG(status);
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  ::prctl(PR_SET_DUMPABLE, 0);  // a core_pattern that pipes to a handler ignores RLIMIT_CORE
  set_action(sig, SIG_DFL);
  sigset_t only;
  ::sigemptyset(&only);
  ::sigaddset(&only, sig);
  ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
  ::raise(sig);
  ::_exit(128 + sig);  // a signal whose default does not end a process
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s PATH ARGV0 [ARG...] (started by arclight's runners, not by hand)\n", argv[0]);
    return 2;
  }
  runner = ::getppid();
  // Had the runner's signal come before this, its default ended the guard before it started anything.
  struct sigaction gone {};
  gone.sa_sigaction = on_runner_signal;
  gone.sa_flags = SA_SIGINFO;
  ::sigaction(guard::runner_gone_signal, &gone, nullptr);
  // Whatever else reaches the group (the runner's SIGTERM at its stop, the agent's `kill -ALRM 0`, a SIGTSTP) is
  // for the agent: the guard stays, running, to report its end. A fault of the guard's own still ends it.
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != guard::runner_gone_signal && sig != SIGCHLD && sig != SIGKILL && sig != SIGSTOP)
      set_action(sig, SIG_IGN);
  ::fcntl(guard::status_fd, F_SETFD, FD_CLOEXEC);  // the agent's exec closes its copy
  // The runner's end waits until the guard knows the agent's group.
  sigset_t runner_signal;
  ::sigemptyset(&runner_signal);
  ::sigaddset(&runner_signal, guard::runner_gone_signal);
  ::sigprocmask(SIG_BLOCK, &runner_signal, nullptr);
  const pid_t guard_pid = ::getpid();
  const pid_t agent = ::fork();
  if (agent < 0) {
    report(guard::agent_fork_failed, errno);
    return 127;
  }
  if (agent == 0) exec_agent(argv, guard_pid);
  agent_group = agent;
  // The agent leads its group (its setpgid and setsid do what they did before it had a guard); the guard joins it,
  // so that the runner's signals to the group reach both, and the guard's `kill(0, ...)` reaches the agent's.
  ::setpgid(agent, agent);
  ::setpgid(0, agent);
  ::sigprocmask(SIG_UNBLOCK, &runner_signal, nullptr);
  report(guard::agent_started, agent);
  // The runner learns that the agent runs when the status pipe ends; its output, when the agent's own ends.
  ::close(guard::status_fd);
  const int null = ::open("/dev/null", O_RDWR);
  for (int fd : {0, 1, 2}) null >= 0 ? ::dup2(null, fd) : ::close(fd);
  if (null > 2) ::close(null);
  siginfo_t ended{};
  while (::waitid(P_PID, static_cast<id_t>(agent), &ended, WEXITED | WNOWAIT) != 0)
    if (errno != EINTR) return 127;
  // The agent ended and is not reaped yet, so its group's id is not reused: the guard leaves the group and kills
  // what is left in it.
  ::setpgid(0, 0);
  ::kill(-agent, SIGKILL);
  agent_group = 0;
  int status = 0;
  while (::waitpid(agent, &status, 0) < 0)
    if (errno != EINTR) return 127;
  end_like(status);
}
