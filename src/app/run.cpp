#include "arclight/app/run.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <cmath>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/ckpt/inspect.hpp"
#include "arclight/core/clock.hpp"
#include "arclight/store/memory_store.hpp"
#include "arclight/comm/gpu.hpp"
#include "arclight/comm/pulse.hpp"
#include "arclight/comm/reducer.hpp"
#include "arclight/comm/work_protocol.hpp"
#include "arclight/app/training.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/layout.hpp"
#include "arclight/core/placement.hpp"
#include "arclight/core/version.hpp"
#include "arclight/core/log.hpp"
#include "arclight/agent/agent.hpp"
#include "arclight/model/architecture.hpp"
#include "arclight/model/compute_threads.hpp"
#include "arclight/model/hf_export.hpp"
#include "arclight/model/hf_model.hpp"
#include "arclight/model/policy.hpp"
#include "arclight/text/chat_template.hpp"
#include "roles.hpp"
#include "serve_command.hpp"
#include "tokenize.hpp"
#include "weight_channel.hpp"

namespace arclight::app {
namespace {

// Runners and trainers compute on the GPU of their node-local rank where a CUDA LibTorch and GPUs are there; rank 0
// (the store and the algorithm's bookkeeping) stays on the CPU.
Placement place_this_rank(const comm::MpiRuntime& mpi, const RankRole& role) {
  Placement p;
  p.local_rank = local_rank_from_env([](const char* name) { return std::getenv(name); }).value_or(mpi.local_rank());
  p.local_size = mpi.local_size();
  const int gpus = comm::visible_gpu_count();
  if (gpus > 0 && !build_info().torch_cuda && mpi.rank() == 0)
    log::warn(gpus,
              " GPU(s) visible, but this binary's LibTorch is CPU-only: every rank computes on CPUs (build with "
              "ARCLIGHT_TORCH=python scripts/build.sh, README: On a Slurm cluster)");
  const bool computes = role.runner || role.trainer;
  p.device = computes && build_info().torch_cuda ? device_for_local_rank(p.local_rank, gpus) : -1;
  p.threads = threads_for_rank(mpi.node_cpus(), p.local_size);
  return p;
}

std::string hostname() {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  return name;
}

// NCCL's name of this host: NCCL_HOSTID where set (NCCL tells hosts apart by it), else the host name.
std::string nccl_host() {
  const char* id = std::getenv("NCCL_HOSTID");
  return id && *id ? id : hostname();
}

// Rank 0's table of every rank: role, host, local rank, device, threads, how a trainer all-reduces gradients, and how
// the weights go from the trainer leader to the runners (weights_over_nccl, decided by rank 0 and set in `mine` on
// every rank).
// runner.http_port fixed, and two runners with endpoints (outside agents) on one host: the second could not listen,
// a run-time failure (exit 1) that the Slurm script requeued again and again.
std::string fixed_port_problem(const Config& config, const Layout& layout, const std::vector<std::string>& hosts) {
  if (config.runner.http_port == 0 || !agent::runs_outside(config.agent.name)) return "";
  std::map<std::string, int> runner_on;
  for (int r = 0; r < static_cast<int>(hosts.size()); ++r) {
    if (!layout.roles[r].runner) continue;
    const auto [it, first] = runner_on.emplace(hosts[r], r);
    if (!first)
      return log::concat("runner.http_port = ", config.runner.http_port, " is one port, but runners ", it->second,
                         " and ", r, " share host ", hosts[r], ": runner.http_port = 0 gives each a free port");
  }
  return "";
}

std::string placement_table(const comm::MpiRuntime& mpi, const Layout& layout, Placement& mine) {
  const bool trainer = layout.roles[mpi.rank()].trainer;
  std::ostringstream row;
  row << hostname() << ' ' << mine.local_rank << ' '
      << (mine.device < 0 ? "cpu" : "cuda:" + std::to_string(mine.device)) << ' ' << mine.threads << ' '
      << (trainer ? gradient_transport(static_cast<int>(layout.trainers().size()), mine.device) : "-") << ' '
      << (mine.device < 0 ? "-" : comm::gpu_bus_id(mine.device)) << ' ' << nccl_host();
  std::vector<std::string> rows = mpi.gather(row.str(), 0);
  std::vector<std::string> hosts(rows.size());
  std::vector<std::string> gpus(rows.size());
  std::vector<std::array<std::string, 5>> shown(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r) {
    std::istringstream fields(rows[r]);
    for (std::string& field : shown[r]) fields >> field;
    fields >> gpus[r] >> std::ws;
    if (gpus[r] == "-") gpus[r].clear();
    std::getline(fields, hosts[r]);
  }
  int over_nccl = mpi.rank() == 0 && weights_over_nccl(layout, hosts, gpus, comm::nccl_available());
  MPI_Bcast(&over_nccl, 1, MPI_INT, 0, MPI_COMM_WORLD);
  // Said by every rank alike: whichever ends the job first, its message is rank 0's reason.
  std::string problem = mpi.rank() == 0 ? gradients_on_gpus_problem(layout, hosts, gpus, comm::nccl_available()) : "";
  int length = static_cast<int>(problem.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  problem.resize(static_cast<std::size_t>(length));
  MPI_Bcast(problem.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (!problem.empty()) throw UsageError(problem);
  mine.weights_over_nccl = over_nccl != 0;
  std::ostringstream table;
  table << "rank  role            host                  local  device   threads  gradients  weights\n";
  for (int r = 0; r < static_cast<int>(rows.size()); ++r) {
    const RankRole& role = layout.roles[r];
    const bool sends_or_takes =
        role.runner != role.trainer && (role.runner || r == layout.trainer_leader()) && !layout.runners().empty();
    const auto& [host, local, device, threads, gradients] = shown[r];
    char line[240];
    std::snprintf(line, sizeof line, "%-5d %-15s %-21s %-6s %-8s %-8s %-10s %s\n", r, role_name(role).c_str(),
                  host.c_str(), local.c_str(), device.c_str(), threads.c_str(), gradients.c_str(),
                  !sends_or_takes ? "-"
                  : over_nccl     ? "nccl"
                                  : "mpi");
    table << line;
  }
  return table.str();
}

int train(const comm::MpiRuntime& mpi, const Invocation& inv, const Layout& layout, comm::StartupWatch& startup) {
  if (mpi.rank() == inv.config.faults.hang_at_startup_rank) {
    log::warn("fault drill: rank ", mpi.rank(),
              " stops itself (SIGSTOP) during start-up (faults.hang_at_startup_rank)");
    std::raise(SIGSTOP);
  }
  Placement placement = place_this_rank(mpi, layout.roles[mpi.rank()]);
  std::string table = placement_table(mpi, layout, placement);
  if (inv.dry_run) {
    startup.end();  // the workers are done: rank 0's own work below is not a hang of theirs
    if (mpi.rank() == 0) {
      const auto agent = agent::make_agent(inv.config.agent);
      const model::Architecture model = model::architecture_of(inv.config.model, agent->vocab_size());
      const std::string chat = chat_template_of(inv.config.model);
      std::printf(
          "# effective configuration\n%s\n# model (%s, compute %s%s)\n%s\n# roles (%d ranks: %zu runner(s), %zu "
          "trainer(s), trainer leader rank %d)\n%s",
          inv.effective_config.c_str(),
          inv.config.model.source == ModelSource::hf ? inv.config.model.path.c_str() : "initialised here",
          name_of(inv.config.model.dtype), chat.empty() ? "" : (", chat template " + chat).c_str(),
          model::describe(model).c_str(), layout.world_size(), layout.runners().size(), layout.trainers().size(),
          layout.trainer_leader(), table.c_str());
      std::fflush(stdout);
    }
    return exit_ok;
  }
  comm::bind_device(placement.device);
  model::set_compute_threads(placement.threads);
  log::debug("role ", role_name(layout.roles[mpi.rank()]), ", device ", placement.device, ", ", placement.threads,
             " thread(s)");
  if (mpi.rank() == 0) log::progress("arclight: " + std::to_string(layout.world_size()) + " ranks\n" + table);

  if (mpi.rank() == inv.config.faults.fatal_rank)
    throw Error("fault drill: rank " + std::to_string(mpi.rank()) + " fails fatally (faults.fatal_rank)");

  mpi.first_failure(false);  // every rank reached the end of start-up
  return run_training(mpi, inv.config, layout, placement, inv.resume, inv.effective_config, startup);
}

// The store's ledger of trained rollouts (its "trained" resource versions, one per step),
// counted by task: two runs that trained on the same tasks equally often print the same.
// A checkpoint directory's newest valid version, or one version file: its path and contents.
std::pair<std::string, ckpt::Checkpoint> find_checkpoint(const std::string& where, ckpt::Contents contents,
                                                         const std::string& command) {
  std::error_code error;
  if (!std::filesystem::exists(where, error))
    throw UsageError(
        command + ": " + where +
        (error ? ": " + error.message() : " does not exist (give a checkpoint file or a run's checkpoint directory)"));
  if (!std::filesystem::is_directory(where)) return std::make_pair(where, ckpt::read_checkpoint(where, contents));
  auto found = ckpt::load_latest(where, {}, contents);
  if (!found) throw UsageError(command + ": no valid checkpoint in " + where);
  return std::move(*found);
}

int print_trained(const std::string& where) {
  const auto found = find_checkpoint(where, ckpt::Contents::no_tensor_data, "inspect");
  SystemClock clock;
  store::MemoryStore store(clock);
  const ckpt::Checkpoint& c = found.second;
  const store::MemoryStore::Imported imported =
      store.import_state(c.store_tables, c.store_history, c.span_log, c.store_history_lost_bytes);
  if (c.store_history_lost_bytes)
    log::warn(found.first, ": its store's history lost ", imported.lost_resources, " resource versions and ",
              imported.lost_rollouts, " rollouts with a damaged segment; the counts below leave them out");
  std::map<std::string, int> by_task;
  std::set<store::RolloutId> seen;
  int steps = 0, rollouts = 0, twice = 0;
  for (store::ResourcesId id = 1; id <= imported.resources; ++id) {
    store::ResourcesVersion v;
    try {
      v = store.get_resources(id);
    } catch (const store::StoreError&) {
      continue;  // lost
    }
    if (v.name != store::trained_resources) continue;
    ++steps;
    for (const store::RolloutId rollout : comm::work::decode_ledger_entry(v.content).rollouts) {
      if (!seen.insert(rollout).second) ++twice;
      store::RolloutFilter filter;
      filter.ids = {rollout};
      const store::Page<store::Rollout> known = store.query_rollouts(filter, {});
      ++by_task[known.items.empty() ? "(lost)" : known.items.front().input];
      ++rollouts;
    }
  }
  for (const auto& [task, count] : by_task) std::printf("%d %s\n", count, task.c_str());
  std::printf("%s: %d rollouts of %zu tasks trained on over %d steps; %d rollouts trained on twice\n",
              found.first.c_str(), rollouts, by_task.size(), steps, twice);
  return twice == 0 ? exit_ok : exit_failure;
}

// A LoRA run's adapters belong to the base it read: another of the same names and shapes would take them silently.
void check_same_base(const ckpt::Checkpoint& checkpoint, std::optional<std::uint32_t> base_crc32c,
                     const std::string& source) {
  if (checkpoint.base_crc32c && checkpoint.base_crc32c != base_crc32c)
    throw UsageError("export: " + source + " holds another base model than the run trained on (its tensors' " +
                     "CRC-32C differs from the one the run read): --model the base the run started from");
}

// The model a LoRA run's checkpoint adapts, with the adapters it holds loaded (merge_adapters folds them in).
model::Policy lora_policy(ModelConfig model, const std::string& source, const ckpt::Checkpoint& checkpoint) {
  model.path = source;
  model::Policy policy(model, 0, 0);
  // Tensor by tensor: another base whose adapters happened to hold as many floats would merge silently.
  const std::vector<std::string> names = policy.parameter_names();
  const std::vector<FloatBuffer> tensors = policy.parameter_buffers();
  if (names.size() != checkpoint.tensors.size())
    throw UsageError(log::concat("export: ", source, " takes ", names.size(), " LoRA tensors; the checkpoint holds ",
                                 checkpoint.tensors.size(), " (another base model than the run's?)"));
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] != checkpoint.tensors[i].name || tensors[i].size != checkpoint.tensors[i].size)
      throw UsageError(log::concat("export: the checkpoint's tensor ", checkpoint.tensors[i].name, " (",
                                   checkpoint.tensors[i].size, " floats) is not ", source, "'s ", names[i], " (",
                                   tensors[i].size, "): another base model than the run's?"));
  check_same_base(checkpoint, policy.base_crc32c(), source);
  policy.load_flat_parameters(checkpoint.parameters.data(), checkpoint.parameters.size());
  return policy;
}

// The directory an export takes its config and tokenizer files from (config.json, tokenizer files, chat template) is
// the model the run trained, as a resume checks. The run's own directory edited since is the user's change to make:
// said, and exported with it.
void check_export_source(const ckpt::Checkpoint& checkpoint, const std::string& trained_path,
                         const std::string& source) {
  if (checkpoint.model_definition.empty()) return;  // a version written before runs recorded it
  std::string files;
  for (const std::string& d :
       model::definition_differences(checkpoint.model_definition, model::definition_digest(source)))
    files += (files.empty() ? "" : ", ") + d;
  if (files.empty()) return;
  std::error_code ec1, ec2;
  if (!trained_path.empty() &&
      std::filesystem::weakly_canonical(trained_path, ec1) == std::filesystem::weakly_canonical(source, ec2) && !ec1 &&
      !ec2) {
    log::warn("export: ", source, ": ", files, " since the run's version was saved; exporting with them");
    return;
  }
  throw UsageError("export: " + source + " is not the model the run trained (" + files +
                   "): --model the directory it started from");
}

// A merge into 16-bit weights loses the adapters' updates under half a step of the type (small learning rates, weights
// far from zero): how many, so that a user exporting what trained can choose float32 or the adapters apart.
void report_merge_rounding(const model::MergeRounding& rounding, model::DType dtype) {
  if (rounding.changed == 0 || (dtype != model::DType::bf16 && dtype != model::DType::f16)) return;
  const std::uint64_t lost = dtype == model::DType::bf16 ? rounding.unchanged_in_bf16 : rounding.unchanged_in_f16;
  const double percent = std::round(1000.0 * static_cast<double>(lost) / static_cast<double>(rounding.changed)) / 10;
  const std::string line =
      log::concat("LoRA merged into ", model::dtype_name(dtype), " weights: ", lost, " of the ", rounding.changed,
                  " weights the adapters change (", percent, "%) round back to their base value, the update lost",
                  lost == 0 ? "" : " (--dtype float32, or --peft DIR for the adapters apart, keeps it)");
  if (percent >= 1)
    log::warn(line);
  else
    log::info(line);
}

// A run that named its chat template (model.chat_template) rendered prompts with it; the exported tokenizer files
// are the source's, so a server of the export renders with the source's template: said when the two differ.
void warn_of_another_template(const std::string& named, const std::string& model_dir) {
  if (named.empty()) return;
  std::string carried;
  try {
    carried = text::load_chat_template(model_dir).name;
  } catch (const std::exception&) {  // none, or one arclight does not know
  }
  if (carried == named) return;
  log::warn("export: the run rendered its chats with chat template \"", named, "\" (model.chat_template), but ",
            model_dir, "'s tokenizer files carry ",
            carried.empty() ? "none arclight recognises" : "\"" + carried + "\"",
            ": a server of this model renders chats differently unless it is given a ", named, " template");
}

// The model of a checkpoint as a Hugging Face directory, with the config and tokenizer of the model it started from.
int export_model(const comm::MpiRuntime& mpi, const Invocation& inv) {
  if (mpi.rank() != 0) return exit_ok;
  const ExportRequest& request = inv.export_request;
  const auto [path, checkpoint] = find_checkpoint(request.checkpoint, ckpt::Contents::model, "export");
  const Config saved = config_from_toml(checkpoint.config_toml);
  if (saved.model.source != ModelSource::hf)
    throw UsageError("export: " + path +
                     " is a run of a model initialised here (model.source = scratch), which has no Hugging Face "
                     "architecture; runs of model.source = hf export");
  const std::string source = request.source_dir.empty() ? saved.model.path : request.source_dir;
  if (request.source_dir.empty() && !std::filesystem::exists(std::filesystem::path(source) / "config.json"))
    throw UsageError("export: " + source + ", the model the run read (its model.path), holds no config.json now (a " +
                     "copy staged to a node's disk, gone with its job?): --model DIR names the model it started from");
  check_export_source(checkpoint, saved.model.path, source);
  std::vector<model::NamedWeights> weights;
  std::size_t offset = 0;
  for (const ckpt::TensorInfo& t : checkpoint.tensors) {
    weights.push_back({t.name, checkpoint.parameters.data() + offset, t.size});
    offset += t.size;
  }
  std::optional<model::Policy> merged;  // a LoRA run's base with its adapters folded in: the weights point into it
  model::MergeRounding rounding;
  const bool lora = saved.model.lora_rank > 0;
  if (!request.peft_dir.empty() && !lora)
    throw UsageError("export: " + path + " is not a LoRA run (model.lora_rank = 0): --peft has no adapters to write");
  if (lora && request.peft_dir.empty()) {
    if (!request.merge_lora)
      throw UsageError("export: " + path + " holds LoRA adapters only; --merge-lora writes them merged into " + source +
                       ", --peft DIR writes them as a PEFT adapter");
    merged.emplace(lora_policy(saved.model, source, checkpoint));
    weights.clear();
    for (const auto& [name, buffer] : merged->merge_adapters(&rounding))
      weights.push_back({name, buffer.data, buffer.size});
  }
  const std::string out = request.peft_dir.empty() ? request.hf_dir : request.peft_dir;
  model::ExportReport report;
  if (!request.peft_dir.empty()) {
    // Checked as a merge checks it, without building the model: the adapters apply to the base they trained on.
    if (checkpoint.base_crc32c)
      check_same_base(checkpoint,
                      model::base_weights_crc32c(model::HfWeights::open(source), model::read_hf_config(source)),
                      source);
    report = model::export_peft_adapter(source, model::lora_of(saved.model), weights, out);
  } else {
    model::ExportOptions options;
    options.max_shard_bytes = request.max_shard_bytes;
    options.dtype = request.dtype;
    report = model::export_hf(source, weights, out, options);
  }
  warn_of_another_template(saved.model.chat_template, request.peft_dir.empty() ? out : source);
  std::string files;
  for (const std::string& f : report.files) files += " " + f;
  std::printf("%s (step %lld) -> %s: %llu bytes of %s weights;%s\n", path.c_str(),
              static_cast<long long>(checkpoint.step), out.c_str(),
              static_cast<unsigned long long>(report.weight_bytes),
              std::string(model::dtype_name(report.dtype)).c_str(), files.c_str());
  if (merged) report_merge_rounding(rounding, report.dtype);
  return exit_ok;
}

int inspect(const comm::MpiRuntime& mpi, const Invocation& inv) {
  if (mpi.rank() != 0) return exit_ok;
  if (inv.inspect_trained) return print_trained(inv.inspect_dir);
  ckpt::DirectoryReport report = ckpt::inspect_directory(inv.inspect_dir);
  std::printf("%s\n", ckpt::describe(report).c_str());
  const bool some_valid =
      std::any_of(report.versions.begin(), report.versions.end(), [](const ckpt::VersionFile& v) { return v.valid; });
  return some_valid ? exit_ok : exit_failure;  // nothing to resume from: a script's check must see it
}

}  // namespace

std::string take_exit_code_file() {
  const char* path = std::getenv("ARCLIGHT_EXIT_CODE_FILE");
  std::string file = path && std::getenv("OMPI_COMM_WORLD_RANK") ? path : "";
  unsetenv("ARCLIGHT_EXIT_CODE_FILE");
  return file;
}

void report_exit_code(const std::string& file, int code) {
  if (file.empty()) return;
  std::fflush(nullptr);  // the last output first: the launcher ends mpirun soon after the file fills
  // No O_CREAT: only the launcher's own file (a rank 0 placed on another node than the script writes nothing there).
  const int fd = open(file.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return;  // the launcher then waits for mpirun's own end
  const std::string text = std::to_string(code) + "\n";
  [[maybe_unused]] const ssize_t written = write(fd, text.data(), text.size());
  close(fd);
}

int run(comm::MpiRuntime& mpi, int argc, const char* const* argv) {
  log::init(mpi.rank(), log::Level::info);
  Invocation inv = parse_command_line(argc, argv);
  log::init(mpi.rank(), inv.log_level);
  const std::string& direct = inv.config.checkpoint.direct_reads;
  ckpt::set_direct_reads(direct == "always"  ? ckpt::DirectReads::always
                         : direct == "never" ? ckpt::DirectReads::never
                                             : ckpt::DirectReads::automatic);
  // SIGTERM and SIGUSR1 ask training (and serve) to stop at a good point; for the other commands (tokenize, export,
  // inspect) there is none: they end as any program does (they ran on, deaf to kill, before).
  if (inv.command != Command::train && inv.command != Command::serve) {
    std::signal(SIGTERM, SIG_DFL);
    std::signal(SIGUSR1, SIG_DFL);
    if (stop_signal_received()) std::raise(SIGTERM);  // one that came during start-up ends it now
  }

  // A rank that hangs in start-up would hold the others in its collectives forever: pulses say which one.
  std::optional<comm::StartupWatch> startup;
  if (inv.command == Command::train)
    startup.emplace(inv.config.run.hung_rank_seconds, [&mpi](int rank, double silent) {
      log::error(hung_rank_message(log::concat("rank ", rank), static_cast<int>(silent),
                                   " during start-up, and every rank waits for it; ending the job, to be requeued"));
      mpi.abort(exit_requeue);
    });

  Layout layout;
  int error_exit = exit_usage;
  if (inv.error.empty() && inv.command == Command::train) {
    try {
      layout = make_layout(inv.config.layout, mpi.size());
      check_training_config(inv.config);
      if (mpi.rank() == 0 && !inv.dry_run) check_checkpoint_dir(inv.config);  // a dry run leaves no trace
    } catch (const std::exception& e) {  // UsageError, a file system's error: exit 2
      inv.error = e.what();
      // A stop signal in the wait for a directory: nothing wrong with the job, to be run again.
      if (const auto* error = dynamic_cast<const Error*>(&e); error && error->exit_code() == exit_requeue)
        error_exit = exit_requeue;
    }
  }
  // Every rank parsed the same input; agree, so that one rank reports and all exit alike.
  int first_bad = mpi.first_failure(!inv.error.empty());
  if (first_bad < 0 && inv.command == Command::train) {  // every rank here: the hosts gathered, then agreed on again
    const std::vector<std::string> hosts = mpi.gather(hostname(), 0);
    if (mpi.rank() == 0) inv.error = fixed_port_problem(inv.config, layout, hosts);
    first_bad = mpi.first_failure(!inv.error.empty());
  }
  if (first_bad >= 0) {
    if (mpi.rank() == first_bad) log::error(inv.error);
    return mpi.broadcast(error_exit, first_bad);
  }
  if (!inv.text.empty()) {
    if (mpi.rank() == 0) std::printf("%s%s", inv.text.c_str(), inv.text.back() == '\n' ? "" : "\n");
    return exit_ok;
  }

  try {
    switch (inv.command) {
      case Command::train: return train(mpi, inv, layout, *startup);
      case Command::inspect: return inspect(mpi, inv);
      case Command::export_model: return export_model(mpi, inv);
      case Command::tokenize: return mpi.rank() == 0 ? tokenize(inv) : exit_ok;
      case Command::serve: return mpi.rank() == 0 ? serve_model(inv) : exit_ok;
      case Command::none: return exit_ok;
    }
  } catch (...) {
    // Only rank 0 works in the other commands: it ends as any program does, MPI finalized, without Open MPI's
    // banner about a job killed (a user running `arclight export` read six lines of it under the one error).
    if (inv.command != Command::train) return report_failure(std::current_exception());
    end_job_now(std::current_exception());
  }
  return exit_ok;
}

}  // namespace arclight::app
