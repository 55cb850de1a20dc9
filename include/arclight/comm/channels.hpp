#pragma once
// The communicators of a training job and every MPI tag used on them, in one place.
#include "arclight/comm/mpi_runtime.hpp"
#include "arclight/core/layout.hpp"

namespace arclight::comm {

// Tags, by communicator. A tag is unique across the job so that a stray message names its channel.
inline constexpr int tag_store_request = 101;    // control: a request to rank 0's store
inline constexpr int tag_store_reply = 102;      // control: its reply
inline constexpr int tag_work = 201;             // work: the coordinator's request to a trainer (work_protocol.hpp)
inline constexpr int tag_trainer_figures = 202;  // work: a trainer's figures after a training step
inline constexpr int tag_trainer_state = 203;    // work: a trainer's answer to save, restore or begin
// The sync communicator carries only broadcasts, the trainers' only all-reduces: no tags.

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
