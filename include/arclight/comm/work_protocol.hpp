#pragma once
// What the coordinator and the trainers say to each other on the work communicator, and the
// texts the job keeps in the store's resources. A codec with no MPI in it: tests drive it directly.
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "arclight/core/bytes.hpp"

namespace arclight::comm::work {

// The coordinator's requests (tag_work). Save and begin are answered on tag_trainer_state:
// empty when done, else what went wrong; restore on tag_trainer_state too, by Restored; train
// on tag_trainer_figures.
enum class Kind : std::uint32_t { train = 1, stop = 2, save = 3, restore = 4, begin = 5 };

struct Train {
  double total_tokens = 0;  // the action tokens of the whole step, over every trainer's shard
  std::string samples;      // this trainer's shard, in algo's sample encoding (opaque here)
};
struct Stop {};
struct Save {  // copy this trainer's share of the state to host memory, then write it
  std::int64_t step = 0;
};
struct Restore {  // read the weights and optimizer state from this version file
  std::string path;
};
struct Begin {};  // training begins (fresh, or from the version restored): publish the weights

using Request = std::variant<Train, Stop, Save, Restore, Begin>;

std::string encode(const Request& request);
Request decode_request(std::string_view bytes);  // throws DecodeError

// A trainer's answer to restore (tag_trainer_state). The trainers read the version together
// (each its share) and agree on the outcome: every one answers alike.
struct Restored {
  // damaged: the version is to be skipped for the one before; unfit: it holds another model than the configured one
  // (bad input, exit 2); failed: the trainer could not restore it (its memory, its GPU: exit 1, the version is fine).
  enum class Outcome : std::uint8_t { done = 0, damaged = 1, failed = 2, unfit = 3 };
  Outcome outcome = Outcome::done;
  std::string why;                                 // what went wrong
  std::uint64_t bytes_read = 0;                    // from the version's files, by this trainer
  double read_seconds = 0, broadcast_seconds = 0;  // its share read, the shares broadcast
  double seconds = 0;                              // the whole restore, the model and optimizer loaded
};
std::string encode(const Restored& restored);
Restored decode_restored(std::string_view bytes);  // throws DecodeError

// A trainer's figures after a step. The loss terms are weighted by the trainer's share of
// the step's tokens, so they add up over trainers; the rest are the leader's.
struct TrainerFigures {
  double loss = 0, policy_loss = 0, kl = 0, entropy = 0, clip_fraction = 0, clip_fraction_lower = 0;
  double grad_norm = 0, action_tokens = 0;
  double train_seconds = 0, sync_seconds = 0;
};
inline constexpr std::size_t trainer_figures_bytes = 10 * sizeof(double);

std::string encode(const TrainerFigures& figures);
TrainerFigures decode_figures(std::string_view bytes);  // throws DecodeError

// The "policy" resource: each version of the trainers' weights ("version=N checksum=C").
struct PolicyResource {
  std::uint64_t version = 0;
  std::uint32_t checksum = 0;  // crc32c of the flat float weights
};
std::string encode(const PolicyResource& policy);
PolicyResource decode_policy_resource(std::string_view text);  // throws DecodeError

// The "trained" resource: the ledger of which rollouts each step trained on ("step=N rollouts=a,b,c").
struct LedgerEntry {
  std::int64_t step = 0;
  std::vector<std::uint64_t> rollouts;
};
std::string encode(const LedgerEntry& entry);
LedgerEntry decode_ledger_entry(std::string_view text);  // throws DecodeError

}  // namespace arclight::comm::work
