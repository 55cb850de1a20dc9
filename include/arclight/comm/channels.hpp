#pragma once
// The communicators of a training job and every MPI tag used on them, in one place.
#include "arclight/comm/mpi_runtime.hpp"
#include "arclight/core/layout.hpp"

namespace arclight::comm {

// Tags, by communicator. A tag is unique across the job so that a stray message names its channel.
// A request on tag_store_request must fit StoreServer::posted_request_bytes (the server's posted
// receives would be truncated, which ends the job): RemoteStore sends a larger one on the other tag.
inline constexpr int tag_store_request = 101;        // control: a request to rank 0's store (store_service.hpp)
inline constexpr int tag_store_large_request = 104;  // control: one larger than the server's posted receives
inline constexpr int tag_store_reply = 102;          // control: its reply
inline constexpr int tag_pulse = 103;                // control: a worker rank's sign of life to rank 0 (pulse.hpp)
inline constexpr int tag_work = 201;                 // work: the coordinator's request to a trainer (work_protocol.hpp)
inline constexpr int tag_trainer_figures = 202;      // work: a trainer's figures after a training step
inline constexpr int tag_trainer_state = 203;        // work: a trainer's answer to save, restore or begin
// sync: besides broadcasts of the weights, point to point (app/weight_channel.hpp):
inline constexpr int tag_weights = 301;          // a policy version from the trainer leader to one runner
inline constexpr int tag_weights_control = 302;  // the leader's note to a runner: point to point from now on, or fenced
inline constexpr int tag_weights_ack = 303;      // a runner's word that it loaded a broadcast version
// The trainers' communicator carries only all-reduces: no tags.

struct Channels {
  Communicator control;     // the store's requests and replies
  Communicator work;        // coordinator <-> trainers: batches and their figures
  Communicator trainers;    // gradients (trainers only)
  Communicator sync;        // weights: the trainer leader (its rank 0) and the runners, in split layouts
  Communicator checkpoint;  // rank 0 and the trainers: they write each version together
};

// Collective over MPI_COMM_WORLD: every rank calls it with the same layout.
Channels open_channels(const Layout& layout, int rank);

}  // namespace arclight::comm
