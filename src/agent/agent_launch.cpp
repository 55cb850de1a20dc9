#include "agent_launch.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "agent_guard.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

extern char** environ;

namespace arclight::agent {
namespace {

std::string variable_name(const std::string& entry) { return entry.substr(0, entry.find('=')); }

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The MPI launcher's variables name the runner's rank: an agent that imports mpi4py (or a library that does) would
// join the job as that rank. Without them it starts as an MPI program of its own.
bool names_the_runners_rank(const std::string& name) {
  for (const char* prefix : {"OMPI_", "PMIX_", "PRTE_", "PMI_"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

}  // namespace

std::string error_text(int err) { return std::error_code(err, std::generic_category()).message(); }

// argv[0] as execve needs it: a name without '/' looked up on PATH (the workers' PATH when the options set one).
std::string resolve_command(const std::string& name, const std::vector<std::string>& environment) {
  if (name.find('/') != std::string::npos) {  // what exec would say, found before any worker starts
    struct stat st {};
    const int err = ::stat(name.c_str(), &st) != 0      ? errno
                    : S_ISDIR(st.st_mode)               ? EISDIR
                    : ::access(name.c_str(), X_OK) != 0 ? errno
                                                        : 0;
    if (err) throw UsageError("cannot run agent command '" + name + "': " + error_text(err));
    return name;
  }
  const char* inherited = std::getenv("PATH");
  std::string path = inherited ? inherited : "/usr/local/bin:/usr/bin:/bin";
  for (const auto& entry : environment)
    if (variable_name(entry) == "PATH") path = entry.substr(5);
  std::size_t begin = 0;
  while (begin <= path.size()) {
    std::size_t end = std::min(path.find(':', begin), path.size());
    std::string dir = path.substr(begin, end - begin);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    begin = end + 1;
  }
  throw UsageError("agent command '" + name + "' not found on PATH (" + path + ")");
}

std::string find_agent_guard() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  const std::string beside = (self.parent_path() / guard::executable).string();
  if (!error && is_executable_file(beside)) return beside;
  if (is_executable_file(ARCLIGHT_AGENT_GUARD_BUILT)) return ARCLIGHT_AGENT_GUARD_BUILT;
  throw UsageError(log::concat("the agent guard ", guard::executable, " is neither beside ", self.string(), " nor at ",
                               ARCLIGHT_AGENT_GUARD_BUILT, ": keep it beside arclight (the build makes both)"));
}

// The inherited environment, less the MPI launcher's, with the options' entries (and the worker id) replacing
// variables of the same names.
std::vector<std::string> worker_environment(const std::vector<std::string>& extra) {
  for (const auto& entry : extra)
    if (entry.find('=') == std::string::npos || entry.front() == '=')
      throw UsageError("agent environment entry '" + entry + "' is not NAME=VALUE");
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry = *e;
    std::string name = variable_name(entry);
    bool replaced = name == AgentProcesses::worker_id_env || names_the_runners_rank(name) ||
                    std::any_of(extra.begin(), extra.end(), [&](const auto& x) { return variable_name(x) == name; });
    if (!replaced) env.push_back(entry);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// A descriptor of ours at 3 or above, so that the child's dup2 onto 0, 1, 2 never overwrites it (a rank whose stdin
// was closed would hand out 0).
int above_stdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return moved;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Between fork and exec: async-signal-safe calls only (the parent may have had other threads, holding locks). The
// child becomes the worker's guard (agent_guard.cpp), which starts the agent.
[[noreturn]] void exec_child(const ChildPlan& plan) {
  ::setpgid(0, 0);
  // The guard learns that the supervisor ended, even a SIGKILLed one; if it already did, the signal was missed:
  // leave now.
  ::prctl(PR_SET_PDEATHSIG, guard::runner_gone_signal);
  if (::getppid() != plan.parent) ::_exit(127);
  // Ignored signals and the blocked mask survive exec: give the guard (and so the agent) the defaults.
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
  // The runner rank's CPU binding (mpirun binds a rank to a core) is not its agents': they may use every CPU the job
  // has (the kernel narrows the mask to the cpuset of the job's cgroup).
  cpu_set_t every;
  CPU_ZERO(&every);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &every);
  ::sched_setaffinity(0, sizeof every, &every);
  ::dup2(plan.stdin_fd, 0);
  ::dup2(plan.output_fd, 1);
  ::dup2(plan.output_fd, 2);
  // Nothing else of the rank's (MPI's sockets, other workers' pipes) leaks into the agent; the status pipe, at 3,
  // closes on the agent's exec.
  if (plan.status_fd == guard::status_fd)
    ::fcntl(guard::status_fd, F_SETFD, 0);  // dup2 onto itself would leave it closing on the guard's exec
  else
    ::dup2(plan.status_fd, guard::status_fd);
  if (::close_range(guard::status_fd + 1, ~0U, 0) != 0)
    for (int fd = guard::status_fd + 1; fd < plan.max_fd; ++fd) ::close(fd);
  ::execve(plan.path, plan.argv, plan.envp);
  const int record[2] = {guard::guard_failed, errno};
  [[maybe_unused]] ssize_t n = ::write(guard::status_fd, record, sizeof record);
  ::_exit(127);
}

WorkerExit exit_of(int status) {
  WorkerExit e;
  if (WIFEXITED(status)) e.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
  return e;
}

}  // namespace arclight::agent
