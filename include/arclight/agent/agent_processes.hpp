#pragma once
// Outside agent processes, supervised by a runner rank (`agent.name = "external"`): started with the runner's endpoint
// in their environment, their output forwarded to the job's log, restarted when they die, ended with the job.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace arclight::agent {

struct AgentProcessOptions {
  // The command; argv[0] without a '/' is looked up on PATH (once, in start()).
  std::vector<std::string> argv;
  int workers = 1;
  // NAME=VALUE entries added to the inherited environment (replacing a variable of the same name), e.g.
  // OPENAI_BASE_URL, OPENAI_API_KEY, ARCLIGHT_STORE_URL; "{worker_id}" in one stands for the worker's id. The MPI
  // launcher's variables (OMPI_*, PMIX_*, PRTE_*, PMI_*) are not inherited.
  std::vector<std::string> environment;
  // Worker i gets ARCLIGHT_WORKER_ID=<worker_id_prefix>-w<i>, e.g. "runner-3-w0".
  std::string worker_id_prefix = "worker";
  // In front of every line a worker writes to stdout or stderr, "{w}" replaced by the worker's index: with
  // "[rank 3 agent {w}] ", worker 0's lines read "[rank 3 agent 0] ...".
  std::string log_prefix = "[agent {w}] ";
  // A worker that dies is restarted after a backoff: backoff_initial_seconds, doubling up to backoff_max_seconds, back
  // to the initial one when the worker had lived healthy_after_seconds.
  double backoff_initial_seconds = 0.5;
  double backoff_max_seconds = 10;
  double healthy_after_seconds = 30;
  // More than max_restarts restarts of one worker within restart_window_seconds, or max_restarts restarts in a row that
  // could not start it, is a fault (poll() throws): a command that dies at once, or cannot start, does not loop for
  // ever.
  int max_restarts = 5;
  double restart_window_seconds = 60;
  // stop(): SIGTERM, then SIGKILL to what is left after this long.
  double stop_grace_seconds = 5;
  // A worker whose agent has not exec'd this long after its fork (its command on a hung file system) did not start:
  // the guard and the agent's group are killed, and the start fails (start() throws; a restart is tried again after
  // the backoff, counting toward the limit). The other workers' output is forwarded meanwhile, but none is reaped or
  // restarted. stop() ends such a wait at once.
  double start_timeout_seconds = 60;
  // The guard program (see AgentProcesses); empty: find_agent_guard()'s.
  std::string guard_path;
  // Where each forwarded line goes (prefix included, no newline); by default the log (log::write at info, unless the
  // level is off). Called from the supervisor thread.
  std::function<void(std::string_view line)> log_line;
  // Text never forwarded: each occurrence in a line becomes "<hidden>" (the job's secret, which an agent's client may
  // log inside its server's URL).
  std::vector<std::string> hidden;
};

// The guard program each agent runs under (see AgentProcesses): beside the running executable, else where the build
// put it (the tests' programs). Throws UsageError naming both places when neither has it.
std::string find_agent_guard();

// A worker that ended, as poll() reports it (a restart that could not start it is not one: nothing of it ran).
struct WorkerExit {
  int worker = 0;         // 0 .. workers-1
  std::string worker_id;  // its ARCLIGHT_WORKER_ID
  pid_t pid = 0;          // the agent's
  int exit_code = -1;     // when it exited
  int signal = 0;         // when a signal ended it
  double lived_seconds = 0;
  // When the supervisor saw it end: what it held was taken before; its restart (same worker id) comes after.
  std::chrono::steady_clock::time_point ended_at{};
  // "exited with code 3", "killed by signal 9 (Killed)".
  std::string describe() const;
};

// Supervises `workers` copies of one command. Each worker runs in a process group of its own, stdin /dev/null, its
// stdout and stderr (one pipe) forwarded line by line with the prefix (a line's text after its last carriage return,
// without terminal escapes or other control characters: no agent moves the cursor of a terminal showing the log). A
// supervisor thread does the forking, reading, reaping and restarting; poll() hands the runner what died since the last
// call.
//
// No orphans: stop() (and the destructor) ends every worker's process group, SIGTERM then SIGKILL after the grace;
// a worker that dies has every process it started killed before it restarts. Each agent runs under a guard, a small
// program (arclight-agent-guard, built beside the arclight binary) that starts the agent as the leader of a process
// group, waits for the agent, kills every process the agent started and ends as the agent ended; it gets
// PR_SET_PDEATHSIG, and when the supervisor is gone, even killed with SIGKILL, it kills the agent and every process
// the agent started (which PDEATHSIG on the agent alone would not reach), then itself. It is their subreaper: a
// process that left the agent's group (setsid, a daemon's double fork) is still found and killed.
// The guard execs rather than staying a fork of the runner, which would keep, copy-on-write, every page the runner
// changes later (its weights).
//
// MPI: Open MPI ranks may fork to exec. Between fork and exec the child makes async-signal-safe calls only (setpgid,
// prctl, getppid, sigprocmask, sigaction, dup2, fcntl, close_range, execve, write, _exit); argv, envp and the resolved
// paths are built before fork. The fork happens on the supervisor thread, which lives until every worker has been
// reaped: PDEATHSIG fires when the forking *thread* ends, not only the process. Ranks whose transport registers memory
// (verbs) mark it MADV_DONTFORK; the child never touches it. fork copies the rank's page tables, a few ms per GB
// mapped, once per start. The runner must not set SIGCHLD to SIG_IGN (its children would be reaped unseen; such a
// worker counts as ended).
//
//   AgentProcessOptions o;
//   o.argv = {"python3", "my_agent.py"};
//   o.workers = 4;
//   o.environment = {"OPENAI_BASE_URL=http://127.0.0.1:8000/v1", "OPENAI_API_KEY=..."};
//   o.worker_id_prefix = "runner-3";
//   o.log_prefix = "[rank 3 agent {w}] ";
//   AgentProcesses agents(o);
//   agents.start();                                // throws UsageError when the command cannot be run
//   while (training)
//     for (const WorkerExit& e : agents.poll())   // throws Error past the restart limit
//       fail_attempts_of(e.worker_id);             // the worker restarts by itself after its backoff
//   agents.stop();                                 // or the destructor
class AgentProcesses {
 public:
  static constexpr const char* worker_id_env = "ARCLIGHT_WORKER_ID";
  static constexpr const char* worker_id_placeholder = "{worker_id}";

  explicit AgentProcesses(AgentProcessOptions options);
  ~AgentProcesses();
  AgentProcesses(const AgentProcesses&) = delete;
  AgentProcesses& operator=(const AgentProcesses&) = delete;

  // Starts every worker; returns once each has exec'd. Throws UsageError naming the command when it is not on PATH,
  // cannot be executed, or has not exec'd within start_timeout_seconds.
  void start();
  // Non-blocking: the workers that ended since the last call (each is restarted after its backoff). Throws Error
  // once a worker passed the restart limit, and on every later call.
  std::vector<WorkerExit> poll();
  // Ends every worker and its group (SIGTERM, SIGKILL after the grace), reaps them, forwards their last output.
  // Idempotent.
  void stop();

  // Kills a worker's process group (SIGKILL): it hangs. poll() reports it and it restarts like any worker that dies.
  // False, and nothing killed, for a worker id that is not one of these workers' (an agent that names itself, as Agent
  // Lightning's runners do), one waiting to restart, or one whose process started after `took_at` (the process that
  // took what timed out is gone: this one is its restart).
  bool kill_worker(const std::string& worker_id,
                   std::chrono::steady_clock::time_point took_at = std::chrono::steady_clock::time_point::max());

  // The running workers' agents' pids, each also the id of the worker's process group (0 for one waiting to restart),
  // by worker.
  std::vector<pid_t> pids() const;
  // Restarts so far, all workers together.
  int restarts() const;

 private:
  struct Worker;
  struct Shared;
  // What the guard of a worker being started said (agent_guard.hpp), and how the wait for it ended.
  struct GuardRecords {
    enum End { pipe_ended, timed_out, stopped } end = pipe_ended;
    pid_t agent = 0;
    int failure[2] = {0, 0};  // a record other than agent_started, and its value
  };
  void supervise();
  std::string spawn(Worker& worker);
  GuardRecords read_guard_records(int status_fd, double deadline);
  void reap_and_restart();
  std::optional<WorkerExit> reap_if_ended(Worker& worker, bool wait);
  void schedule_restart(Worker& worker, const WorkerExit& exit);
  void restart(Worker& worker);
  // Forwards what the workers' pipes hold, waiting up to timeout_ms; the poll's events on also_fd (when one is given).
  short read_output(int timeout_ms, int also_fd = -1);
  bool read_chunk(Worker& worker);
  void drain(Worker& worker);
  void terminate_all();
  void forward(const Worker& worker, std::string_view line) const;
  bool back_off(Worker& worker, double now, bool healthy);

  AgentProcessOptions options_;
  std::string path_;                     // argv[0] resolved on PATH
  std::string guard_path_;               // the guard program (agent_guard.hpp)
  std::vector<std::string> guard_argv_;  // the guard's: the agent's path and argv after its own name
  std::vector<char*> guard_argvp_;
  std::vector<Worker> workers_;  // the supervisor thread's, once started
  std::unique_ptr<Shared> shared_;
  std::thread supervisor_;
};

}  // namespace arclight::agent
