#include "arclight/comm/pulse.hpp"

#include <optional>

#include "arclight/comm/channels.hpp"
#include "arclight/comm/waiting.hpp"

namespace arclight::comm {

PulseSender::PulseSender(MPI_Comm comm, int to, double watch_seconds, std::function<void(double)> on_silent)
    : comm_(comm),
      to_(to),
      watch_seconds_(on_silent ? watch_seconds : 0),  // no one to tell: no watch
      on_silent_(std::move(on_silent)),
      thread_([this] { run(); }) {}

PulseSender::~PulseSender() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

// At most one pulse in flight: a rank 0 that takes none for a while is not flooded.
// The watch: `to` pulses this rank back on the same communicator (nobody else does), and time in
// which this rank did not run (itself stopped, and continued) is its own silence, not `to`'s.
void PulseSender::run() {
  MPI_Request pending = MPI_REQUEST_NULL;
  std::optional<PulseWatch> watch;
  if (watch_seconds_ > 0) watch.emplace(comm_);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    int sent = 1;
    if (pending != MPI_REQUEST_NULL) MPI_Test(&pending, &sent, MPI_STATUS_IGNORE);
    if (sent) MPI_Isend(nullptr, 0, MPI_BYTE, to_, tag_pulse, comm_, &pending);
    if (watch) {
      watch->take();
      const double silent = watch->silent_seconds(to_);
      if (silent >= watch_seconds_) on_silent_(silent);
    }
    wake_.wait_for(lock, pulse_interval, [this] { return stopping_; });
  }
  if (pending != MPI_REQUEST_NULL) MPI_Request_free(&pending);  // an empty message: nothing to keep alive
}

PulseWatch::PulseWatch(MPI_Comm comm) : comm_(comm), last_take_(Clock::now()) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  heard_.assign(static_cast<std::size_t>(size), last_take_);
}

void PulseWatch::take() {
  const auto now = Clock::now();
  const auto blind = now - last_take_ - pulse_interval;
  if (blind > Clock::duration::zero())
    for (auto& heard : heard_) heard += blind;  // rank 0 did not look: nobody's silence grows meanwhile
  last_take_ = now;
  int from = 0;
  while (try_receive(comm_, MPI_ANY_SOURCE, tag_pulse, buffer_, &from)) heard_[static_cast<std::size_t>(from)] = now;
}

// As of the last look: a watcher stopped right after take() (SIGSTOP, a frozen node) and continued
// long after has seen nothing of that time, and blames no one for it.
double PulseWatch::silent_seconds(int rank) const {
  return std::chrono::duration<double>(last_take_ - heard_[static_cast<std::size_t>(rank)]).count();
}

std::vector<int> PulseWatch::silent_for(double seconds) const {
  std::vector<int> silent;
  for (int r = 1; r < static_cast<int>(heard_.size()); ++r)
    if (silent_seconds(r) >= seconds) silent.push_back(r);
  return silent;
}

StartupWatch::StartupWatch(double hung_seconds, std::function<void(int, double)> on_hung)
    : hung_seconds_(hung_seconds), on_hung_(std::move(on_hung)) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int watcher_of_rank_0 = size - 1;
  if (rank == 0) {
    if (size > 1) sender_ = std::make_unique<PulseSender>(MPI_COMM_WORLD, watcher_of_rank_0);
    watcher_ = std::thread([this] { watch(); });
  } else if (rank == watcher_of_rank_0) {
    sender_ =
        std::make_unique<PulseSender>(MPI_COMM_WORLD, 0, hung_seconds_, [this](double silent) { on_hung_(0, silent); });
  } else {
    sender_ = std::make_unique<PulseSender>(MPI_COMM_WORLD, 0);
  }
}

StartupWatch::~StartupWatch() { end(); }

void StartupWatch::end() {
  sender_.reset();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ending_ = true;
  }
  wake_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

void StartupWatch::watch() {
  PulseWatch pulses(MPI_COMM_WORLD);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, pulse_interval, [this] { return ending_; })) {
    pulses.take();
    const std::vector<int> silent = pulses.silent_for(hung_seconds_);
    if (!silent.empty()) on_hung_(silent.front(), pulses.silent_seconds(silent.front()));
  }
  pulses.take();  // the pulses that came meanwhile; a few more may come before the workers' start-up ends
}

}  // namespace arclight::comm
