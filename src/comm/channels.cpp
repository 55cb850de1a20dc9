#include "arclight/comm/channels.hpp"

namespace arclight::comm {

Channels open_channels(const Layout& layout, int rank) {
  Channels ch;
  ch.control = Communicator::duplicate(MPI_COMM_WORLD);
  ch.work = Communicator::duplicate(MPI_COMM_WORLD);
  const RankRole& role = layout.roles[rank];
  ch.trainers = Communicator::split(MPI_COMM_WORLD, role.trainer ? 1 : MPI_UNDEFINED, rank);
  // Colocated ranks hand weights over in memory; the leader has the lowest rank, so it is the sync root.
  const bool colocated = role.runner && role.trainer;
  const bool in_sync = !colocated && (role.runner || rank == layout.trainer_leader());
  ch.sync = Communicator::split(MPI_COMM_WORLD, in_sync ? 1 : MPI_UNDEFINED, rank);
  ch.checkpoint = Communicator::split(MPI_COMM_WORLD, rank == 0 || role.trainer ? 1 : MPI_UNDEFINED, rank);
  return ch;
}

}  // namespace arclight::comm
