#include "arclight/agent/agent_processes.hpp"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>

#include "agent_guard.hpp"
#include "agent_launch.hpp"
#include "agent_output.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

namespace arclight::agent {
namespace {

constexpr std::size_t longest_line = 64 * 1024;  // a line unended when this much of it waits goes out in pieces
constexpr int poll_interval_ms = 50;             // how often the supervisor looks for dead workers
constexpr double guard_sweep_seconds = 5;        // at stop, for the guards to kill what their agents started

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

}  // namespace

std::string WorkerExit::describe() const {
  if (signal != 0) {
    const char* name = ::sigdescr_np(signal);
    return "killed by signal " + std::to_string(signal) + " (" + (name ? name : "?") + ")";
  }
  std::string text = "exited with code " + std::to_string(exit_code);
  if (exit_code == 127) text += " (command not found?)";
  return text;
}

struct AgentProcesses::Worker {
  int index = 0;
  std::string id;
  std::string prefix;
  std::vector<std::string> env;
  std::vector<char*> envp;
  pid_t pid = 0;        // its guard's: the supervisor's child
  pid_t agent_pid = 0;  // the agent's, also the id of the process group of the agent, what it starts, and the guard
  int output_fd = -1;
  std::string pending;  // a line not ended yet
  double started_at = 0;
  double backoff = 0;      // the last one waited
  double restart_at = -1;  // when it is dead: when to restart it; -1: never
  std::deque<double> restart_times;
  int failed_starts = 0;  // restarts in a row that could not start the agent
};

struct AgentProcesses::Shared {
  std::mutex mutex;
  std::condition_variable started_cv;
  bool started = false;
  std::string start_error;
  std::vector<WorkerExit> exits;
  std::string fatal;
  std::vector<pid_t> pids;
  std::vector<std::chrono::steady_clock::time_point> forked;  // when each running worker's process was forked
  int restarts = 0;
  std::atomic<bool> stopping{false};
};

AgentProcesses::AgentProcesses(AgentProcessOptions options)
    : options_(std::move(options)), shared_(std::make_unique<Shared>()) {
  if (!options_.log_line)
    options_.log_line = [](std::string_view line) {
      if (log::level() != log::Level::off) log::write(log::Level::info, line);
    };
}

AgentProcesses::~AgentProcesses() { stop(); }

void AgentProcesses::start() {
  if (supervisor_.joinable()) return;
  if (options_.argv.empty() || options_.argv.front().empty()) throw UsageError("agent command is empty");
  if (options_.workers < 1) throw UsageError("agent workers must be at least 1");
  if (!(options_.start_timeout_seconds > 0)) throw UsageError("agent start_timeout_seconds must be positive");
  path_ = resolve_command(options_.argv.front(), options_.environment);
  guard_path_ = options_.guard_path.empty() ? find_agent_guard() : options_.guard_path;
  guard_argv_ = {guard_path_, path_};
  guard_argv_.insert(guard_argv_.end(), options_.argv.begin(), options_.argv.end());
  guard_argvp_ = c_strings(guard_argv_);
  workers_.resize(options_.workers);
  for (int i = 0; i < options_.workers; ++i) {
    Worker& w = workers_[i];
    w.index = i;
    w.id = options_.worker_id_prefix + "-w" + std::to_string(i);
    w.prefix = options_.log_prefix;
    for (auto at = w.prefix.find("{w}"); at != std::string::npos; at = w.prefix.find("{w}"))
      w.prefix.replace(at, 3, std::to_string(i));
    std::vector<std::string> extra = options_.environment;
    for (std::string& entry : extra)
      for (auto at = entry.find(worker_id_placeholder); at != std::string::npos; at = entry.find(worker_id_placeholder))
        entry.replace(at, std::string_view(worker_id_placeholder).size(), w.id);
    w.env = worker_environment(extra);
    w.env.push_back(std::string(worker_id_env) + "=" + w.id);
    w.envp = c_strings(w.env);
  }
  shared_->pids.assign(options_.workers, 0);
  shared_->forked.assign(options_.workers, {});
  supervisor_ = std::thread([this] { supervise(); });
  std::unique_lock<std::mutex> lock(shared_->mutex);
  shared_->started_cv.wait(lock, [&] { return shared_->started; });
  if (!shared_->start_error.empty()) {
    std::string error = shared_->start_error;
    lock.unlock();
    stop();
    throw UsageError(error);
  }
}

std::vector<WorkerExit> AgentProcesses::poll() {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  if (!shared_->fatal.empty()) throw Error(shared_->fatal);
  std::vector<WorkerExit> exits;
  exits.swap(shared_->exits);
  return exits;
}

void AgentProcesses::stop() {
  shared_->stopping = true;
  if (supervisor_.joinable()) supervisor_.join();
}

bool AgentProcesses::kill_worker(const std::string& worker_id, std::chrono::steady_clock::time_point took_at) {
  const std::string prefix = options_.worker_id_prefix + "-w";
  if (worker_id.rfind(prefix, 0) != 0) return false;
  // The id whole, as the worker's own id is written: "<prefix>-w0-1" or "<prefix>-w01" (an agent's names for its
  // episodes) is not worker 0's or 1's, whose restart killed them.
  const std::string_view digits = std::string_view(worker_id).substr(prefix.size());
  std::size_t index = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() || digits != std::to_string(index))
    return false;
  std::lock_guard<std::mutex> lock(shared_->mutex);
  // The agent stays a zombie until its guard has killed what is left of its group. Its group's id could be another's
  // by this signal only if a whole round of pids (32,768 on many machines) went by between the guard reaping it and
  // the supervisor seeing the guard's end (here and in the other signals to a worker's group).
  if (index >= shared_->pids.size() || shared_->pids[index] <= 0 || shared_->forked[index] > took_at) return false;
  ::killpg(shared_->pids[index], SIGKILL);
  return true;
}

std::vector<pid_t> AgentProcesses::pids() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->pids;
}

int AgentProcesses::restarts() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->restarts;
}

// The supervisor thread: it forks every worker (PDEATHSIG is tied to the forking thread), so it outlives them all.
void AgentProcesses::supervise() {
  std::string error;
  for (Worker& w : workers_) {
    error = spawn(w);
    if (!error.empty()) break;
  }
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->started = true;
    shared_->start_error = error;
  }
  shared_->started_cv.notify_all();
  while (error.empty() && !shared_->stopping) {
    read_output(poll_interval_ms);
    reap_and_restart();
  }
  terminate_all();
}

// Forks and execs one worker; returns why it could not start ("" when it did).
std::string AgentProcesses::spawn(Worker& w) {
  int output[2], status[2];
  if (::pipe2(output, O_CLOEXEC) != 0) return "cannot make a pipe: " + error_text(errno);
  if (::pipe2(status, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(output[0]), ::close(output[1]);
    return "cannot make a pipe: " + error_text(err);
  }
  int fds[] = {above_stdio(output[0]), above_stdio(output[1]), above_stdio(status[0]), above_stdio(status[1]),
               above_stdio(::open("/dev/null", O_RDONLY | O_CLOEXEC))};
  if (std::find(std::begin(fds), std::end(fds), -1) != std::end(fds)) {  // out of descriptors (EMFILE), say
    const int err = errno;
    for (int& fd : fds) close_fd(fd);
    return "cannot open the descriptors of agent worker " + w.id + ": " + error_text(err);
  }
  ChildPlan plan;
  plan.path = guard_path_.c_str();
  plan.argv = guard_argvp_.data();
  plan.envp = w.envp.data();
  plan.parent = ::getpid();
  plan.stdin_fd = fds[4];
  plan.output_fd = fds[1];
  plan.status_fd = fds[3];
  plan.max_fd = static_cast<int>(std::min<long>(::sysconf(_SC_OPEN_MAX), 1 << 16));
  const auto forked = std::chrono::steady_clock::now();  // before the agent could take anything
  pid_t pid = ::fork();
  if (pid == 0) exec_child(plan);
  int fork_errno = errno;
  for (int i : {1, 3, 4}) ::close(fds[i]);
  if (pid < 0) {
    ::close(fds[0]), ::close(fds[2]);
    return "cannot fork agent worker " + w.id + ": " + error_text(fork_errno);
  }
  ::setpgid(pid, pid);  // also done by the child; whichever runs first (fails harmlessly after exec)
  const GuardRecords records = read_guard_records(fds[2], now_seconds() + options_.start_timeout_seconds);
  ::close(fds[2]);
  const pid_t agent = records.agent;
  const int(&failure)[2] = records.failure;
  if (records.end != GuardRecords::pipe_ended || failure[0] != 0 || agent == 0) {
    // An agent stuck in its exec goes when the exec returns (SIGKILL waits for it, as does its death signal).
    if (agent > 0) ::killpg(agent, SIGKILL);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
    w.output_fd = fds[0];
    drain(w);  // what the guard or the agent said on the way (a loader's error)
    if (records.end == GuardRecords::timed_out)
      return log::concat("agent worker ", w.id, " did not start within ", options_.start_timeout_seconds, " s: '",
                         path_, "' was not running yet (is its file system hung?)");
    if (records.end == GuardRecords::stopped) return "agent worker " + w.id + " was stopped while it started";
    const int err = failure[1];
    if (failure[0] == guard::agent_exec_failed) {
      bool interpreter_missing = err == ENOENT && ::access(path_.c_str(), F_OK) == 0;
      return "cannot run agent command '" + path_ + "': " + error_text(err) +
             (interpreter_missing ? " (the interpreter its #! line names?)" : "");
    }
    if (failure[0] == guard::agent_fork_failed) return "cannot fork agent worker " + w.id + ": " + error_text(err);
    return "cannot start the agent guard '" + guard_path_ +
           "': " + (failure[0] == guard::guard_failed ? error_text(err) : std::string("it ended before the agent ran"));
  }
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  w.pid = pid;
  w.agent_pid = agent;
  w.output_fd = fds[0];
  w.started_at = now_seconds();
  std::lock_guard<std::mutex> lock(shared_->mutex);
  shared_->pids[w.index] = agent;
  shared_->forked[w.index] = forked;
  return "";
}

// The guard's records (agent_guard.hpp) until the pipe ends (the agent has exec'd, or nothing will), the deadline
// passes, or stop() begins. The other workers' output is forwarded meanwhile: a start that waits long (a hung exec)
// must not fill their pipes and hold them.
AgentProcesses::GuardRecords AgentProcesses::read_guard_records(int status_fd, double deadline) {
  GuardRecords records;
  const auto ended = [&records](GuardRecords::End end) {
    records.end = end;
    return records;
  };
  for (;;) {
    // Records already sent are read first, past the deadline or at stop() too: the agent's pid, whose group is killed.
    const bool stopping = shared_->stopping;
    const double left = deadline - now_seconds();
    const int wait_ms =
        stopping || left <= 0 ? 0 : static_cast<int>(std::min<double>(poll_interval_ms, std::ceil(left * 1000)));
    if (read_output(wait_ms, status_fd) != 0) {
      int record[2];
      const ssize_t n = ::read(status_fd, record, sizeof record);  // whole records: each one write under PIPE_BUF
      if (n < 0 && errno == EINTR) continue;
      if (n != static_cast<ssize_t>(sizeof record)) return ended(GuardRecords::pipe_ended);
      if (record[0] == guard::agent_started)
        records.agent = record[1];
      else
        records.failure[0] = record[0], records.failure[1] = record[1];
      continue;
    }
    if (stopping) return ended(GuardRecords::stopped);
    if (left <= 0) return ended(GuardRecords::timed_out);
  }
}

void AgentProcesses::forward(const Worker& w, std::string_view line) const {
  std::string shown = printable(line);
  for (const std::string& secret : options_.hidden) {
    if (secret.empty()) continue;
    for (std::size_t at = shown.find(secret); at != std::string::npos; at = shown.find(secret, at + 8))
      shown.replace(at, secret.size(), "<hidden>");
  }
  options_.log_line(w.prefix + shown);
}

// Reads what one worker's pipe holds now, one chunk (fairness among chatty workers), and forwards its whole lines;
// false when there was nothing to read (or the pipe ended, and is closed).
bool AgentProcesses::read_chunk(Worker& w) {
  char buffer[16 * 1024];
  ssize_t n = ::read(w.output_fd, buffer, sizeof buffer);
  if (n < 0) return errno == EINTR;
  if (n == 0) {
    if (!w.pending.empty()) forward(w, w.pending);
    w.pending.clear();
    close_fd(w.output_fd);
    return false;
  }
  w.pending.append(buffer, n);
  std::size_t begin = 0;
  for (std::size_t end; (end = w.pending.find('\n', begin)) != std::string::npos; begin = end + 1)
    forward(w, std::string_view(w.pending).substr(begin, end - begin));
  w.pending.erase(0, begin);
  // A line that a carriage return took back to its start keeps what follows (the CRs it ends with may be a CRLF's):
  // a progress bar that updates for hours holds a line's worth, not hours of updates.
  w.pending.erase(0, shown_from(w.pending));
  if (w.pending.size() >= longest_line) {
    const std::size_t end = piece_end(w.pending);
    forward(w, std::string_view(w.pending).substr(0, end));
    w.pending.erase(0, end);
  }
  return true;
}

// Forwards what is left in a dead worker's pipe (its unfinished last line too), then closes it.
void AgentProcesses::drain(Worker& w) {
  while (w.output_fd >= 0 && read_chunk(w)) {
  }
  if (!w.pending.empty()) forward(w, w.pending);
  w.pending.clear();
  close_fd(w.output_fd);
}

short AgentProcesses::read_output(int timeout_ms, int also_fd) {
  std::vector<pollfd> fds;
  std::vector<Worker*> owners;
  for (Worker& w : workers_)
    if (w.output_fd >= 0) fds.push_back({w.output_fd, POLLIN, 0}), owners.push_back(&w);
  if (also_fd >= 0) fds.push_back({also_fd, POLLIN, 0});
  if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return 0;
  for (std::size_t i = 0; i < owners.size(); ++i)
    if (fds[i].revents != 0) read_chunk(*owners[i]);
  return also_fd >= 0 ? fds.back().revents : 0;
}

// A worker whose guard has ended (as the agent did): the rest of the agent's group is killed (the guard did so before
// it reaped the agent, unless it was killed alone), then the guard is reaped. Returns how the agent ended, or nothing
// while it runs.
std::optional<WorkerExit> AgentProcesses::reap_if_ended(Worker& w, bool wait) {
  siginfo_t info{};
  int flags = WEXITED | WNOWAIT | (wait ? 0 : WNOHANG);
  bool gone = ::waitid(P_PID, w.pid, &info, flags) != 0 && errno == ECHILD;  // reaped by someone else (SIGCHLD ignored)
  if (!gone && info.si_pid == 0) return std::nullopt;
  int status = -1;
  if (!gone) {
    ::killpg(w.agent_pid, SIGKILL);  // the guard did, unless it was killed alone (the OOM killer)
    ::waitpid(w.pid, &status, 0);
  }
  WorkerExit e = status == -1 ? WorkerExit{} : exit_of(status);
  e.worker = w.index;
  e.worker_id = w.id;
  e.pid = w.agent_pid;
  e.lived_seconds = now_seconds() - w.started_at;
  e.ended_at = std::chrono::steady_clock::now();
  drain(w);
  w.pid = 0;
  std::lock_guard<std::mutex> lock(shared_->mutex);
  shared_->pids[w.index] = 0;
  return e;
}

void AgentProcesses::reap_and_restart() {
  double now = now_seconds();
  for (Worker& w : workers_) {
    if (w.pid > 0) {
      if (auto e = reap_if_ended(w, false)) schedule_restart(w, *e);
    } else if (w.restart_at >= 0 && now >= w.restart_at) {
      restart(w);
    }
  }
}

// After a death: the backoff (doubling, back to the first after a healthy life), or the restart limit.
void AgentProcesses::schedule_restart(Worker& w, const WorkerExit& e) {
  const double now = now_seconds();
  const bool healthy = e.lived_seconds >= options_.healthy_after_seconds;
  const bool limit_reached = back_off(w, now, healthy);
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->exits.push_back(e);
    if (limit_reached && shared_->fatal.empty())
      shared_->fatal = log::concat("agent command '", joined(options_.argv), "' (worker ", w.id, ") was restarted ",
                                   w.restart_times.size(), " times within ", options_.restart_window_seconds,
                                   " s and ended again (", e.describe(),
                                   "): not restarted again; its output is in the log with the prefix '", w.prefix, "'");
  }
  // Logged out of the lock: a log that blocks (its pipe full) must not hold the runner's poll() and kill_worker().
  if (limit_reached)
    forward(w, log::concat("agent worker ", w.id, " (pid ", e.pid, ") ", e.describe(), "; restart limit reached"));
  else
    forward(w, log::concat("agent worker ", w.id, " (pid ", e.pid, ") ", e.describe(), " after ", e.lived_seconds,
                           " s; restarting in ", w.backoff, " s"));
}

// Sets the next restart's time, after a backoff that doubles (back to the first after a healthy life); true, and no
// restart, once the worker has been restarted max_restarts times within the window.
bool AgentProcesses::back_off(Worker& w, double now, bool healthy) {
  w.backoff = (w.backoff == 0 || healthy) ? options_.backoff_initial_seconds
                                          : std::min(2 * w.backoff, options_.backoff_max_seconds);
  while (!w.restart_times.empty() && w.restart_times.front() < now - options_.restart_window_seconds)
    w.restart_times.pop_front();
  const bool limit_reached = static_cast<int>(w.restart_times.size()) >= options_.max_restarts;
  w.restart_at = limit_reached ? -1 : now + w.backoff;
  return limit_reached;
}

// A restart that cannot start the agent (fork out of processes or memory, descriptors, a command being replaced: often
// passing; an exec that hangs) is tried again after the backoff, and counts toward the restart limit as a death does;
// max_restarts of them in a row end it too.
void AgentProcesses::restart(Worker& w) {
  w.restart_at = -1;
  w.restart_times.push_back(now_seconds());
  const std::string error = spawn(w);
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    ++shared_->restarts;
  }
  if (error.empty()) {
    w.failed_starts = 0;
    return;
  }
  if (shared_->stopping) return;
  // A start that hangs lasts start_timeout_seconds, maybe longer than the window: failures in a row count too.
  const bool in_a_row = ++w.failed_starts >= options_.max_restarts;
  const bool limit_reached = back_off(w, now_seconds(), false) || in_a_row;
  if (limit_reached) {
    w.restart_at = -1;
    std::lock_guard<std::mutex> lock(shared_->mutex);
    if (shared_->fatal.empty())
      shared_->fatal = in_a_row
                           ? log::concat(error, " (worker ", w.id, "; ", w.failed_starts,
                                         " restarts in a row could not start it: not tried again)")
                           : log::concat(error, " (worker ", w.id, "; restarted ", w.restart_times.size(),
                                         " times within ", options_.restart_window_seconds, " s: not tried again)");
    return;
  }
  forward(
      w, log::concat("agent worker ", w.id, " could not be restarted: ", error, "; trying again in ", w.backoff, " s"));
}

// stop(): SIGTERM to every group, SIGKILL to what is left after the grace; every worker reaped, its output forwarded.
// The guards kill what their agents started once the agents are gone: they get a few seconds more for that.
void AgentProcesses::terminate_all() {
  for (Worker& w : workers_)
    if (w.pid > 0) ::killpg(w.agent_pid, SIGTERM);
  const auto running = [&] {
    return std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) { return w.pid > 0; });
  };
  const auto reap_until = [&](double deadline) {
    while (running() && now_seconds() < deadline) {
      read_output(10);
      for (Worker& w : workers_)
        if (w.pid > 0) reap_if_ended(w, false);
    }
  };
  reap_until(now_seconds() + options_.stop_grace_seconds);
  for (Worker& w : workers_)
    if (w.pid > 0) ::killpg(w.agent_pid, SIGKILL);
  reap_until(now_seconds() + guard_sweep_seconds);
  for (Worker& w : workers_)
    if (w.pid > 0) ::kill(w.pid, SIGKILL), reap_if_ended(w, true);  // a guard that hangs (it should not)
  for (Worker& w : workers_) drain(w);
}

}  // namespace arclight::agent
