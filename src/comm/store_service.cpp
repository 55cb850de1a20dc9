#include "arclight/comm/store_service.hpp"

#include <algorithm>

#include "arclight/core/log.hpp"

namespace arclight::comm {
using namespace arclight::store;
using Clock = std::chrono::steady_clock;

namespace {
Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// A wait's timeout as the local store reads it: NaN or negative 0 (clamped, NaN stays NaN, and a deadline of NaN lies
// in the past), at most a day.
double wait_seconds(double timeout) { return timeout >= 0 ? std::min(timeout, 86400.0) : 0.0; }
}  // namespace

// ---- server ------------------------------------------------------------------------------

namespace {
// Receives posted ahead, enough that every request finds one: one that finds none waits in MPI's
// unexpected queue and is copied once more. A RemoteStore has one request in flight, so a receive
// for each other rank, and no fewer than 16 for a rank that multiplexes many clients (bench/scale.cpp
// on 4 ranks, the count set by hand: 96 requests in flight from 3 ranks went 12 to 36% faster with 128
// posted than with 16; 24 in flight, 8 to 16% faster with 16 than with 4). Their pages come in only as
// requests land.
constexpr std::size_t fewest_posted_receives = 16, most_posted_receives = 256;
// Large requests are probed for on polls that found no other, and at least this often.
constexpr std::uint64_t large_request_check_every = 16;
}  // namespace

StoreServer::StoreServer(MPI_Comm comm, MemoryStore& store) : comm_(comm), store_(&store) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  said_bye_.assign(static_cast<std::size_t>(size), false);
  const std::size_t count =
      std::clamp(static_cast<std::size_t>(size - 1), fewest_posted_receives, most_posted_receives);
  posted_requests_.assign(count, MPI_REQUEST_NULL);
  posted_order_.assign(count, 0);
  arrived_.resize(count);
  arrived_status_.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    posted_buffers_.emplace_back(new char[posted_request_bytes]);
    post(i);
  }
}

void StoreServer::post(std::size_t receive) {
  MPI_Irecv(posted_buffers_[receive].get(), static_cast<int>(posted_request_bytes), MPI_BYTE, MPI_ANY_SOURCE,
            tag_store_request, comm_, &posted_requests_[receive]);
  posted_order_[receive] = posts_++;
}

namespace {
// Waits for each request until `deadline`, then lets go of it and leaves its buffer to MPI, which may still use it.
template <class Buffer>
void finish_or_abandon(std::vector<MPI_Request>& requests, std::vector<Buffer>& buffers, Clock::time_point deadline) {
  for (std::size_t i = 0; i < requests.size(); ++i) {
    for (int done = 0; !done && requests[i] != MPI_REQUEST_NULL;) {
      MPI_Test(&requests[i], &done, MPI_STATUS_IGNORE);
      if (!done && Clock::now() >= deadline) {
        MPI_Request_free(&requests[i]);
        (void)buffers[i].release();
      }
    }
  }
}
}  // namespace

StoreServer::~StoreServer() {
  // A receive already matched to a request from a rank that froze mid-send cannot be cancelled, and waiting for it
  // would hold the end of the job: waited for a while, then let go of, its buffer left to it.
  for (MPI_Request& r : posted_requests_)
    if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
  const auto deadline = after(2.0);
  finish_or_abandon(posted_requests_, posted_buffers_, deadline);
  for (LargeReceive& r : large_) {
    MPI_Request_free(&r.request);
    (void)r.bytes.release();
  }
  // Replies still in flight go to ranks that are exiting: the same, their buffers left to MPI, which may still read
  // them (a freed buffer under a rendezvous send sent garbage, or crashed).
  finish_or_abandon(send_requests_, send_buffers_, deadline);
}

void StoreServer::reply(int source, std::string message) {
  // On the heap: the vectors move their elements, and a short string's bytes live inside it.
  send_buffers_.push_back(std::make_unique<std::string>(std::move(message)));
  send_requests_.emplace_back();
  const std::string& m = *send_buffers_.back();
  MPI_Isend(m.data(), static_cast<int>(m.size()), MPI_BYTE, source, tag_store_reply, comm_, &send_requests_.back());
}

void StoreServer::complete_sends() {
  // One MPI_Testsome over all of them: an MPI_Test each would run the progress engine once per send.
  int done = 0;
  completed_.resize(send_requests_.size());
  MPI_Testsome(static_cast<int>(send_requests_.size()), send_requests_.data(), &done, completed_.data(),
               MPI_STATUSES_IGNORE);
  if (done == MPI_UNDEFINED || done == 0) return;
  for (std::size_t i = 0; i < send_requests_.size();) {  // completed ones are MPI_REQUEST_NULL now
    if (send_requests_[i] == MPI_REQUEST_NULL) {
      send_requests_[i] = send_requests_.back();
      send_requests_.pop_back();
      send_buffers_[i] = std::move(send_buffers_.back());
      send_buffers_.pop_back();
    } else {
      ++i;
    }
  }
}

bool StoreServer::try_park(int source, std::string_view message) {
  wire::Header h = wire::decode_header(message);
  if (h.type != wire::Type::wait_for_rollouts || h.reply) return false;
  ByteReader in(wire::body_of(message));
  ParkedWait wait;
  wait.source = source;
  wait.request_id = h.request_id;
  wire::get(in, wait.ids);
  double timeout = in.f64();
  in.expect_end();
  store_->wait_for_rollouts(wait.ids, 0.0);  // unknown ids are refused now, not at the deadline
  wait.deadline = after(wait_seconds(timeout));
  parked_.push_back(std::move(wait));
  return true;
}

void StoreServer::handle(int source, std::string_view message) {
  ++served_;
  std::uint32_t request_id = 0;
  try {
    wire::Header h = wire::decode_header(message);
    request_id = h.request_id;
    if (h.type == wire::Type::bye) {  // a rank counted once: a second client's bye must not end the serving early
      if (!said_bye_[static_cast<std::size_t>(source)]) ++clients_done_;
      said_bye_[static_cast<std::size_t>(source)] = true;
      return;
    }
    if (h.type == wire::Type::reset && !h.reply) {
      if (!fresh_store_) throw DecodeError("reset is for tests; this server does not allow it");
      store_ = &fresh_store_();
      parked_.clear();
      reply(source, wire::encode(wire::Type::reset, true, h.request_id));
      return;
    }
    if (try_park(source, message)) return;
  } catch (const StoreError& e) {
    reply(source, wire::encode_error(request_id, e.code(), e.what()));
    return;
  } catch (const DecodeError& e) {
    ++malformed_;
    reply(source, wire::encode_error(request_id, wire::malformed, std::string("malformed request: ") + e.what()));
    return;
  }
  std::optional<std::string> answer = wire::handle_request(*store_, message);
  if (answer) reply(source, std::move(*answer));
}

void StoreServer::answer_parked_waits() {
  if (parked_.empty()) return;
  const auto now = Clock::now();
  // A wait is looked at again only once another rollout has ended (or at its deadline): each look reads the rollouts
  // let go of back from the checkpoint's history, and this runs up to a thousand times a second.
  const store::Statistics stats = store_->statistics();
  std::uint64_t ended_rollouts = 0;
  for (int s = 0; s < store::rollout_status_count; ++s)
    if (store::is_final(static_cast<store::RolloutStatus>(s))) ended_rollouts += stats.rollouts[s];
  for (std::size_t i = 0; i < parked_.size();) {
    ParkedWait& w = parked_[i];
    if (w.ended_seen == ended_rollouts && now < w.deadline) {
      ++i;
      continue;
    }
    w.ended_seen = ended_rollouts;
    std::string answer;
    try {  // a rollout's record read back from the archive may fail: that wait's answer, not rank 0's end
      std::size_t lost = 0;  // left out: they never end
      std::vector<Rollout> ended = store_->wait_for_rollouts(w.ids, 0.0, lost);
      if (ended.size() + lost == w.ids.size() || now >= w.deadline)
        answer = wire::encode(wire::Type::wait_for_rollouts, true, w.request_id, ended);
    } catch (const StoreError& e) {
      answer = wire::encode_error(w.request_id, e.code(), e.what());
    }
    if (!answer.empty()) {
      reply(w.source, std::move(answer));
      parked_[i] = std::move(parked_.back());
      parked_.pop_back();
    } else {
      ++i;
    }
  }
}

void StoreServer::hold() { holding_ = true; }

void StoreServer::release() {
  holding_ = false;
  if (!held_.empty()) log::debug("the ", held_.size(), " store requests held meanwhile are answered now");
  for (HeldRequest& r : held_) handle(r.source, r.message);
  held_.clear();
}

void StoreServer::keep_held_waiting() {
  const auto now = Clock::now();
  for (HeldRequest& r : held_) {
    if (now - r.pending_sent < std::chrono::seconds(1)) continue;
    wire::Header h;
    try {
      h = wire::decode_header(r.message);
    } catch (const DecodeError&) {
      continue;  // answered as malformed on release
    }
    if (h.type == wire::Type::bye) continue;  // never answered
    reply(r.source, wire::encode(wire::Type::pending, true, h.request_id));
    r.pending_sent = now;
  }
}

void StoreServer::take(int source, std::string_view message) {
  if (holding_)
    held_.push_back({source, std::string(message), Clock::time_point{}});
  else
    handle(source, message);
}

// Takes the `done` requests that arrived in the receives arrived_[0..done) (statuses alike), in the order MPI matched
// them (the order posted), which is the order they came, and posts each receive again.
std::size_t StoreServer::take_posted(std::size_t done) {
  std::vector<std::pair<std::uint64_t, std::size_t>>& order = arrival_order_;
  order.clear();
  for (std::size_t k = 0; k < done; ++k) order.emplace_back(posted_order_[static_cast<std::size_t>(arrived_[k])], k);
  if (done > 1) std::sort(order.begin(), order.end());
  std::size_t next = 0;
  // Posted again also when handling throws (the requests not reached yet are lost then): a receive left completed
  // would never take a request again.
  struct PostAgain {
    StoreServer& server;
    std::size_t& next;
    ~PostAgain() {
      for (; next < server.arrival_order_.size(); ++next)
        server.post(static_cast<std::size_t>(server.arrived_[server.arrival_order_[next].second]));
    }
  } post_again{*this, next};
  for (; next < order.size(); ++next) {
    const std::size_t k = order[next].second, receive = static_cast<std::size_t>(arrived_[k]);
    int count = 0;
    MPI_Get_count(&arrived_status_[k], MPI_BYTE, &count);
    take(arrived_status_[k].MPI_SOURCE,
         std::string_view(posted_buffers_[receive].get(), static_cast<std::size_t>(count)));
    post(receive);
  }
  return done;
}

// Large requests: each matched by its probe gets its own buffer and a non-blocking receive, taken once complete (a
// blocking receive would hold rank 0 for as long as a sender that froze mid-send stays frozen).
std::size_t StoreServer::take_large_requests() {
  for (;;) {
    int flag = 0;
    MPI_Message message;
    MPI_Status status;
    MPI_Improbe(MPI_ANY_SOURCE, tag_store_large_request, comm_, &flag, &message, &status);
    if (!flag) break;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    LargeReceive& r = large_.emplace_back();
    r.source = status.MPI_SOURCE;
    r.bytes = std::make_unique<std::string>(static_cast<std::size_t>(count), '\0');
    MPI_Imrecv(r.bytes->data(), count, MPI_BYTE, &message, &r.request);
  }
  std::size_t taken = 0;
  for (std::size_t i = 0; i < large_.size();) {
    int done = 0;
    MPI_Test(&large_[i].request, &done, MPI_STATUS_IGNORE);
    if (!done) {
      ++i;
      continue;
    }
    LargeReceive arrived = std::move(large_[i]);
    large_.erase(large_.begin() + static_cast<std::ptrdiff_t>(i));  // in the order they came
    take(arrived.source, *arrived.bytes);
    ++taken;
  }
  return taken;
}

std::size_t StoreServer::poll() {
  std::size_t handled = 0;
  // Bounded: requests that keep coming must not keep the caller (the algorithm, parked waits, sends) from its turn.
  while (handled < 4 * posted_requests_.size()) {
    // First the receive MPI matches next, with MPI_Test: it runs the progress engine and looks again (Open MPI's
    // MPI_Testsome does not look again: a request would wait for the next poll, a fifth of the throughput).
    const std::size_t next =
        static_cast<std::size_t>(std::min_element(posted_order_.begin(), posted_order_.end()) - posted_order_.begin());
    int arrived = 0;
    MPI_Test(&posted_requests_[next], &arrived, &arrived_status_[0]);
    if (arrived) {
      arrived_[0] = static_cast<int>(next);
      handled += take_posted(1);
      continue;
    }
    // Then the others: they complete behind it while its request is still arriving (a large one from a rank that
    // froze mid-send), and must not wait for it.
    int done = 0;
    MPI_Testsome(static_cast<int>(posted_requests_.size()), posted_requests_.data(), &done, arrived_.data(),
                 arrived_status_.data());
    if (done == MPI_UNDEFINED || done == 0) break;
    handled += take_posted(static_cast<std::size_t>(done));
  }
  if (handled == 0 || ++polls_ % large_request_check_every == 0) handled += take_large_requests();
  if (holding_) keep_held_waiting();
  if (!parked_.empty() && !holding_) answer_parked_waits();
  if (!send_requests_.empty()) complete_sends();
  return handled;
}

void StoreServer::serve_until_all_done(const std::function<bool()>& stop) {
  int size = 0;
  MPI_Comm_size(comm_, &size);
  while (clients_done_ < size - 1 && !stop()) {
    if (poll() > 0)
      backoff_.reset();
    else
      backoff_.idle();
  }
}

std::vector<int> StoreServer::clients_not_done() const {
  int me = 0;
  MPI_Comm_rank(comm_, &me);
  std::vector<int> ranks;
  for (int r = 0; r < static_cast<int>(said_bye_.size()); ++r)
    if (r != me && !said_bye_[static_cast<std::size_t>(r)]) ranks.push_back(r);
  return ranks;
}

// ---- client ------------------------------------------------------------------------------

RemoteStore::RemoteStore(MPI_Comm comm, int server_rank, double reply_timeout_seconds)
    : comm_(comm), server_(server_rank), reply_timeout_(reply_timeout_seconds) {}

RemoteStore::~RemoteStore() {
  if (stalled_) return;  // a send rank 0 never took: it would not take this one either
  std::string bye = wire::encode(wire::Type::bye, false, 0);
  MPI_Send(bye.data(), static_cast<int>(bye.size()), MPI_BYTE, server_, tag_store_request, comm_);
}

Error RemoteStore::server_hangs(double timeout_seconds) const {
  return Error(log::concat("the store on rank ", server_, " did not reply within ", timeout_seconds,
                           " s (comm.store_timeout_seconds): rank ", server_,
                           " hangs (stopped, or its node frozen) or cannot keep up; ending the job, to be requeued "
                           "(it resumes from its last checkpoint)"),
               exit_requeue);
}

std::string RemoteStore::exchange(const std::string& request, std::uint32_t request_id, double timeout_seconds) {
  if (stalled_) throw server_hangs(timeout_seconds);
  // The send is bounded too: one above MPI's eager limit (an attempt's spans) waits for rank 0 to take it.
  MPI_Request send;
  MPI_Isend(request.data(), static_cast<int>(request.size()), MPI_BYTE, server_,
            StoreServer::request_tag(request.size()), comm_, &send);
  auto deadline = after(timeout_seconds);
  backoff_.reset();
  for (int sent = 0;;) {
    MPI_Test(&send, &sent, MPI_STATUS_IGNORE);
    if (sent) break;
    if (Clock::now() > deadline) {
      // The request's bytes stay MPI's until rank 0 takes them, if ever, past this client's life: given up to it
      // (leaked, on purpose: a send is never taken back; moved, its buffer stays where it is), and this client sends
      // nothing more (the job ends).
      if (&request == &request_) static_cast<void>(new std::string(std::move(request_)));
      stalled_ = true;
      throw server_hangs(timeout_seconds);
    }
    backoff_.idle();
  }
  backoff_.reset();
  std::string reply;
  for (;;) {
    if (try_receive(comm_, server_, tag_store_reply, reply)) {
      wire::Header h = wire::decode_header(reply);
      // A reply to a request given up earlier (it timed out: an HTTP thread's call answered 500 and the runner went
      // on) comes late, ahead of this one's: passed over. Ids wrap around; a reply from later is the server's fault.
      if (static_cast<std::int32_t>(request_id - h.request_id) > 0) continue;
      if (h.request_id != request_id)
        throw Error(log::concat("store reply for request ", h.request_id, " while waiting for ", request_id));
      if (h.type != wire::Type::pending) return reply;
      deadline = after(timeout_seconds);  // held while rank 0 restores: alive, so wait anew
      continue;
    }
    // Rank 0 hangs (stopped, its node frozen) or cannot keep up: the job is requeued, as when a rank's pulses stop
    // (with the defaults this comes first: comm.store_timeout_seconds 60, run.hung_rank_seconds 120).
    if (Clock::now() > deadline) throw server_hangs(timeout_seconds);
    backoff_.idle();
  }
}

template <class Reply, class... Args>
Reply RemoteStore::call(wire::Type type, double extra_wait, const Args&... args) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::uint32_t id = next_request_id_++;
  wire::encode_into(request_, type, false, id, args...);
  std::string reply = exchange(request_, id, reply_timeout_ + extra_wait);
  wire::Header h = wire::decode_header(reply);
  ByteReader in(wire::body_of(reply));
  if (h.type == wire::Type::error) {
    std::uint32_t code = in.u32();
    std::string message(in.bytes());
    if (code == StoreError::not_found || code == StoreError::invalid_transition || code == StoreError::invalid_argument)
      throw StoreError(static_cast<StoreError::Code>(code), message);
    throw Error("store: " + message);
  }
  if (h.type != type || !h.reply) throw DecodeError("store reply of the wrong type");
  Reply out{};
  if constexpr (!std::is_same_v<Reply, std::monostate>) wire::get(in, out);
  in.expect_end();
  return out;
}

std::vector<Rollout> RemoteStore::enqueue(std::vector<NewRollout> rollouts) {
  return call<std::vector<Rollout>>(wire::Type::enqueue, 0, rollouts);
}
std::vector<AttemptedRollout> RemoteStore::dequeue(const std::string& worker_id, std::size_t max_count) {
  auto count = static_cast<std::uint32_t>(std::min<std::size_t>(max_count, UINT32_MAX));
  return call<std::vector<AttemptedRollout>>(wire::Type::dequeue, 0, worker_id, count);
}
AttemptedRollout RemoteStore::start_rollout(NewRollout rollout, const std::string& worker_id) {
  return call<AttemptedRollout>(wire::Type::start_rollout, 0, rollout, worker_id);
}
AttemptedRollout RemoteStore::start_attempt(RolloutId rollout_id, const std::string& worker_id) {
  return call<AttemptedRollout>(wire::Type::start_attempt, 0, rollout_id, worker_id);
}
std::vector<std::uint64_t> RemoteStore::add_spans(std::vector<Span> spans) {
  return call<std::vector<std::uint64_t>>(wire::Type::add_spans, 0, spans);
}
AttemptsEnded RemoteStore::end_attempts(std::vector<Span> spans, const std::vector<AttemptReport>& ends) {
  return call<AttemptsEnded>(wire::Type::end_attempts, 0, spans, ends);
}
std::uint64_t RemoteStore::add_span(Span span) { return call<std::uint64_t>(wire::Type::add_span, 0, span); }
std::uint64_t RemoteStore::next_sequence_id(RolloutId rollout_id) {
  return call<std::uint64_t>(wire::Type::next_sequence_id, 0, rollout_id);
}
Attempt RemoteStore::update_attempt(RolloutId rollout_id, AttemptId attempt_id, const AttemptUpdate& update) {
  return call<Attempt>(wire::Type::update_attempt, 0, rollout_id, attempt_id, update);
}
std::vector<ReportOutcome> RemoteStore::update_attempts(const std::vector<AttemptReport>& reports) {
  return call<std::vector<ReportOutcome>>(wire::Type::update_attempts, 0, reports);
}
Rollout RemoteStore::update_rollout(RolloutId rollout_id, const RolloutUpdate& update) {
  return call<Rollout>(wire::Type::update_rollout, 0, rollout_id, update);
}
Page<Rollout> RemoteStore::query_rollouts(const RolloutFilter& filter, Paging paging) {
  return call<Page<Rollout>>(wire::Type::query_rollouts, 0, filter, paging);
}
Page<Attempt> RemoteStore::query_attempts(const AttemptFilter& filter, Paging paging) {
  return call<Page<Attempt>>(wire::Type::query_attempts, 0, filter, paging);
}
Attempt RemoteStore::get_latest_attempt(RolloutId rollout_id) {
  return call<Attempt>(wire::Type::get_latest_attempt, 0, rollout_id);
}
Page<Span> RemoteStore::query_spans(const SpanFilter& filter, Paging paging) {
  return call<Page<Span>>(wire::Type::query_spans, 0, filter, paging);
}
ResourcesVersion RemoteStore::add_resources(const std::string& name, std::string content) {
  return call<ResourcesVersion>(wire::Type::add_resources, 0, name, content);
}
ResourcesVersion RemoteStore::update_resources(const std::string& name, std::string content) {
  return call<ResourcesVersion>(wire::Type::update_resources, 0, name, content);
}
ResourcesVersion RemoteStore::get_resources(ResourcesId id) {
  return call<ResourcesVersion>(wire::Type::get_resources, 0, id);
}
std::vector<ResourcesVersion> RemoteStore::get_resources(const std::vector<ResourcesId>& ids) {
  return call<std::vector<ResourcesVersion>>(wire::Type::get_many_resources, 0, ids);
}
std::vector<ResourcesVersion> RemoteStore::list_resources() {
  return call<std::vector<ResourcesVersion>>(wire::Type::list_resources, 0);
}
ResourcesVersion RemoteStore::get_latest_resources(const std::string& name) {
  return call<ResourcesVersion>(wire::Type::get_latest_resources, 0, name);
}
std::vector<Rollout> RemoteStore::wait_for_rollouts(const std::vector<RolloutId>& ids, double timeout_seconds) {
  timeout_seconds = wait_seconds(timeout_seconds);
  return call<std::vector<Rollout>>(wire::Type::wait_for_rollouts, timeout_seconds, ids, timeout_seconds);
}
Worker RemoteStore::heartbeat(const std::string& worker_id) {
  return call<Worker>(wire::Type::heartbeat, 0, worker_id);
}
std::vector<Worker> RemoteStore::query_workers() { return call<std::vector<Worker>>(wire::Type::query_workers, 0); }
Statistics RemoteStore::statistics() { return call<Statistics>(wire::Type::statistics, 0); }
void RemoteStore::reset() { call<std::monostate>(wire::Type::reset, 0); }

std::string RemoteStore::exchange_raw(const std::string& request, double timeout_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::uint32_t id = 0;
  try {
    id = wire::decode_header(request).request_id;
  } catch (const DecodeError&) {
    // garbage: the server answers it with request id 0
  }
  return exchange(request, id, timeout_seconds);
}

}  // namespace arclight::comm
