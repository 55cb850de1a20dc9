// arclight-agent-guard PATH ARGV0 [ARG...]: started by a runner (AgentProcesses) for each agent worker, with the
// runner's death signal set (agent_guard.hpp). It runs PATH with ARGV0 ARG... as the leader of a process group of
// its own; waits for it; kills every process the agent started; and ends the way the agent ended, so that the runner
// reads the agent's end. Should the runner go first, the guard kills the agent and all it started, then itself.
// "All it started": the guard is their subreaper, so a process that left the agent's group (setsid, a daemon's
// double fork) still descends from the guard, which kills descendants until none is left. A small program of its
// own: a guard forked from the runner without exec would keep, copy-on-write, every page the runner changes later.
#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "agent_guard.hpp"

namespace guard = arclight::agent::guard;

namespace {

pid_t runner = 0;                            // the process that started the guard
volatile std::sig_atomic_t agent_group = 0;  // the agent's group while the agent is not reaped (its pid keeps the id)
volatile std::sig_atomic_t runner_gone = 0;

void report(guard::Record kind, int value) {
  const int record[2] = {kind, value};
  [[maybe_unused]] ssize_t n = ::write(guard::status_fd, record, sizeof record);
}

void set_action(int sig, void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  ::sigaction(sig, &action, nullptr);
}

// The runner gone: the agent's group goes at once; the guard's main line kills the rest of what the agent started,
// then ends. A SIGHUP from anyone else (an agent's `kill -HUP 0`) is not the runner's end: the runner's death signal
// comes from the runner, and the guard has a new parent by then.
void on_runner_signal(int, siginfo_t* info, void*) {
  if (info->si_pid != runner && ::getppid() == runner) return;
  if (agent_group > 0) ::kill(-agent_group, SIGKILL);
  runner_gone = 1;
}

// The guard's children but `except`, from /proc (every process's parent is in its stat, after its name's last ')').
std::vector<pid_t> children_except(pid_t except) {
  std::vector<pid_t> out;
  const pid_t me = ::getpid();
  DIR* proc = ::opendir("/proc");
  if (!proc) return out;
  while (const dirent* entry = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0 || pid == except) continue;
    char path[64], stat[512];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    const ssize_t n = ::read(fd, stat, sizeof stat - 1);
    ::close(fd);
    if (n <= 0) continue;
    stat[n] = '\0';
    const char* after_name = std::strrchr(stat, ')');
    char state = 0;
    int parent = 0;
    if (after_name && std::sscanf(after_name + 1, " %c %d", &state, &parent) == 2 && parent == me) out.push_back(pid);
  }
  ::closedir(proc);
  return out;
}

// Kills and reaps every descendant but the agent. A killed process's children become the guard's (its subreaper),
// and the next round finds them; a process forking meanwhile only adds a round.
void kill_descendants(pid_t agent) {
  for (int round = 0; round < 10000; ++round) {
    const std::vector<pid_t> children = children_except(agent);
    if (children.empty()) return;
    for (const pid_t child : children) ::kill(child, SIGKILL);
    for (const pid_t child : children)
      while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
      }
  }
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
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // what the agent's processes leave orphaned comes to the guard, not to init
  // Had the runner's signal come before this, its default ended the guard before it started anything.
  struct sigaction gone {};
  gone.sa_sigaction = on_runner_signal;
  gone.sa_flags = SA_SIGINFO;
  ::sigaction(guard::runner_gone_signal, &gone, nullptr);
  // Any other signal (an agent's `kill -TERM $PPID`, a terminal's SIGTSTP) leaves the guard running, to report the
  // agent's end and kill what it left. A fault of the guard's own still ends it.
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != guard::runner_gone_signal && sig != SIGCHLD && sig != SIGKILL && sig != SIGSTOP)
      set_action(sig, SIG_IGN);
  ::fcntl(guard::status_fd, F_SETFD, FD_CLOEXEC);  // the agent's exec closes its copy
  // The runner's end waits until the guard knows the agent's group.
  sigset_t runner_signal;
  ::sigemptyset(&runner_signal);
  ::sigaddset(&runner_signal, guard::runner_gone_signal);
  ::sigprocmask(SIG_BLOCK, &runner_signal, nullptr);
  // The runner may have gone while the handler was set but before it was blocked: no agent to start then (its
  // group's signal would never come).
  if (runner_gone || ::getppid() != runner) ::_exit(128 + SIGKILL);
  const pid_t guard_pid = ::getpid();
  const pid_t agent = ::fork();
  if (agent < 0) {
    report(guard::agent_fork_failed, errno);
    return 127;
  }
  if (agent == 0) exec_agent(argv, guard_pid);
  agent_group = agent;
  // The agent leads its group (its setpgid and setsid do what they did before it had a guard), which the runner
  // signals; the guard stays out of it, so that the runner's SIGKILL to the group leaves it to kill the rest.
  ::setpgid(agent, agent);
  ::sigprocmask(SIG_UNBLOCK, &runner_signal, nullptr);
  report(guard::agent_started, agent);
  // The runner learns that the agent runs when the status pipe ends; its output, when the agent's own ends.
  ::close(guard::status_fd);
  const int null = ::open("/dev/null", O_RDWR);
  for (int fd : {0, 1, 2}) null >= 0 ? ::dup2(null, fd) : ::close(fd);
  if (null > 2) ::close(null);
  // Until the agent has ended: of itself, or killed by the runner's signal (whose handler killed its group). Its
  // children are the guard's from then on.
  // The orphans that come to the guard meanwhile are reaped as they end (else a zombie each, for the agent's life).
  for (siginfo_t ended{};;) {
    ended.si_pid = 0;
    if (::waitid(P_ALL, 0, &ended, WEXITED | WNOWAIT) != 0) {
      if (errno != EINTR) return 127;
      continue;
    }
    if (ended.si_pid == agent) break;
    ::waitpid(ended.si_pid, nullptr, 0);
  }
  // Not reaped yet, so its group's id is not reused: what is left in the group goes first, then every other process
  // the agent started.
  ::kill(-agent, SIGKILL);
  agent_group = 0;
  kill_descendants(agent);
  if (runner_gone) ::_exit(128 + SIGKILL);  // no one reads it
  int status = 0;
  while (::waitpid(agent, &status, 0) < 0)
    if (errno != EINTR) return 127;
  end_like(status);
}
