// Faults over MPI, with the real store server and clients (mpirun -np 4):
//   rank 1: a healthy runner
//   rank 2: hangs mid-episode once, until another runner has taken its rollout, then sends late spans
//   rank 3: dies (falls silent for good) in the middle of its third episode
//   every runner: the agent throws on "poison" tasks, every time
// Rank 0 checks that every rollout ended exactly once, as the rules say.
#include "../mpi_test_main.hpp"

#include <cstdio>
#include <memory>
#include <set>
#include <thread>

#include "arclight/comm/store_service.hpp"
#include "arclight/store/memory_store.hpp"
#include "arclight/store/span_batcher.hpp"

using namespace arclight;
using namespace arclight::store;

namespace {
constexpr int total_rollouts = 40;
constexpr int poison_every = 10;  // rollouts 0, 10, 20, 30 always throw
int rank_ = 0, size_ = 0;

void check(bool ok, const std::string& what) { BOOST_CHECK_MESSAGE(ok, what); }

void sleep_for(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

RolloutConfig fault_config() {
  RolloutConfig c;
  c.unresponsive_seconds = 0.4;
  c.timeout_seconds = 30;
  c.max_attempts = 3;
  c.retry_condition = bit(AttemptStatus::failed) | bit(AttemptStatus::unresponsive) | bit(AttemptStatus::timeout);
  return c;
}

Span step_span(const AttemptedRollout& ar, int step) {
  Span s;
  s.rollout_id = ar.rollout.id;
  s.attempt_id = ar.attempt.id;
  s.name = "step";
  s.attributes = {{"step", double(step)}, {"tokens", TokenIds{1, 2, 3, step}}};
  return s;
}

// One runner rank: dequeue, run the scripted episode, report. Returns when the coordinator says stop.
void run_runner(MPI_Comm comm, int rank) {
  auto client = std::make_unique<comm::RemoteStore>(comm, 0, 30.0);
  const std::string me = "runner-" + std::to_string(rank);
  SpanBatcher batcher(*client, 4, 0.05);
  int healthy_episodes = 0;  // episodes of tasks that are not poison
  bool hung_once = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    auto got = client->dequeue(me);
    if (!got) {
      try {
        client->get_latest_resources("stop");
        break;  // the coordinator has everything
      } catch (const StoreError&) {
        sleep_for(0.01);
        continue;
      }
    }
    const AttemptedRollout ar = *got;
    bool poison = ar.rollout.input.rfind("poison", 0) == 0;
    healthy_episodes += !poison;  // a poison task throws at its first step, before rank 3 could die in its second
    try {
      for (int step = 0; step < 3; ++step) {
        batcher.add(step_span(ar, step));
        if (step == 1 && rank == 3 && healthy_episodes == 3) {
          batcher.flush();
          // Simulated death: never speaks again. The final barrier is all it does.
          client.release();  // NOLINT: a dead process says no bye
          MPI_Barrier(MPI_COMM_WORLD);
          return;
        }
        if (step == 1 && rank == 2 && !hung_once) {
          hung_once = true;
          batcher.flush();
          // Hang until another runner has taken this rollout over (bounded).
          for (int i = 0; i < 300 && client->get_latest_attempt(ar.rollout.id).id == ar.attempt.id; ++i)
            sleep_for(0.05);
        }
        if (poison) throw std::runtime_error("the agent's tool crashed");
        sleep_for(0.005);
      }
      batcher.flush();
      AttemptUpdate done;
      done.status = AttemptStatus::succeeded;
      client->update_attempt(ar.rollout.id, ar.attempt.id, done);
    } catch (const StoreError& e) {
      // The store refused a late report: the rollout moved on without us. That is the rule.
    } catch (const std::exception& e) {
      batcher.flush();
      AttemptUpdate failed;
      failed.status = AttemptStatus::failed;
      try {
        client->update_attempt(ar.rollout.id, ar.attempt.id, failed);
      } catch (const StoreError&) {
      }
    }
  }
  batcher.flush();
  client.reset();  // bye
  MPI_Barrier(MPI_COMM_WORLD);
}

void run_coordinator(MPI_Comm comm) {
  SystemClock clock;
  MemoryStore store(clock, fault_config());
  Watchdog watchdog(store, 0.02);
  comm::StoreServer server(comm, store);
  std::vector<NewRollout> tasks(total_rollouts);
  for (int i = 0; i < total_rollouts; ++i)
    tasks[i].input = (i % poison_every == 0 ? "poison-" : "task-") + std::to_string(i);
  auto queued = store.enqueue(tasks);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto all_ended = [&] {
    Statistics s = store.statistics();
    return s.rollouts[int(RolloutStatus::succeeded)] + s.rollouts[int(RolloutStatus::failed)] +
               s.rollouts[int(RolloutStatus::cancelled)] ==
           std::uint64_t(total_rollouts);
  };
  bool stop_posted = false;
  // Serve until the two live runners said bye (the dead one never will), bounded.
  server.serve_until_all_done([&] {
    if (!stop_posted && all_ended()) {
      store.add_resources("stop", "");
      stop_posted = true;
    }
    return (stop_posted && server.clients_done() >= 2) || std::chrono::steady_clock::now() > deadline;
  });
  check(std::chrono::steady_clock::now() <= deadline, "the run finished within 60 s");

  // Every rollout ended exactly once.
  auto all = store.query_rollouts({}, {}).items;
  check(all.size() == std::size_t(total_rollouts), "40 rollouts in the store");
  std::set<RolloutId> ids;
  int succeeded = 0, failed = 0;
  for (const Rollout& r : all) {
    ids.insert(r.id);
    check(is_final(r.status), "rollout " + std::to_string(r.id) + " ended (" + std::string(to_string(r.status)) + ")");
    bool poison = r.input.rfind("poison", 0) == 0;
    if (r.status == RolloutStatus::succeeded) ++succeeded;
    if (r.status == RolloutStatus::failed) ++failed;
    if (poison) {
      check(r.status == RolloutStatus::failed, r.input + " failed");
      check(r.attempt_count == 3,
            r.input + " was tried max_attempts = 3 times, not " + std::to_string(r.attempt_count));
    } else {
      check(r.status == RolloutStatus::succeeded, r.input + " succeeded");
    }
  }
  check(ids.size() == all.size(), "no rollout is duplicated");
  check(succeeded == 36 && failed == 4,
        "36 succeeded and 4 failed, got " + std::to_string(succeeded) + "/" + std::to_string(failed));

  // The hung runner's rollout and the dead runner's rollout were finished by others.
  int hung_taken_over = 0, dead_taken_over = 0;
  for (const Rollout& r : all) {
    auto attempts = store.query_attempts(r.id);
    const Attempt& last = attempts.back();
    for (const Attempt& a : attempts) {
      if (&a == &last || r.status != RolloutStatus::succeeded) continue;
      if (a.worker_id == "runner-2" && last.worker_id != "runner-2") ++hung_taken_over;
      if (a.worker_id == "runner-3" && a.status == AttemptStatus::unresponsive) {
        ++dead_taken_over;
        check(last.worker_id != "runner-3", "the dead runner's rollout was completed by another runner");
      }
    }
  }
  check(hung_taken_over >= 1, "the hung runner's rollout was completed by another runner");
  check(dead_taken_over == 1, "exactly one rollout was held by the dead runner, and was completed by another");
  for (const Worker& w : store.query_workers())
    if (w.id == "runner-3") check(w.status == WorkerStatus::unknown, "the dead runner is marked unknown");
  std::printf("store statistics: %llu spans, %llu attempts unresponsive\n",
              (unsigned long long)store.statistics().spans,
              (unsigned long long)store.statistics().attempts[int(AttemptStatus::unresponsive)]);
  MPI_Barrier(MPI_COMM_WORLD);
}
}  // namespace

BOOST_AUTO_TEST_CASE(every_rollout_ends_once_through_a_hung_a_dead_and_a_failing_runner) {
  BOOST_REQUIRE_MESSAGE(size_ == 4, "the test needs exactly 4 ranks, not " << size_);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rank_ == 0)
    run_coordinator(comm);
  else
    run_runner(comm, rank_);
  MPI_Comm_free(&comm);
}

int main(int argc, char** argv) { return mpi_test_main(argc, argv, rank_, size_); }
