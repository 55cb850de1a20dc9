#pragma once
// The store over MPI: rank 0 serves its MemoryStore; every other rank holds a
// RemoteStore with the same interface.
#include <mpi.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <optional>
#include <vector>

#include "arclight/comm/channels.hpp"
#include "arclight/core/error.hpp"
#include "arclight/comm/protocol.hpp"
#include "arclight/comm/waiting.hpp"
#include "arclight/store/store.hpp"

namespace arclight::comm {

// Serves a store to the other ranks of a communicator without blocking: each
// poll() takes every request that has arrived (into receives posted ahead, which
// cost less than probing for each; one larger than those on its own tag, probed
// for with MPI_Improbe / MPI_Mrecv), answers
// it with a non-blocking send, and answers parked wait_for_rollouts requests
// when their rollouts end or their time is up. The caller interleaves poll()
// with its own work (the algorithm); the store's watchdog runs on its own thread.
class StoreServer {
 public:
  // Requests up to this size go to the receives the server posts ahead; larger ones to
  // tag_store_large_request.
  static constexpr std::size_t posted_request_bytes = std::size_t(1) << 20;
  // The tag a request of this size goes on.
  static int request_tag(std::size_t request_bytes) {
    return request_bytes <= posted_request_bytes ? tag_store_request : tag_store_large_request;
  }

  StoreServer(MPI_Comm comm, store::MemoryStore& store);
  // Cancels the posted receives; a request that came too late is not answered.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  // Tests only: honour `reset` requests by switching to the store this returns.
  void allow_reset(std::function<store::MemoryStore&()> fresh_store) { fresh_store_ = std::move(fresh_store); }

  std::size_t poll();
  // While held (rank 0 restores its store on another thread), requests are kept, not answered: each gets a
  // `pending` reply at once and every second after, which starts its client's deadline again; release() answers
  // them in the order they came.
  void hold();
  void release();
  // Polls until every other rank has said bye, or `stop` returns true.
  void serve_until_all_done(const std::function<bool()>& stop = [] { return false; });

  int clients_done() const { return clients_done_; }
  // The ranks that have not said bye, in rank order.
  std::vector<int> clients_not_done() const;
  std::uint64_t requests_served() const { return served_; }
  std::uint64_t malformed_requests() const { return malformed_; }

 private:
  struct ParkedWait {
    int source;
    std::uint32_t request_id;
    std::vector<store::RolloutId> ids;
    std::chrono::steady_clock::time_point deadline;
    std::optional<std::uint64_t> ended_seen;  // the store's ended rollouts at its last look (none: not looked yet)
  };
  struct HeldRequest {
    int source;
    std::string message;
    std::chrono::steady_clock::time_point pending_sent;
  };
  void post(std::size_t receive);
  std::size_t take_posted(std::size_t done);
  std::size_t take_large_requests();
  // A request: answered, or kept while held.
  void take(int source, std::string_view message);
  void reply(int source, std::string message);
  void keep_held_waiting();
  void handle(int source, std::string_view message);
  bool try_park(int source, std::string_view message);
  void answer_parked_waits();
  void complete_sends();

  MPI_Comm comm_;
  IdleBackoff backoff_{IdleBackoff::Awaiting::next_message};
  store::MemoryStore* store_;
  std::function<store::MemoryStore&()> fresh_store_;
  struct LargeReceive {
    int source = 0;
    std::unique_ptr<std::string> bytes;  // where MPI writes: it stays put while large_ grows
    MPI_Request request = MPI_REQUEST_NULL;
  };
  std::vector<LargeReceive> large_;  // large requests matched and still arriving
  // Receives posted ahead, tested all at once: one whose request is still arriving (a large one from a rank that
  // froze mid-send) holds up no other. Each buffer is posted_request_bytes, left uninitialised: pages come in as
  // requests land.
  std::vector<std::unique_ptr<char[]>> posted_buffers_;
  std::vector<MPI_Request> posted_requests_;
  std::vector<std::uint64_t> posted_order_;  // when each was posted: MPI matches requests to the earliest first
  std::uint64_t posts_ = 0;
  std::vector<int> arrived_;  // MPI_Testsome's indices and statuses
  std::vector<MPI_Status> arrived_status_;
  std::vector<std::pair<std::uint64_t, std::size_t>> arrival_order_;  // (posted_order_, k), sorted
  std::uint64_t polls_ = 0;
  std::vector<MPI_Request> send_requests_;
  std::vector<std::unique_ptr<std::string>> send_buffers_;  // the replies in flight
  std::vector<int> completed_;                              // MPI_Testsome's indices
  std::vector<ParkedWait> parked_;
  bool holding_ = false;
  std::vector<HeldRequest> held_;
  int clients_done_ = 0;
  std::vector<bool> said_bye_;  // by rank
  std::uint64_t served_ = 0;
  std::uint64_t malformed_ = 0;
};

// The store as seen from a runner or trainer: each call is one request and one
// reply to the server rank. Thread-safe. Refusals arrive as the same StoreError
// the local store throws; a server that does not answer within reply_timeout
// raises arclight::Error rather than hanging.
class RemoteStore : public store::Store {
 public:
  RemoteStore(MPI_Comm comm, int server_rank, double reply_timeout_seconds = 60.0);
  ~RemoteStore() override;  // says bye
  using Store::dequeue;
  using Store::enqueue;
  using Store::query_attempts;

  std::vector<store::Rollout> enqueue(std::vector<store::NewRollout> rollouts) override;
  std::vector<store::AttemptedRollout> dequeue(const std::string& worker_id, std::size_t max_count) override;
  store::AttemptedRollout start_rollout(store::NewRollout rollout, const std::string& worker_id) override;
  store::AttemptedRollout start_attempt(store::RolloutId rollout_id, const std::string& worker_id) override;
  std::vector<std::uint64_t> add_spans(std::vector<store::Span> spans) override;
  store::AttemptsEnded end_attempts(std::vector<store::Span> spans,
                                    const std::vector<store::AttemptReport>& ends) override;
  std::uint64_t add_span(store::Span span) override;
  std::uint64_t next_sequence_id(store::RolloutId rollout_id) override;
  store::Attempt update_attempt(store::RolloutId rollout_id, store::AttemptId attempt_id,
                                const store::AttemptUpdate& update) override;
  std::vector<store::ReportOutcome> update_attempts(const std::vector<store::AttemptReport>& reports) override;
  store::Rollout update_rollout(store::RolloutId rollout_id, const store::RolloutUpdate& update) override;
  store::Page<store::Rollout> query_rollouts(const store::RolloutFilter& filter, store::Paging paging) override;
  store::Page<store::Attempt> query_attempts(const store::AttemptFilter& filter, store::Paging paging) override;
  store::Attempt get_latest_attempt(store::RolloutId rollout_id) override;
  store::Page<store::Span> query_spans(const store::SpanFilter& filter, store::Paging paging) override;
  store::ResourcesVersion add_resources(const std::string& name, std::string content) override;
  store::ResourcesVersion update_resources(const std::string& name, std::string content) override;
  store::ResourcesVersion get_resources(store::ResourcesId id) override;
  std::vector<store::ResourcesVersion> get_resources(const std::vector<store::ResourcesId>& ids) override;
  std::vector<store::ResourcesVersion> list_resources() override;
  store::ResourcesVersion get_latest_resources(const std::string& name) override;
  std::vector<store::Rollout> wait_for_rollouts(const std::vector<store::RolloutId>& ids,
                                                double timeout_seconds) override;
  store::Worker heartbeat(const std::string& worker_id) override;
  std::vector<store::Worker> query_workers() override;
  store::Statistics statistics() override;

  // Tests only: the server starts over with a fresh store.
  void reset();
  // Sends raw bytes as a request and returns the raw reply (tests of malformed input). Bytes whose send timed out stay
  // MPI's: they must outlive the client.
  std::string exchange_raw(const std::string& request, double timeout_seconds);

 private:
  template <class Reply, class... Args>
  Reply call(wire::Type type, double extra_wait, const Args&... args);
  std::string exchange(const std::string& request, std::uint32_t request_id, double timeout_seconds);
  Error server_hangs(double timeout_seconds) const;

  MPI_Comm comm_;
  IdleBackoff backoff_{IdleBackoff::Awaiting::reply};
  int server_;
  double reply_timeout_;
  std::mutex mutex_;
  std::string request_;  // reused: most requests fit the capacity of the last
  std::uint32_t next_request_id_ = 1;
  bool stalled_ = false;  // a request rank 0 did not take in time is still MPI's to send (under mutex_)
};

}  // namespace arclight::comm
