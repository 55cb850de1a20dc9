#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// The configuration of a run, as plain structs. The app binds every field to a
// TOML key and a command-line flag of the same name (section.key).
namespace arclight {

// Modes are enums from the moment the configuration is read; their names are what files and
// flags say.
enum class Progress { automatic, bar, lines };
enum class LayoutMode { split, colocated };
enum class Positions { rotary, learned };
enum class Advantage { per_step, trajectory };
enum class SampleUnit { trajectory, transition };
enum class Compression { none, bf16, fp16 };
enum class ModelSource { scratch, hf };
enum class ComputeType { float32, bfloat16, float16 };

template <class Mode>
struct ModeName {
  Mode mode;
  const char* name;
};
// Every mode's name, found by overload on the mode's type (mode_names(Mode{})).
inline constexpr ModeName<Progress> progress_names[] = {
    {Progress::automatic, "auto"}, {Progress::bar, "bar"}, {Progress::lines, "lines"}};
inline constexpr ModeName<LayoutMode> layout_mode_names[] = {{LayoutMode::split, "split"},
                                                             {LayoutMode::colocated, "colocated"}};
inline constexpr ModeName<Positions> positions_names[] = {{Positions::rotary, "rotary"},
                                                          {Positions::learned, "learned"}};
inline constexpr ModeName<Advantage> advantage_names[] = {{Advantage::per_step, "per_step"},
                                                          {Advantage::trajectory, "trajectory"}};
inline constexpr ModeName<SampleUnit> sample_unit_names[] = {{SampleUnit::trajectory, "trajectory"},
                                                             {SampleUnit::transition, "transition"}};
inline constexpr ModeName<Compression> compression_names[] = {
    {Compression::none, "none"}, {Compression::bf16, "bf16"}, {Compression::fp16, "fp16"}};
inline constexpr ModeName<ModelSource> model_source_names[] = {{ModelSource::scratch, "scratch"},
                                                               {ModelSource::hf, "hf"}};
inline constexpr ModeName<ComputeType> compute_type_names[] = {
    {ComputeType::float32, "float32"}, {ComputeType::bfloat16, "bfloat16"}, {ComputeType::float16, "float16"}};
constexpr const auto& mode_names(Progress) { return progress_names; }
constexpr const auto& mode_names(LayoutMode) { return layout_mode_names; }
constexpr const auto& mode_names(Positions) { return positions_names; }
constexpr const auto& mode_names(Advantage) { return advantage_names; }
constexpr const auto& mode_names(SampleUnit) { return sample_unit_names; }
constexpr const auto& mode_names(Compression) { return compression_names; }
constexpr const auto& mode_names(ModelSource) { return model_source_names; }
constexpr const auto& mode_names(ComputeType) { return compute_type_names; }

template <class Mode>
const char* name_of(Mode mode) {
  for (const auto& n : mode_names(Mode{}))
    if (n.mode == mode) return n.name;
  return "?";
}
template <class Mode>
std::optional<Mode> parse_mode(std::string_view name) {
  for (const auto& n : mode_names(Mode{}))
    if (name == n.name) return n.mode;
  return std::nullopt;
}

struct RunConfig {
  std::string dir = "runs/default";  // metrics, logs and checkpoints go here
  unsigned seed = 1;
  int steps = 100;
  Progress progress = Progress::automatic;  // auto: a bar when stderr is a terminal
  // A rank that sends no sign of life for this long (stopped, its node frozen), or a runner that takes no new
  // weights for this long, hangs: a runner is fenced and the job goes on without it; a trainer ends the job.
  double hung_rank_seconds = 120;
  // A run.dir or checkpoint.dir that another job holds is waited for this long before the job is refused: a job
  // requeued after its node failed can find the dead job's lock held on a parallel file system until the file
  // system lets go of that node.
  double lock_wait_seconds = 0;
};

// Which rank does what. Rank 0 is always the coordinator.
struct LayoutConfig {
  // split: each worker rank is a runner or a trainer.
  // colocated: every worker rank is both, alternating phases (small runs).
  LayoutMode mode = LayoutMode::split;
  // A count ("2") or a fraction of the worker ranks ("0.25").
  std::string trainers = "1";
  // A count, a fraction, or "rest" for every worker rank that is not a trainer.
  std::string runners = "rest";
};

// The store's default RolloutConfig: how long an attempt may take and stay silent, and retries.
struct RolloutDefaults {
  double timeout_seconds = 300;      // from an attempt's start; 0: no limit
  double unresponsive_seconds = 30;  // since its last heartbeat (a span batch); 0: no limit
  int max_attempts = 3;
  std::vector<std::string> retry_condition = {"failed", "timeout", "unresponsive"};
};

// How runners talk to the store.
struct RunnerConfig {
  int episodes_in_flight = 64;       // episodes a runner runs at once, batching their policy calls
  int span_batch = 64;               // spans per batch to the store
  double span_flush_seconds = 0.25;  // a batch waits at most this long; each batch is a heartbeat
  // The OpenAI-compatible endpoint of a runner rank with outside agents (agent.name = "external").
  std::string http_host = "127.0.0.1";        // loopback: only this node's processes reach it
  int http_port = 0;                          // 0: any free port (agents learn it from OPENAI_BASE_URL)
  std::size_t http_max_body_bytes = 4 << 20;  // a larger request body is answered 413
  double http_timeout_seconds = 30;           // a connection idle or half-sent this long is closed
  int decode_rows = 64;                       // sequences decoded together (continuous batching)
  // "qwen3" or "deepseek_r1" (vLLM's --reasoning-parser names; the latter ignores enable_thinking): chat answers give
  // a thinking template's <think> reasoning apart; "none"
  std::string reasoning_parser = "none";
};

// Rank 0's store over HTTP: Agent Lightning v0.3's LightningStore API (/v1/agl) and OTLP trace ingest, for runners
// that are not MPI ranks. It needs the job's secret.
struct StoreConfig {
  bool http = false;
  std::string http_host = "127.0.0.1";  // loopback unless said otherwise
  int http_port = 4747;                 // Agent Lightning's `agl store` default; 0: any free port
};

// The policy network. The vocabulary comes from the task.
// The policy: a transformer initialised here (scratch: the sizes below) or a Hugging Face model directory (hf: its
// config.json gives the sizes, and d_model .. d_ff and positions do not apply).
struct ModelConfig {
  ModelSource source = ModelSource::scratch;
  std::string path;                          // hf: the model directory
  ComputeType dtype = ComputeType::float32;  // the forward's type; parameters and optimizer state stay float32
  std::string chat_template;                 // hf: one of text::known_templates; empty: recognised from the directory
  // LoRA (hf): lora_rank > 0 freezes the model and trains low-rank adapters on the projections named in lora_targets
  // (q, k, v, o, gate, up, down), each adding (lora_alpha / lora_rank) * B A x.
  int lora_rank = 0;
  double lora_alpha = 16;
  std::vector<std::string> lora_targets{"q", "k", "v", "o"};
  // Training keeps each layer's input only and runs the layer again in its backward: a layer's activations exist one
  // layer at a time, for one more forward of the layers (transformers' gradient checkpointing).
  bool gradient_checkpointing = false;
  int d_model = 64;
  int n_layers = 2;
  int n_heads = 4;
  int d_ff = 256;
  int max_seq = 64;  // the longest sequence of the run (the KV cache's size), for both sources
  Positions positions = Positions::rotary;
};

// The task: which built-in agent, and its size.
struct AgentConfig {
  std::string name = "guess";
  int guess_max = 31;                   // guess: the secret is in 1..guess_max
  int max_turns = 8;                    // guess: turn limit
  int arith_digits = 3;                 // arith: digits per operand
  int max_policy_calls = 64;            // an episode making more calls is a fault
  double episode_timeout_seconds = 60;  // an episode running longer is a fault
  // external: the user's agent as processes on every runner rank, talking to the runner's OpenAI-compatible endpoint
  std::vector<std::string> command;  // argv; argv[0] looked up on PATH
  int workers = 1;                   // processes per runner rank
  std::string tasks;                 // a JSON Lines file: one task per line, drawn at random for training
  std::string validation_tasks;      // a JSON Lines file: the held-out tasks (none: no validation)
  // A from-scratch model's vocabulary for an agent that speaks token ids (0: the byte tokenizer's, so text works).
  int vocab_size = 0;
};

// GRPO and its optimizer.
struct GrpoConfig {
  int tasks_per_step = 64;
  int group_size = 8;                         // G rollouts per task
  Advantage advantage = Advantage::per_step;  // per_step: returns-to-go, normalized per step
  double gamma = 0.8;                         // per_step: discount of later rewards
  // One sample per trajectory (environment tokens masked) or per policy call (transition).
  SampleUnit samples = SampleUnit::trajectory;
  double clip_eps = 0.2;
  double clip_ratio_c = 3.0;  // dual clip: the loss bound of a token with a negative advantage, in |advantage|
  double kl_coef = 0.0;
  double entropy_coef = 0.0;
  double lr = 1e-3;
  double weight_decay = 0.0;
  double grad_clip = 1.0;
  int micro_batch = 256;  // sequences per forward/backward (gradient accumulation)
  // With it, a micro-batch also holds at most this many tokens, its rows times its longest (one sequence at least),
  // the samples sorted by length so that each pads little, shortest first so that the last (whose backward the
  // gradients' all-reduce overlaps) holds the longest; 0: micro_batch alone.
  int micro_batch_tokens = 0;
  int ppo_epochs = 1;        // optimizer steps on each batch (PPO-style reuse; the clip keeps them close)
  int max_staleness = 0;     // train on a rollout only while current - its version <= this
  double temperature = 1.0;  // training rollouts' of built-in agents, told to AGL agents; outside agents may choose
  int validate_every = 10;   // steps between validations; 0: never
  int train_blocks = 0;      // 0: the whole model trains; N: the last N blocks, final norm, lm_head
};

// How gradients travel among trainers.
struct CommConfig {
  double bucket_mb = 25;
  double first_bucket_mb = 1;
  Compression compression = Compression::none;
  // How long a rank waits for rank 0's answer to a store request before it ends the job. While rank 0 restores a
  // version, it says every second that the request is held, which starts the wait again.
  double store_timeout_seconds = 60;
};

// Versioned checkpoints for restart.
struct CheckpointConfig {
  std::string dir;           // empty: <run.dir>/checkpoints
  int every_steps = 50;      // 0: not by steps
  double every_minutes = 0;  // 0: not by time
  int keep = 3;              // newest versions kept; 0: all
  int full_every = 4;        // every K-th version is full; the others link to what did not change
  // "all": versions hold every span, and rank 0 lets go of those a committed version holds once
  // trained on (read back on a query); "none": spans are let go once trained on, and versions
  // hold only those not yet trained on.
  std::string span_log = "all";
  // How reads of versions take the tensors: "auto", straight from the disk (O_DIRECT) unless the page cache holds
  // more than half of them; "always"; "never" (through the page cache: a file system where direct reads are slow,
  // such as NFS).
  std::string direct_reads = "auto";
  // A version still being written this long after its write began when the job needs it done (the next version, the
  // end, a signal): the file system stalls, and the job ends, to be requeued (it waited for Slurm's time limit, and
  // ended TIMEOUT, never requeued). Counted from the write's start, after a signal too. 0: no limit.
  double write_timeout_seconds = 1800;
  // A resume still loading its version this long (rank 0's store, the trainers' shares) is a stalled file system as
  // well: the job ends, to be requeued (every rank's signs of life go on meanwhile, and the store's clients are told
  // to wait on: nothing else would end it). 0: no limit.
  double read_timeout_seconds = 1800;
};

// Deliberate faults, for tests and failure drills. Off by default.
struct FaultConfig {
  int fatal_rank = -1;                 // this rank raises a fatal error right after start-up
  int kill_in_checkpoint = 0;          // rank 0 kills itself (SIGKILL) while writing the version of this step; 0: never
  double slow_restore_seconds = 0;     // rank 0 takes this much longer to load the version it resumes from
  double slow_checkpoint_seconds = 0;  // rank 0's writer begins each version this much later (the steps go on)
  int hang_at_startup_rank = -1;       // this rank stops itself (SIGSTOP) at the start of start-up
  int store_unreadable_step = 0;       // rank 0 takes the store of this step's version as not reading back; 0: never
};

struct Config {
  RunConfig run;
  LayoutConfig layout;
  ModelConfig model;
  AgentConfig agent;
  GrpoConfig grpo;
  CommConfig comm;
  RolloutDefaults rollout;
  RunnerConfig runner;
  StoreConfig store;
  CheckpointConfig checkpoint;
  FaultConfig faults;
};

}  // namespace arclight
