#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "../../src/agent/agent_launch.hpp"
#include "../temp_dir.hpp"
#include "arclight/agent/agent_processes.hpp"
#include "arclight/core/error.hpp"

using namespace arclight;
using namespace arclight::agent;

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Polls `done` every 10 ms for up to `seconds`; true once it held.
template <class Done>
bool wait_until(Done done, double seconds) {
  for (double deadline = now_seconds() + seconds; now_seconds() < deadline;
       std::this_thread::sleep_for(std::chrono::milliseconds(10)))
    if (done()) return true;
  return done();
}

// The forwarded lines, as the log would get them.
struct LineSink {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::function<void(std::string_view)> function() {
    return [this](std::string_view line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.emplace_back(line);
    };
  }
  bool has(const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex);
    return std::find(lines.begin(), lines.end(), line) != lines.end();
  }
  std::size_t count_containing(const std::string& part) {
    std::lock_guard<std::mutex> lock(mutex);
    return std::count_if(lines.begin(), lines.end(), [&](const auto& l) { return l.find(part) != std::string::npos; });
  }
  std::size_t count_starting(const std::string& start) {
    std::lock_guard<std::mutex> lock(mutex);
    return std::count_if(lines.begin(), lines.end(), [&](const auto& l) { return l.rfind(start, 0) == 0; });
  }
};

AgentProcessOptions shell_agent(const std::string& script, int workers = 1) {
  AgentProcessOptions o;
  o.argv = {"sh", "-c", script};
  o.workers = workers;
  o.log_line = [](std::string_view) {};
  o.backoff_initial_seconds = 0.05;
  o.backoff_max_seconds = 0.05;
  o.stop_grace_seconds = 2;
  return o;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Running, and not a zombie waiting for a reaper that may never come (init in a container).
bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  std::size_t after_name = stat.rfind(')');
  return after_name != std::string::npos && after_name + 2 < stat.size() && stat[after_name + 2] != 'Z';
}

// The parent's pid from /proc (0 when the process is gone).
pid_t parent_of(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  std::size_t after_name = stat.rfind(')');
  if (after_name == std::string::npos) return 0;
  std::istringstream fields(stat.substr(after_name + 2));
  std::string state;
  pid_t parent = 0;
  fields >> state >> parent;
  return parent;
}

// How many of `parent`'s children are zombies, waiting for it to reap them.
int zombie_children_of(pid_t parent) {
  int zombies = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    zombies += parent_of(pid) == parent && ::kill(pid, 0) == 0 && !alive(pid);
  }
  return zombies;
}

// The lines one worker running `script` forwards until `last` has come (then it stops).
std::vector<std::string> lines_until(const std::string& script, const std::string& last, double seconds) {
  LineSink sink;
  auto o = shell_agent(script + "; sleep 30");
  o.log_line = sink.function();
  AgentProcesses agents(o);
  agents.start();
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return sink.has(last); }, seconds), "'" << last << "' forwarded");
  agents.stop();
  std::lock_guard<std::mutex> lock(sink.mutex);
  return sink.lines;
}

// A script line that writes `what`'s output to FILE whole (written aside, then renamed), so a test never reads half.
std::string write_whole(const std::string& what, const std::string& file) {
  return what + " > " + file + ".part && mv " + file + ".part " + file;
}

// A script part that starts two processes out of the agent's group, as daemons do, and leaves their pids in
// $escaped: one by setsid (its parent the agent), one by setsid in a shell that ends at once (a double fork: its
// parent gone, the guard adopts it). Their output goes to /dev/null: the worker's pipe is not theirs to hold.
const std::string start_escapees =
    "escaped=\"$(setsid sh -c 'sleep 300 >/dev/null 2>&1 & echo $!') \"; setsid sleep 300 >/dev/null 2>&1 & "
    "escaped=\"$escaped$!\"";

// The pids a script wrote to `file` (whole, by write_whole).
std::vector<pid_t> pids_in(const std::string& file) {
  std::vector<pid_t> out;
  std::istringstream written(read_file(file));
  for (pid_t pid = 0; written >> pid;) out.push_back(pid);
  return out;
}

std::vector<WorkerExit> collect_exits(AgentProcesses& agents, std::size_t count, double seconds) {
  std::vector<WorkerExit> exits;
  wait_until(
      [&] {
        for (auto& e : agents.poll()) exits.push_back(e);
        return exits.size() >= count;
      },
      seconds);
  return exits;
}

// Polls until poll() throws (the restart limit) for up to `seconds`: its message, or "" when it did not.
std::string poll_until_it_throws(AgentProcesses& agents, double seconds) {
  std::string message;
  wait_until(
      [&] {
        try {
          agents.poll();
          return false;
        } catch (const Error& e) {
          message = e.what();
          return true;
        }
      },
      seconds);
  return message;
}

std::vector<double> start_times(const std::string& file) {
  std::vector<double> times;
  for (const auto& line : lines_of(file)) times.push_back(std::stod(line));
  return times;
}

// A stand-in for the agent guard whose agent never gets to exec (its command on a hung file system): from its
// `lives`-th start on (before that it runs the real guard) it reports an agent, a sleep leading a group of its own that
// holds the status pipe open as an agent stuck in its exec would, appends "<its pid> <the agent's>" to hung.pids, and
// stays. The options run `agent.sh` (`agent_script`; by default it exits at once) under it.
struct HangingStart {
  TempDir tmp;
  std::string pids_file = tmp.file("hung.pids");
  explicit HangingStart(int lives, const std::string& agent_script = "exit 1") {
    const std::string guard = tmp.file("guard.sh"), agent = tmp.file("agent.sh");
    std::ofstream(guard)
        << "#!/bin/sh\n"
        << "n=$(cat " << tmp.file("starts") << " 2>/dev/null || echo 0)\n"
        << "echo $((n + 1)) > " << tmp.file("starts") << "\n"
        << "if [ \"$n\" -lt " << lives << " ]; then exec " << find_agent_guard() << " \"$@\"; fi\n"
        << "setsid sleep 300 </dev/null >/dev/null 2>&1 &\nagent=$!\n"
        // reported once it leads its group (the real guard sets the group before it reports)
        << "until [ \"$(cut -d' ' -f5 /proc/$agent/stat)\" = $agent ]; do sleep 0.01; done\n"
        << "b() { printf '\\\\%03o' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)); }\n"
        << "printf \"$(b 1)$(b $agent)\" >&3\n"  // agent_started: one write of both ints
        // after the record: a test that sees the pids knows the record is in the pipe
        << "echo \"$$ $agent\" >> " << pids_file << "\n"
        << "exec sleep 300 3>&-\n";
    std::ofstream(agent) << "#!/bin/sh\n" << agent_script << "\n";
    for (const std::string& script : {guard, agent}) ::chmod(script.c_str(), 0755);
  }
  AgentProcessOptions options(LineSink& sink, double start_timeout_seconds) const {
    AgentProcessOptions o;
    o.start_timeout_seconds = start_timeout_seconds;
    o.argv = {tmp.file("agent.sh")};
    o.guard_path = tmp.file("guard.sh");
    o.log_line = sink.function();
    o.backoff_initial_seconds = 0.05;
    o.backoff_max_seconds = 0.05;
    o.stop_grace_seconds = 2;
    return o;
  }
  std::vector<pid_t> pids() const { return pids_in(pids_file); }
  void check_all_killed() const {
    for (pid_t pid : pids()) BOOST_TEST(wait_until([&] { return !alive(pid); }, 5), "pid " << pid << " killed");
  }
  // Ends the hung starts, so that a wait that would last for ever (the behaviour under test failing) ends too.
  void end_them() const {
    for (pid_t pid : pids()) ::kill(pid, SIGKILL);
  }
};

// Runs `call` on a thread of its own and gives it `seconds`; past them, `hung` ends what it waits for. Its seconds.
double bounded(const std::function<void()>& call, double seconds, const HangingStart& hung) {
  const double began = now_seconds();
  std::exception_ptr error;
  std::atomic<bool> done{false};
  std::thread thread([&] {
    try {
      call();
    } catch (...) {
      error = std::current_exception();
    }
    done = true;
  });
  const bool in_time = wait_until([&] { return done.load(); }, seconds);
  const double took = now_seconds() - began;
  if (!in_time) hung.end_them();
  thread.join();
  BOOST_TEST(in_time, "it ended within " << seconds << " s");
  if (error) std::rethrow_exception(error);
  return took;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(agent_processes)

BOOST_AUTO_TEST_CASE(workers_start_with_the_inherited_and_given_environment_and_no_stdin) {
  TempDir tmp;
  ::setenv("ARCLIGHT_TEST_INHERITED", "yes", 1);
  ::setenv("ARCLIGHT_TEST_REPLACED", "old", 1);
  ::setenv("OMPI_COMM_WORLD_RANK", "3", 1);  // the launcher's: the agent is no rank of the job
  ::setenv("PMIX_RANK", "3", 1);
  auto o = shell_agent(
      write_whole("{ env; readlink /proc/$$/fd/0; }", tmp.dir() + "/env.$ARCLIGHT_WORKER_ID") + "; sleep 30", 2);
  o.environment = {"ARCLIGHT_TEST_REPLACED=new", "OPENAI_BASE_URL=http://127.0.0.1:9/v1",
                   "AGL_SERVER_HOST={worker_id}:secret@127.0.0.1"};
  o.worker_id_prefix = "runner-3";
  AgentProcesses agents(o);
  agents.start();
  for (int w = 0; w < 2; ++w) {
    std::string id = "runner-3-w" + std::to_string(w), file = tmp.file("env." + id);
    BOOST_REQUIRE_MESSAGE(wait_until([&] { return exists(file); }, 10), "worker " << id << " wrote its environment");
    auto env = lines_of(file);
    auto has = [&](const std::string& line) { return std::count(env.begin(), env.end(), line) == 1; };
    BOOST_TEST(has("ARCLIGHT_TEST_INHERITED=yes"));
    BOOST_TEST(has("ARCLIGHT_TEST_REPLACED=new"));
    BOOST_TEST(!has("ARCLIGHT_TEST_REPLACED=old"));
    BOOST_TEST(has("OPENAI_BASE_URL=http://127.0.0.1:9/v1"));
    BOOST_TEST(has("ARCLIGHT_WORKER_ID=" + id));
    BOOST_TEST(has("AGL_SERVER_HOST=" + id + ":secret@127.0.0.1"));
    BOOST_TEST(std::none_of(env.begin(), env.end(), [](const std::string& e) {
      return e.rfind("OMPI_COMM_WORLD_RANK=", 0) == 0 || e.rfind("PMIX_RANK=", 0) == 0;
    }));
    BOOST_TEST(env.back() == "/dev/null");
    pid_t pid = agents.pids()[w];
    BOOST_TEST(::getpgid(pid) == pid, "each worker leads a process group of its own");
  }
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  ::unsetenv("PMIX_RANK");
}

BOOST_AUTO_TEST_CASE(the_agent_inherits_no_descriptor_and_no_ignored_signal_of_the_supervisor) {
  TempDir tmp;
  // What a rank holds open (MPI's sockets, files), without close-on-exec, and a signal it ignores.
  int file_fd = ::open(tmp.file("rank_file").c_str(), O_WRONLY | O_CREAT, 0644);
  int rank_fd = ::fcntl(file_fd, F_DUPFD, 100);  // above the few the child rearranges itself
  ::close(file_fd);
  BOOST_REQUIRE(rank_fd >= 100);
  auto previous = ::signal(SIGUSR2, SIG_IGN);
  std::string probe = "{ test -e /proc/$$/fd/" + std::to_string(rank_fd) +
                      " && echo fd-leaked || echo fd-closed; grep SigIgn /proc/$$/status; }";
  AgentProcesses agents(shell_agent(write_whole(probe, tmp.file("probe")) + "; sleep 30"));
  agents.start();
  ::signal(SIGUSR2, previous);
  ::close(rank_fd);
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return exists(tmp.file("probe")); }, 10), "the worker wrote its probe");
  auto probe_lines = lines_of(tmp.file("probe"));
  BOOST_REQUIRE(probe_lines.size() == 2u);
  BOOST_TEST(probe_lines[0] == "fd-closed");
  unsigned long ignored = std::stoul(probe_lines[1].substr(probe_lines[1].find(':') + 1), nullptr, 16);
  BOOST_TEST((ignored & (1ul << (SIGUSR2 - 1))) == 0ul, "SIGUSR2 is back to its default in the agent");
}

BOOST_AUTO_TEST_CASE(stdout_and_stderr_lines_arrive_with_the_worker_prefix) {
  LineSink sink;
  auto o = shell_agent("echo out-line; echo err-line >&2; printf no-newline; sleep 30", 2);
  o.log_prefix = "[rank 3 agent {w}] ";
  o.log_line = sink.function();
  AgentProcesses agents(o);
  agents.start();
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return sink.has("[rank 3 agent 1] err-line"); }, 10),
                        "worker 1's stderr line forwarded");
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return sink.has("[rank 3 agent 0] out-line"); }, 10),
                        "worker 0's stdout line forwarded");
  BOOST_TEST(!sink.has("[rank 3 agent 0] no-newline"), "an unfinished line waits for its end");
  agents.stop();
  BOOST_TEST(sink.has("[rank 3 agent 0] no-newline"), "the last unfinished line is forwarded at the end");
}

// Lines as a terminal would leave them, and nothing that moves its cursor: a progress bar's last state (not its updates
// glued together, nor an overwritten prefix), colours and cursor moves dropped, other control characters as '?'.
BOOST_AUTO_TEST_CASE(carriage_returns_escapes_and_control_characters_do_not_reach_the_log) {
  const std::vector<std::string> lines = lines_until(
      "printf 'bar 10%%\\rbar 50%%\\rbar 100%%\\n'; printf '\\033[31mred\\033[0m\\tx\\033[2K\\033[1A\\033cy\\n'; "
      "printf 'a\\bb\\0c\\r\\n'; printf '\\rforged\\n'; "
      // a pty's CRCRLF, also split over several reads
      "printf 'crcrlf\\r\\r\\n'; printf 'split\\r'; sleep 0.2; printf '\\r'; sleep 0.2; printf '\\n'; "
      // tput sgr0, a title, a hyperlink, a C1 CSI in UTF-8, an ESC before a letter of UTF-8
      "printf '\\033(Bplain\\033]0;title\\007!\\033]8;;http://x\\033\\\\link\\033]8;;\\033\\\\ \\302\\23331m "
      "\\033\\303\\251\\n'; "
      // a raw C1 CSI (an 8-bit terminal's), a Latin-1 byte, a UTF-8 sequence cut short
      "printf '\\23331m raw \\351t\\342\\202 end\\n'",
      "[agent 0] ?31m raw ?t?? end", 10);
  const std::vector<std::string> expected = {"[agent 0] bar 100%",
                                             "[agent 0] red\txy",
                                             "[agent 0] a?b?c",
                                             "[agent 0] forged",
                                             "[agent 0] crcrlf",
                                             "[agent 0] split",
                                             "[agent 0] plain!link ?31m \303\251",
                                             "[agent 0] ?31m raw ?t?? end"};
  BOOST_TEST(lines == expected, boost::test_tools::per_element());
}

// A progress bar that never ends its line is held as its last state, not as all of its updates (300 KB here, which
// went out in pieces of 64 KiB).
BOOST_AUTO_TEST_CASE(a_line_taken_back_by_carriage_returns_is_not_forwarded_in_pieces) {
  const std::vector<std::string> lines =
      lines_until("i=0; while [ $i -lt 20000 ]; do printf '\\rprogress %05d' $i; i=$((i+1)); done; echo; echo done",
                  "[agent 0] done", 30);
  const std::vector<std::string> expected = {"[agent 0] progress 19999", "[agent 0] done"};
  BOOST_TEST(lines == expected, boost::test_tools::per_element());
}

// Agent Lightning's client logs its server's URL (http://runner-3-w0:<secret>@127.0.0.1:...) when the server fails it:
// the job's secret never reaches the job's log.
BOOST_AUTO_TEST_CASE(the_jobs_secret_is_hidden_in_forwarded_lines) {
  LineSink sink;
  auto o = shell_agent("echo \"Waiting for http://w0:s3cr3t@127.0.0.1/health s3cr3ts3cr3t\"; echo done; sleep 30");
  o.log_line = sink.function();
  o.hidden = {"s3cr3t"};
  AgentProcesses agents(o);
  agents.start();
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return sink.has("[agent 0] done"); }, 20), "'done' forwarded");
  agents.stop();
  std::lock_guard<std::mutex> lock(sink.mutex);
  BOOST_TEST(sink.lines.at(0) == "[agent 0] Waiting for http://w0:<hidden>@127.0.0.1/health <hidden><hidden>");
}

// A line too long to wait for its end goes out in pieces, each cut between characters: none holds half of one. It is
// cut once 64 KiB of it are waiting after a read of up to 16 KiB, so it must be longer than 80 KiB to be cut always.
BOOST_AUTO_TEST_CASE(a_long_line_is_cut_between_characters) {
  const std::vector<std::string> lines = lines_until(
      "awk 'BEGIN { printf \"x\"; for (i = 0; i < 50000; i++) printf \"\\303\\251\"; print \"\" }'; "
      "echo done",
      "[agent 0] done", 20);
  std::string whole;
  const std::string prefix = "[agent 0] ";
  BOOST_REQUIRE_GT(lines.size(), 2u);  // 100,001 bytes: more than one piece
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    const std::string piece = lines[i].substr(prefix.size());
    BOOST_TEST((piece.back() != '\303' && piece.front() != '\251'), "piece " << i << " splits a character");
    whole += piece;
  }
  std::string expected = "x";
  for (int i = 0; i < 50000; ++i) expected += "\303\251";
  BOOST_TEST((whole == expected));
}

BOOST_AUTO_TEST_CASE(a_chatty_worker_is_never_blocked_by_its_pipe) {
  TempDir tmp;
  LineSink sink;
  // 1.3 MB, twenty times a pipe's buffer: the worker finishes only if the supervisor keeps reading.
  auto o = shell_agent("seq 1 200000; touch " + tmp.file("finished") + "; sleep 30");
  o.log_line = sink.function();
  AgentProcesses agents(o);
  agents.start();
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return exists(tmp.file("finished")); }, 20), "the chatty worker finished");
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return sink.has("[agent 0] 200000"); }, 10), "its last line forwarded");
  BOOST_TEST(sink.count_starting("[agent 0] ") == 200000u);
}

BOOST_AUTO_TEST_CASE(a_worker_that_exits_is_reported_by_id_and_restarted) {
  TempDir tmp;
  auto o = shell_agent("echo started >> " + tmp.dir() + "/starts.$ARCLIGHT_WORKER_ID; exit 3", 2);
  o.worker_id_prefix = "runner-1";
  o.max_restarts = 100;
  AgentProcesses agents(o);
  agents.start();
  auto exits = collect_exits(agents, 8, 20);
  BOOST_REQUIRE_MESSAGE(exits.size() >= 8, "8 exits reported, got " << exits.size());
  std::set<pid_t> pids;
  for (const auto& e : exits) {
    BOOST_TEST(e.worker_id == "runner-1-w" + std::to_string(e.worker));
    BOOST_TEST(e.exit_code == 3);
    BOOST_TEST(e.signal == 0);
    BOOST_TEST(e.describe() == "exited with code 3");
    pids.insert(e.pid);
  }
  BOOST_TEST(pids.size() == exits.size(), "every start is a new process");
  BOOST_TEST(agents.restarts() >= 6);
  BOOST_TEST(lines_of(tmp.file("starts.runner-1-w0")).size() >= 3u);
  BOOST_TEST(lines_of(tmp.file("starts.runner-1-w1")).size() >= 3u);
}

// The guard between the supervisor and the agent ends as the agent did, also by a signal the guard ignores itself
// (SIGTERM, SIGUSR1) or handles (SIGHUP, the runner's end); the pid reported is the agent's.
BOOST_AUTO_TEST_CASE(a_worker_is_reported_by_its_own_pid_and_signal_through_its_guard) {
  for (int sig : {SIGTERM, SIGHUP, SIGUSR1}) {
    TempDir tmp;
    const std::string file = tmp.file("pid");
    AgentProcesses agents(shell_agent(write_whole("echo $$", file) + "; kill -" + std::to_string(sig) + " $$"));
    agents.start();
    auto exits = collect_exits(agents, 1, 10);
    BOOST_REQUIRE_MESSAGE(exits.size() == 1u, "the worker's end reported");
    BOOST_TEST(exits[0].signal == sig);
    BOOST_TEST(exits[0].pid == std::stoi(read_file(file)));
  }
}

// The guard kills the group on its runner's end only: a SIGHUP that the agent sends its own group is the agent's.
BOOST_AUTO_TEST_CASE(an_agent_that_hangs_up_its_group_is_not_killed_by_its_guard) {
  LineSink sink;
  auto o = shell_agent("trap 'echo hung up' HUP; kill -HUP 0; sleep 0.3; echo still here; exec sleep 300");
  o.log_line = sink.function();
  AgentProcesses agents(o);
  agents.start();
  BOOST_TEST(wait_until([&] { return sink.has("[agent 0] still here"); }, 10), "the agent went on");
  BOOST_TEST(sink.has("[agent 0] hung up"));
  BOOST_TEST(agents.poll().empty(), "no worker ended");
}

// Signals the agent sends its own group (the guard is in it) are the agent's: the guard neither dies nor stops.
BOOST_AUTO_TEST_CASE(signals_an_agent_sends_its_group_leave_its_guard_alone) {
  AgentProcesses agents(
      shell_agent("trap 'echo alarm' ALRM; trap '' TSTP; kill -ALRM 0; kill -TSTP 0; sleep 0.2; exit 7"));
  agents.start();
  auto exits = collect_exits(agents, 1, 10);
  BOOST_REQUIRE_MESSAGE(exits.size() == 1u, "the worker's end reported");
  BOOST_TEST(exits[0].describe() == "exited with code 7");
}

BOOST_AUTO_TEST_CASE(a_worker_ended_by_a_signal_is_reported_with_the_signal) {
  AgentProcesses agents(shell_agent("kill -KILL $$"));
  agents.start();
  auto exits = collect_exits(agents, 1, 10);
  BOOST_REQUIRE_MESSAGE(exits.size() == 1u, "the killed worker reported");
  BOOST_TEST(exits[0].signal == SIGKILL);
  BOOST_TEST(exits[0].describe() == "killed by signal 9 (Killed)");
  WorkerExit not_found;
  not_found.exit_code = 127;
  BOOST_TEST(not_found.describe() == "exited with code 127 (command not found?)");
}

BOOST_AUTO_TEST_CASE(restarts_wait_for_a_doubling_backoff) {
  TempDir tmp;
  auto o = shell_agent("date +%s.%N >> " + tmp.file("starts") + "; exit 1");
  o.backoff_initial_seconds = 0.2;
  o.backoff_max_seconds = 0.8;
  o.max_restarts = 100;
  AgentProcesses agents(o);
  agents.start();
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return lines_of(tmp.file("starts")).size() >= 5; }, 20), "5 starts");
  auto t = start_times(tmp.file("starts"));
  double expected[] = {0.2, 0.4, 0.8, 0.8};  // doubling, then held at the maximum
  for (int i = 0; i < 4; ++i) {
    double gap = t[i + 1] - t[i];
    BOOST_TEST(gap >= expected[i] - 0.01, "restart " << i + 1 << " after " << gap << " s");
    BOOST_TEST(gap < expected[i] + 1.0, "restart " << i + 1 << " after " << gap << " s");
  }
}

BOOST_AUTO_TEST_CASE(the_backoff_starts_again_after_a_healthy_life) {
  TempDir tmp;
  // Each life (0.3 s) passes healthy_after (0.2 s): every restart waits the first backoff, 0.1 s (a gap of about
  // 0.5 s with the fork and exec). Without the reset the fifth restart would come 0.3 + 1.6 s after the fifth start.
  auto o = shell_agent("date +%s.%N >> " + tmp.file("starts") + "; sleep 0.3; exit 1");
  o.backoff_initial_seconds = 0.1;
  o.backoff_max_seconds = 5;
  o.healthy_after_seconds = 0.2;
  o.max_restarts = 100;
  AgentProcesses agents(o);
  agents.start();
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return lines_of(tmp.file("starts")).size() >= 6; }, 20), "6 starts");
  auto t = start_times(tmp.file("starts"));
  for (int i = 0; i < 5; ++i) BOOST_TEST(t[i + 1] - t[i] < 1.5, "restart " << i + 1 << " after " << t[i + 1] - t[i]);
}

BOOST_AUTO_TEST_CASE(a_command_not_on_path_is_refused_with_its_name) {
  AgentProcessOptions o;
  o.argv = {"arclight-no-such-agent", "--flag"};
  AgentProcesses agents(o);
  BOOST_CHECK_EXCEPTION(agents.start(), UsageError, [](const UsageError& e) {
    std::string what = e.what();
    BOOST_TEST_MESSAGE(what);
    return what.find("agent command 'arclight-no-such-agent' not found on PATH") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(a_command_that_cannot_be_executed_is_refused_with_the_reason) {
  TempDir tmp;
  std::ofstream(tmp.file("agent.sh")) << "#!/bin/sh\necho hello\n";
  ::chmod(tmp.file("agent.sh").c_str(), 0644);  // not executable
  AgentProcessOptions o;
  o.argv = {tmp.file("agent.sh")};
  o.workers = 2;
  AgentProcesses agents(o);
  BOOST_CHECK_EXCEPTION(agents.start(), UsageError, [&](const UsageError& e) {
    std::string what = e.what();
    BOOST_TEST_MESSAGE(what);
    return what == "cannot run agent command '" + tmp.file("agent.sh") + "': Permission denied";
  });
  const std::vector<pid_t> pids = agents.pids();
  BOOST_TEST(std::all_of(pids.begin(), pids.end(), [](pid_t p) { return p == 0; }), "nothing left running");
}

// A directory passed access(X_OK) on every rank, and the start failed on one: an MPI_Abort, not exit 2 on every rank.
BOOST_AUTO_TEST_CASE(a_directory_is_refused_as_a_command_before_any_start) {
  TempDir tmp;
  BOOST_CHECK_EXCEPTION(resolve_command(tmp.dir(), {}), UsageError, [&](const UsageError& e) {
    return std::string(e.what()) == "cannot run agent command '" + tmp.dir() + "': Is a directory";
  });
  BOOST_CHECK_EXCEPTION(resolve_command(tmp.file("none"), {}), UsageError, [&](const UsageError& e) {
    return std::string(e.what()) == "cannot run agent command '" + tmp.file("none") + "': No such file or directory";
  });
  BOOST_TEST(resolve_command("/bin/sh", {}) == "/bin/sh");
}

// mpirun binds a rank to a core: its agents (every worker of the runner) shared that one core.
BOOST_AUTO_TEST_CASE(workers_are_not_bound_to_the_supervisors_cpu) {
  cpu_set_t all;
  BOOST_REQUIRE(::sched_getaffinity(0, sizeof all, &all) == 0);
  if (CPU_COUNT(&all) < 2) {
    BOOST_TEST_MESSAGE("skipped: this process may use one CPU only");
    return;
  }
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  TempDir tmp;
  BOOST_REQUIRE(::sched_setaffinity(0, sizeof one, &one) == 0);  // as a bound rank
  AgentProcesses agents(
      shell_agent(write_whole("grep Cpus_allowed_list: /proc/self/status", tmp.file("cpus")) + "; sleep 30"));
  agents.start();
  ::sched_setaffinity(0, sizeof all, &all);
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return exists(tmp.file("cpus")); }, 10), "the worker wrote its CPUs");
  const std::vector<std::string> cpus = lines_of(tmp.file("cpus"));
  BOOST_REQUIRE(cpus.size() == 1u);
  const std::string list = cpus[0].substr(cpus[0].find_first_not_of(" \t", cpus[0].find(':') + 1));
  BOOST_TEST(list != std::to_string(first), "the agent may use more than the supervisor's CPU: " << list);
}

BOOST_AUTO_TEST_CASE(a_script_whose_interpreter_is_missing_is_refused_with_a_hint) {
  TempDir tmp;
  std::ofstream(tmp.file("agent.py")) << "#!/no/such/python3\nprint('hello')\n";
  ::chmod(tmp.file("agent.py").c_str(), 0755);
  AgentProcessOptions o;
  o.argv = {tmp.file("agent.py")};
  AgentProcesses agents(o);
  BOOST_CHECK_EXCEPTION(agents.start(), UsageError, [&](const UsageError& e) {
    return std::string(e.what()) == "cannot run agent command '" + tmp.file("agent.py") +
                                        "': No such file or directory (the interpreter its #! line names?)";
  });
}

// A restart that cannot start the agent (here its script is gone; fork out of processes would do the same) is tried
// again after the backoff instead of ending the runner, and the agent lives again once it can.
BOOST_AUTO_TEST_CASE(a_restart_that_cannot_start_the_agent_is_tried_again) {
  TempDir tmp;
  const std::string script = tmp.file("agent.sh");
  std::ofstream(script) << "#!/bin/sh\nrm \"$0\"\nexit 1\n";  // its first life ends it, and removes it
  ::chmod(script.c_str(), 0755);
  LineSink sink;
  AgentProcessOptions o;
  o.argv = {script};
  o.log_line = sink.function();
  o.backoff_initial_seconds = 0.05;
  o.backoff_max_seconds = 0.2;
  o.max_restarts = 50;  // the failed restarts count, 5 a second at most: a slow test thread trips no limit
  AgentProcesses agents(o);
  agents.start();
  const auto polled_until = [&](const std::function<bool()>& done, double seconds) {
    return wait_until(
        [&] {
          agents.poll();  // throws once the runner would end
          return done();
        },
        seconds);
  };
  BOOST_REQUIRE_MESSAGE(polled_until([&] { return sink.count_containing("could not be restarted") > 0; }, 10),
                        "a restart failed");
  std::ofstream(script + ".part") << "#!/bin/sh\necho second life\nsleep 30\n";
  ::chmod((script + ".part").c_str(), 0755);
  std::filesystem::rename(script + ".part", script);
  BOOST_TEST(polled_until([&] { return sink.has("[agent 0] second life"); }, 10), "the agent started again");
  agents.stop();
}

BOOST_AUTO_TEST_CASE(a_command_that_dies_at_once_trips_the_restart_limit) {
  LineSink sink;
  auto o = shell_agent("echo oops >&2; exit 3");
  o.backoff_initial_seconds = 0.01;
  o.backoff_max_seconds = 0.01;
  o.max_restarts = 3;
  o.log_line = sink.function();
  AgentProcesses agents(o);
  agents.start();
  const std::string message = poll_until_it_throws(agents, 10);
  BOOST_REQUIRE_MESSAGE(!message.empty(), "poll() threw within 10 s");
  BOOST_TEST(message ==
             "agent command 'sh -c echo oops >&2; exit 3' (worker worker-w0) was restarted 3 times within 60 s and "
             "ended again (exited with code 3): not restarted again; its output is in the log with the prefix "
             "'[agent 0] '");
  BOOST_TEST(agents.restarts() == 3);
  BOOST_TEST(sink.count_starting("[agent 0] oops") == 4u);
  BOOST_CHECK_THROW(agents.poll(), Error);  // and on every later call
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  BOOST_TEST(agents.restarts() == 3, "no restart after the limit");
}

// A hung exec (an agent's binary on a hung file system) would hold the supervisor, and the runner with it, for ever:
// the start gives up at its deadline, and kills the guard and the agent's group.
BOOST_AUTO_TEST_CASE(a_start_whose_agent_never_execs_fails_at_its_deadline) {
  HangingStart hung(0);
  LineSink sink;
  AgentProcessOptions o = hung.options(sink, 2);
  AgentProcesses agents(o);
  std::string message;
  const double took = bounded(
      [&] {
        try {
          agents.start();
        } catch (const UsageError& e) {
          message = e.what();
        }
      },
      30, hung);
  BOOST_TEST(message == "agent worker worker-w0 did not start within 2 s: '" + o.argv[0] +
                            "' was not running yet (is its file system hung?)");
  BOOST_TEST(took >= 2.0);
  BOOST_TEST(took < 10.0);
  BOOST_REQUIRE(hung.pids().size() == 2u);
  hung.check_all_killed();
}

// stop() while a restart waits for its agent's exec ends the wait at once, not at the deadline.
BOOST_AUTO_TEST_CASE(stop_ends_a_restart_whose_agent_never_execs) {
  HangingStart hung(1);
  LineSink sink;
  AgentProcessOptions o = hung.options(sink, 300);
  AgentProcesses agents(o);
  agents.start();
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return hung.pids().size() == 2u; }, 10), "the restart hangs");
  const double took = bounded([&] { agents.stop(); }, 30, hung);
  BOOST_TEST(took < 10.0);
  hung.check_all_killed();
}

// Restarts that cannot start the agent count toward the restart limit, and so many in a row end it even where each
// lasts longer than the window (a start that hangs for start_timeout_seconds, 60 s by default, against a window of
// 60 s: the window never held two, and a hung file system was tried for ever). poll() says why the last one failed.
BOOST_AUTO_TEST_CASE(restarts_that_never_exec_trip_the_restart_limit) {
  HangingStart hung(1);
  LineSink sink;
  AgentProcessOptions o = hung.options(sink, 1);
  o.max_restarts = 2;
  o.restart_window_seconds = 0.5;  // shorter than a hung start
  AgentProcesses agents(o);
  agents.start();
  const std::string message = poll_until_it_throws(agents, 20);
  BOOST_REQUIRE_MESSAGE(!message.empty(), "poll() threw within 20 s");
  BOOST_TEST(message == "agent worker worker-w0 did not start within 1 s: '" + o.argv[0] +
                            "' was not running yet (is its file system hung?) (worker worker-w0; 2 restarts in a row "
                            "could not start it: not tried again)");
  BOOST_TEST(sink.count_containing("could not be restarted: agent worker worker-w0 did not start within 1 s") == 1u);
  BOOST_TEST(agents.restarts() == 2);
  BOOST_TEST(hung.pids().size() == 4u, "two hung starts, each a guard and an agent");
  hung.check_all_killed();
  agents.stop();
}

// While one worker's restart waits for its hung exec, the others' output still reaches the log (their pipes would
// fill, and hold them).
BOOST_AUTO_TEST_CASE(a_hung_restart_leaves_the_other_workers_output_flowing) {
  HangingStart hung(2, "[ \"$ARCLIGHT_WORKER_ID\" = worker-w1 ] && exit 1\nwhile :; do echo tick; sleep 0.05; done");
  LineSink sink;
  AgentProcessOptions o = hung.options(sink, 300);
  o.workers = 2;
  AgentProcesses agents(o);
  agents.start();
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return hung.pids().size() == 2u; }, 10), "worker 1's restart hangs");
  const std::size_t before = sink.count_starting("[agent 0] tick");
  BOOST_TEST(wait_until([&] { return sink.count_starting("[agent 0] tick") >= before + 5; }, 10),
             "worker 0's lines arrive during the hung start");
  bounded([&] { agents.stop(); }, 30, hung);
  hung.check_all_killed();
}

BOOST_AUTO_TEST_CASE(stop_kills_a_worker_that_ignores_sigterm_after_the_grace) {
  TempDir tmp;
  const std::string file = tmp.file("escaped");
  // Its daemons ignore SIGTERM too (an ignored signal is inherited).
  auto o = shell_agent("trap '' TERM; " + start_escapees + "; " + write_whole("echo $escaped", file) +
                       "; while :; do sleep 0.1; done");
  o.stop_grace_seconds = 0.5;
  AgentProcesses agents(o);
  agents.start();
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return exists(file); }, 10), "the worker set its trap");
  pid_t pid = agents.pids()[0];
  double begin = now_seconds();
  agents.stop();
  double took = now_seconds() - begin;
  BOOST_TEST(took >= 0.5, "it got the grace first: " << took << " s");
  BOOST_TEST(took < 2.0, "then SIGKILL: " << took << " s");
  BOOST_TEST(!alive(pid));
  for (pid_t escaped : pids_in(file)) BOOST_TEST(!alive(escaped), "process " << escaped << " ended with the stop");
}

BOOST_AUTO_TEST_CASE(stop_ends_every_process_the_worker_started) {
  TempDir tmp;
  std::string file = tmp.file("grandchildren");
  AgentProcesses agents(shell_agent("sleep 300 & child=$!; " + start_escapees + "; " +
                                    write_whole("echo $child $escaped", file) + "; wait"));
  agents.start();
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return exists(file); }, 10), "the worker started its children");
  const std::vector<pid_t> grandchildren = pids_in(file);
  BOOST_REQUIRE(grandchildren.size() == 3u);
  for (pid_t pid : grandchildren) BOOST_REQUIRE(alive(pid));
  agents.stop();
  for (pid_t pid : grandchildren) BOOST_TEST(wait_until([&] { return !alive(pid); }, 2), "process " << pid << " ended");
}

BOOST_AUTO_TEST_CASE(a_dying_worker_takes_every_process_it_started_with_it) {
  TempDir tmp;
  std::string file = tmp.file("grandchildren");
  auto o = shell_agent("sleep 300 & child=$!; " + start_escapees + "; " + write_whole("echo $child $escaped", file) +
                       "; sleep 0.2; exit 1");
  o.backoff_initial_seconds = 30;  // no second start (and grandchildren) during the test
  AgentProcesses agents(o);
  agents.start();
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return exists(file); }, 10), "the worker started its children");
  const std::vector<pid_t> grandchildren = pids_in(file);
  BOOST_REQUIRE(grandchildren.size() == 3u);
  BOOST_REQUIRE_MESSAGE(collect_exits(agents, 1, 10).size() == 1u, "the worker's exit reported");
  for (pid_t pid : grandchildren) BOOST_TEST(wait_until([&] { return !alive(pid); }, 2), "process " << pid << " ended");
}

// The orphans of a long-lived agent (`cmd &` in a shell that ends) come to its guard, which reaps them while the
// agent runs: they must not pile up as zombies (a pid each) for the agent's whole life.
BOOST_AUTO_TEST_CASE(a_guard_reaps_the_orphans_of_a_running_agent) {
  TempDir tmp;
  std::string file = tmp.file("guard");
  auto o = shell_agent("for i in 1 2 3 4 5 6 7 8; do sh -c 'true &'; done; " + write_whole("echo $PPID", file) +
                       "; exec sleep 300");
  o.backoff_initial_seconds = 30;
  AgentProcesses agents(o);
  agents.start();
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return exists(file); }, 10), "the agent started");
  const pid_t guard = pids_in(file).at(0);
  BOOST_TEST(wait_until([&] { return zombie_children_of(guard) == 0; }, 5),
             zombie_children_of(guard) << " zombies wait for the guard " << guard);
}

// A hung worker killed by the runner (its rollout timed out): what it started goes too, and it is reported killed.
BOOST_AUTO_TEST_CASE(a_killed_worker_takes_every_process_it_started_with_it) {
  TempDir tmp;
  std::string file = tmp.file("grandchildren");
  auto o = shell_agent(start_escapees + "; " + write_whole("echo $escaped", file) + "; exec sleep 300");
  o.backoff_initial_seconds = 30;
  AgentProcesses agents(o);
  const auto before_it_started = std::chrono::steady_clock::now();
  agents.start();
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return exists(file); }, 10), "the worker started its children");
  const std::vector<pid_t> escaped = pids_in(file);
  BOOST_REQUIRE(escaped.size() == 2u);
  // Only the worker's own id names it: an agent's name for one of its episodes, or a sign, is no worker's.
  for (const char* other : {"-w0-1", "-w00", "-w+0", "-w 0", "-w", "-w1", "-w99999999999999999999"})
    BOOST_TEST(!agents.kill_worker(o.worker_id_prefix + other), other);
  // What a process before this one took (this one is its restart) does not kill it.
  BOOST_TEST(!agents.kill_worker(o.worker_id_prefix + "-w0", before_it_started));
  BOOST_TEST(alive(agents.pids()[0]));
  BOOST_REQUIRE(agents.kill_worker(o.worker_id_prefix + "-w0"));
  const std::vector<WorkerExit> exits = collect_exits(agents, 1, 10);
  BOOST_REQUIRE(exits.size() == 1u);
  BOOST_TEST(exits[0].signal == SIGKILL);
  for (pid_t pid : escaped) BOOST_TEST(wait_until([&] { return !alive(pid); }, 2), "process " << pid << " ended");
}

// The important one: a runner killed by SIGKILL (no destructor, no stop) leaves nothing behind: no guard, no agent,
// and none of the processes an agent started (its children, which PDEATHSIG on the agent would not reach).
BOOST_AUTO_TEST_CASE(nothing_survives_a_supervisor_killed_by_sigkill) {
  TempDir tmp;
  int report[2];
  BOOST_REQUIRE(::pipe(report) == 0);
  pid_t supervisor = ::fork();
  BOOST_REQUIRE(supervisor >= 0);
  if (supervisor == 0) {  // the supervisor: starts the workers, reports their pids, waits to be killed
    ::close(report[0]);
    // Each agent writes its own pid, its child's and those of two processes that left its group, then becomes
    // `sleep`.
    const std::string file = tmp.file("pids.$ARCLIGHT_WORKER_ID");
    AgentProcesses agents(shell_agent("sleep 300 & child=$!; " + start_escapees + "; " +
                                          write_whole("echo $$ $child $escaped", file) + "; exec sleep 300",
                                      3));
    agents.start();
    auto pids = agents.pids();
    ssize_t n = ::write(report[1], pids.data(), pids.size() * sizeof(pid_t));
    if (n != static_cast<ssize_t>(pids.size() * sizeof(pid_t))) ::_exit(1);
    for (;;) ::pause();
  }
  ::close(report[1]);
  pid_t pids[3] = {};
  pollfd ready{report[0], POLLIN, 0};
  BOOST_REQUIRE_MESSAGE(::poll(&ready, 1, 10000) == 1, "the supervisor reported its workers within 10 s");
  BOOST_REQUIRE(::read(report[0], pids, sizeof pids) == static_cast<ssize_t>(sizeof pids));
  ::close(report[0]);
  std::vector<pid_t> processes;
  for (int w = 0; w < 3; ++w) {
    const std::string file = tmp.file("pids.worker-w" + std::to_string(w));
    BOOST_REQUIRE_MESSAGE(wait_until([&] { return exists(file); }, 10), "worker " << w << " started its child");
    const std::vector<pid_t> written = pids_in(file);
    BOOST_REQUIRE(written.size() == 4u);
    const pid_t agent = written[0], child = written[1];
    BOOST_TEST(agent == pids[w], "pids() names the agent");
    const pid_t guard = parent_of(agent);
    BOOST_TEST(parent_of(guard) == supervisor, "the agent runs under a guard the supervisor started");
    BOOST_TEST(::getpgid(guard) == guard, "the guard leads a group of its own");
    BOOST_TEST(::getpgid(child) == agent, "the agent's child is in the agent's group");
    BOOST_TEST(::getpgid(written[2]) != agent, "a daemon is not");
    BOOST_TEST(parent_of(written[2]) == guard, "the guard adopted the daemon");
    processes.insert(processes.end(), written.begin(), written.end());
    processes.push_back(guard);
  }
  for (pid_t pid : processes) BOOST_REQUIRE_MESSAGE(alive(pid), "process " << pid << " runs");
  ::kill(supervisor, SIGKILL);
  ::waitpid(supervisor, nullptr, 0);
  for (pid_t pid : processes) BOOST_TEST(wait_until([&] { return !alive(pid); }, 2), "process " << pid << " ended");
}

BOOST_AUTO_TEST_SUITE_END()
