// export_hf: a trained model out as a Hugging Face directory that loads back with the same tensors (float32 exactly,
// bfloat16 and float16 rounded as torch rounds), sharded with an index past the shard size; weights that do not fit
// the source's config are refused before anything is written.
#include "arclight/model/hf_export.hpp"

#include <boost/test/unit_test.hpp>
#include <torch/types.h>

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "arclight/model/policy.hpp"
#include "tiny_hf_model.hpp"

using namespace arclight;
using namespace arclight::model;
namespace fs = std::filesystem;

namespace {

std::vector<float> awkward_floats() {
  std::vector<float> v{0.0f,
                       -0.0f,
                       1.0f,
                       -2.5f,
                       65504.0f,
                       65519.0f,
                       65520.0f,
                       1e-8f,
                       5.96e-8f,
                       2.98e-8f,
                       6.1e-5f,
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::denorm_min(),
                       std::numeric_limits<float>::max(),
                       1e30f};
  std::mt19937 rng(3);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    std::uint32_t b = bits(rng);
    float f;
    std::memcpy(&f, &b, 4);
    if (!std::isnan(f)) v.push_back(f);
  }
  std::normal_distribution<float> normal(0, 0.05f);
  for (int i = 0; i < 100000; ++i) v.push_back(normal(rng));
  return v;
}

ModelConfig hf_model(const std::string& dir) {
  ModelConfig c;
  c.source = ModelSource::hf;
  c.path = dir;
  c.max_seq = 32;
  return c;
}

std::vector<NamedWeights> named(const std::vector<std::string>& names, const std::vector<float>& flat,
                                const Policy& policy) {
  std::vector<NamedWeights> out;
  std::size_t offset = 0;
  const auto parameters = policy.parameters();
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto n = static_cast<std::size_t>(parameters[i].numel());
    out.push_back({names[i], flat.data() + offset, n});
    offset += n;
  }
  return out;
}

// A tiny Qwen3 with random weights (torch_dtype as given), loaded as a Policy.
std::string random_qwen3(const TempDir& dir, const std::string& torch_dtype) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0, 0.3f);
  std::string config = tiny_qwen3_config;
  config.insert(config.rfind('}'), R"(, "torch_dtype": ")" + torch_dtype + "\", \"eos_token_id\": 3");
  write_tiny_hf_model(dir, config, [&](std::size_t, std::size_t) { return normal(rng); });
  std::ofstream(dir.file("tokenizer.json")) << "{}";
  return dir.dir();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hf_export)

BOOST_AUTO_TEST_CASE(half_precision_rounds_as_torch_does) {
  const auto values = awkward_floats();
  const auto source = torch::from_blob(const_cast<float*>(values.data()), {static_cast<std::int64_t>(values.size())});
  const auto bf16 = source.to(torch::kBFloat16).contiguous(), f16 = source.to(torch::kHalf).contiguous();
  const auto* bf16_bits = reinterpret_cast<const std::uint16_t*>(bf16.data_ptr());
  const auto* f16_bits = reinterpret_cast<const std::uint16_t*>(f16.data_ptr());
  int bf16_wrong = 0, f16_wrong = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    bf16_wrong += to_bfloat16(values[i]) != bf16_bits[i];
    f16_wrong += to_float16(values[i]) != f16_bits[i];
    if (to_float16(values[i]) != f16_bits[i] && f16_wrong < 5)
      BOOST_TEST_MESSAGE(values[i] << ": float16 " << to_float16(values[i]) << " vs torch " << f16_bits[i]);
  }
  BOOST_TEST(bf16_wrong == 0);
  BOOST_TEST(f16_wrong == 0);
  BOOST_TEST(std::isnan(torch::tensor(std::nanf("")).to(torch::kBFloat16).item<float>()));
  BOOST_TEST((to_bfloat16(std::nanf("")) & 0x7FFF) > 0x7F80);
  BOOST_TEST((to_float16(std::nanf("")) & 0x7FFF) > 0x7C00);
}

BOOST_AUTO_TEST_CASE(an_export_loads_back_with_the_same_tensors) {
  for (const std::string dtype : {"float32", "bfloat16", "float16"}) {
    TempDir source, out;
    Policy trained(hf_model(random_qwen3(source, dtype)), 10, 1);
    const auto names = trained.parameter_names();
    const auto weights = trained.flat_parameters();
    const std::string exported = out.file("export");
    // Named with a trailing slash, as a shell completes it: the staging directory is still beside it, not inside.
    const ExportReport report = export_hf(source.dir(), named(names, weights, trained), exported + "/");
    BOOST_TEST(fs::exists(exported + "/tokenizer.json"));
    BOOST_TEST(!fs::exists(exported + "/generation_config.json"));  // none in the source: transformers derives it
    Policy loaded(hf_model(exported), 10, 1);
    BOOST_TEST(loaded.parameter_names() == names);
    const auto back = loaded.flat_parameters();
    const auto type = dtype == "float32" ? torch::kFloat : dtype == "bfloat16" ? torch::kBFloat16 : torch::kHalf;
    const auto expected = torch::tensor(weights).to(type).to(torch::kFloat);
    BOOST_TEST(torch::equal(torch::tensor(back), expected), dtype);
    BOOST_TEST(report.weight_bytes == weights.size() * (dtype == "float32" ? 4u : 2u));
  }
}

// A Gemma3ForConditionalGeneration's text model (its tensors under language_model.*, a vision tower's beside them)
// exports as what it is, a Gemma3ForCausalLM: text_config's keys with the end tokens and dtype beside them, and the
// text model's tensors, which load back the same.
BOOST_AUTO_TEST_CASE(a_multimodal_gemma3_exports_its_text_model) {
  TempDir source, out;
  std::ofstream(source.file("config.json")) << R"({"architectures": ["Gemma3ForConditionalGeneration"],
      "model_type": "gemma3", "eos_token_id": [1, 106], "torch_dtype": "float32", "text_config": {
      "model_type": "gemma3_text", "vocab_size": 128, "hidden_size": 8, "intermediate_size": 12,
      "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 6, "sliding_window": 3},
      "vision_config": {"model_type": "siglip_vision_model"}})";
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 0.3f);
  std::vector<std::vector<float>> values;
  std::vector<TensorToWrite> tensors;
  const auto expected = expected_tensors(read_hf_config(source.dir()));
  values.reserve(expected.size() + 1);
  for (const ExpectedTensor& t : expected) {
    std::size_t n = 1;
    for (const auto d : t.shape) n *= static_cast<std::size_t>(d);
    values.emplace_back(n);
    for (float& v : values.back()) v = normal(rng);
    tensors.push_back({"language_model." + t.name, DType::f32, t.shape, values.back().data(), n * sizeof(float)});
  }
  values.emplace_back(12, 1.0f);
  tensors.push_back({"vision_tower.vision_model.patch.weight", DType::f32, {3, 4}, values.back().data(), 48});
  write_safetensors(source.file("model.safetensors"), tensors);
  Policy trained(hf_model(source.dir()), 10, 1);
  const auto names = trained.parameter_names();
  const auto weights = trained.flat_parameters();
  BOOST_TEST(weights.front() == values.front().front());  // model.embed_tokens.weight, read from its prefixed name
  export_hf(source.dir(), named(names, weights, trained), out.file("text"));
  std::ifstream in(out.file("text") + "/config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  BOOST_TEST(config["architectures"] == nlohmann::json::array({"Gemma3ForCausalLM"}));
  BOOST_TEST((config["model_type"] == "gemma3_text" && config["hidden_size"] == 8 && config["sliding_window"] == 3));
  BOOST_TEST((config["eos_token_id"] == nlohmann::json::array({1, 106}) && config["torch_dtype"] == "float32"));
  BOOST_TEST((!config.contains("text_config") && !config.contains("vision_config")));
  Policy loaded(hf_model(out.file("text")), 10, 1);
  BOOST_TEST(loaded.parameter_names() == names);
  BOOST_TEST(loaded.flat_parameters() == weights);
  // A PEFT adapter would name the causal LM's modules, none of which the multimodal base has: refused, before writing.
  LoraSpec lora;
  lora.rank = 2;
  lora.targets = {"q"};
  BOOST_CHECK_EXCEPTION(
      export_peft_adapter(source.dir(), lora, {}, out.file("peft")), UsageError,
      [](const UsageError& e) { return std::string(e.what()).find("--merge-lora") != std::string::npos; });
  BOOST_TEST(!fs::exists(out.file("peft")));
}

// transformers 5 writes and reads "dtype", and calls "torch_dtype" deprecated at each load: an export writes the keys
// its source has, and torch_dtype only where it has neither.
BOOST_AUTO_TEST_CASE(the_exported_config_names_the_dtype_in_the_keys_its_source_has) {
  TempDir source, out;
  Policy trained(hf_model(random_qwen3(source, "float32")), 10, 1);
  const auto config_of = [&](const std::string& dir) {
    std::ifstream in(dir + "/config.json");
    return nlohmann::json::parse(in);
  };
  nlohmann::json v5 = config_of(source.dir());
  v5.erase("torch_dtype");
  v5["dtype"] = "float32";
  std::ofstream(source.file("config.json")) << v5.dump();
  ExportOptions options;
  options.dtype = "bfloat16";
  export_hf(source.dir(), named(trained.parameter_names(), trained.flat_parameters(), trained), out.file("v5"),
            options);
  BOOST_TEST(config_of(out.file("v5"))["dtype"] == "bfloat16");
  BOOST_TEST(!config_of(out.file("v5")).contains("torch_dtype"));
  v5.erase("dtype");
  std::ofstream(source.file("config.json")) << v5.dump();
  export_hf(source.dir(), named(trained.parameter_names(), trained.flat_parameters(), trained), out.file("neither"),
            options);
  BOOST_TEST(config_of(out.file("neither"))["torch_dtype"] == "bfloat16");
  BOOST_TEST(!config_of(out.file("neither")).contains("dtype"));
}

BOOST_AUTO_TEST_CASE(large_weights_go_into_shards_with_an_index) {
  TempDir source, out;
  Policy trained(hf_model(random_qwen3(source, "float32")), 10, 1);
  const auto weights = trained.flat_parameters();
  ExportOptions options;
  options.max_shard_bytes = 4000;
  const std::string exported = out.file("sharded");
  fs::create_directory(exported);  // an empty directory is replaced
  const ExportReport report =
      export_hf(source.dir(), named(trained.parameter_names(), weights, trained), exported, options);
  BOOST_TEST(fs::exists(exported + "/model.safetensors.index.json"));
  BOOST_TEST(!fs::exists(exported + "/model.safetensors"));
  int shards = 0;
  for (const auto& f : report.files) shards += f.rfind("model-", 0) == 0;
  BOOST_TEST(shards > 2);
  BOOST_TEST(HfWeights::open(exported).file_count() == static_cast<std::size_t>(shards));
  Policy loaded(hf_model(exported), 10, 1);
  BOOST_TEST(loaded.flat_parameters() == weights);
}

BOOST_AUTO_TEST_CASE(weights_that_do_not_fit_are_refused_before_writing) {
  TempDir source, out;
  Policy trained(hf_model(random_qwen3(source, "float32")), 10, 1);
  const auto weights = trained.flat_parameters();
  const auto all = named(trained.parameter_names(), weights, trained);
  const std::string exported = out.file("refused");
  auto missing = all;
  missing.pop_back();
  BOOST_CHECK_THROW(export_hf(source.dir(), missing, exported), ModelFileError);
  auto extra = all;
  extra.push_back({"lm_head.weight", weights.data(), 40 * 16});  // tied: the config has none
  BOOST_CHECK_THROW(export_hf(source.dir(), extra, exported), ModelFileError);
  auto short_one = all;
  short_one[0].size -= 1;
  BOOST_CHECK_THROW(export_hf(source.dir(), short_one, exported), ModelFileError);
  BOOST_TEST(!fs::exists(exported));
  fs::create_directories(exported);
  std::ofstream(exported + "/keep.txt") << "a user's file";
  BOOST_CHECK_THROW(export_hf(source.dir(), all, exported), UsageError);
  BOOST_TEST(fs::exists(exported + "/keep.txt"));
}

// Weights a run diverged into (NaN, inf), or past float16's range for a float16 export (inf there), load as NaN
// logits: refused, naming the tensor, before anything is written. A config.json of 400,000,000 layers is refused before
// its tensors are listed (they were, without bound).
BOOST_AUTO_TEST_CASE(weights_that_would_load_as_nan_are_refused) {
  TempDir source, out;
  Policy trained(hf_model(random_qwen3(source, "float16")), 10, 1);
  const auto names = trained.parameter_names();
  auto weights = trained.flat_parameters();
  const std::string exported = out.file("refused");
  const auto refused_for = [&](float value, const std::string& dtype, const std::string& why) {
    auto changed = weights;
    changed.back() = value;
    ExportOptions options;
    options.dtype = dtype;
    try {
      export_hf(source.dir(), named(names, changed, trained), exported, options);
      BOOST_ERROR("exported with " << value << " as " << dtype);
    } catch (const ModelFileError& e) {
      BOOST_TEST(std::string(e.what()).find(names.back()) != std::string::npos, e.what());
      BOOST_TEST(std::string(e.what()).find(why) != std::string::npos, e.what());
    }
    BOOST_TEST(!fs::exists(exported));
  };
  refused_for(std::nanf(""), "", "the run diverged");
  refused_for(std::numeric_limits<float>::infinity(), "bfloat16", "the run diverged");
  refused_for(70000.0f, "", "past float16's range");  // the source's float16
  auto big = weights;
  big.back() = 70000.0f;
  ExportOptions in_bfloat16;
  in_bfloat16.dtype = "bfloat16";
  export_hf(source.dir(), named(names, big, trained), exported, in_bfloat16);  // bfloat16 holds it
  TempDir huge;
  std::string config = tiny_qwen3_config;
  const std::size_t layers = config.find("\"num_hidden_layers\"");
  BOOST_REQUIRE(layers != std::string::npos);
  config.replace(layers, config.find(',', layers) - layers, "\"num_hidden_layers\": 400000000");
  std::ofstream(huge.file("config.json")) << config;
  BOOST_CHECK_THROW(export_hf(huge.dir(), named(names, weights, trained), out.file("huge")), ModelFileError);
}

// What the target directory holds after a refusal or a failure: nothing beside it either.
std::vector<std::string> entries_of(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

BOOST_AUTO_TEST_CASE(targets_that_are_no_new_directory_are_refused) {
  TempDir source, out;
  Policy trained(hf_model(random_qwen3(source, "float32")), 10, 1);
  const auto weights = trained.flat_parameters();
  const auto all = named(trained.parameter_names(), weights, trained);
  // A link to a directory: the rename would replace the link and leave its directory empty.
  fs::create_directory(out.file("real"));
  fs::create_directory_symlink(out.file("real"), out.file("link"));
  fs::create_symlink(out.file("not-yet"), out.file("dangling"));
  std::ofstream(out.file("a-file")) << "x";
  for (const std::string& target : {out.file("link"), out.file("dangling"), out.dir() + "/.", out.dir() + "/..",
                                    std::string("/"), std::string(".")})
    BOOST_CHECK_THROW(export_hf(source.dir(), all, target), UsageError);
  // Under a file: one error naming the path, not a filesystem exception.
  BOOST_CHECK_EXCEPTION(export_hf(source.dir(), all, out.file("a-file") + "/model"), Error,
                        [](const Error& e) { return std::string(e.what()).find("a-file/model") != std::string::npos; });
  BOOST_TEST(fs::is_empty(out.file("real")));
  BOOST_TEST((entries_of(out.dir()) == std::vector<std::string>{"a-file", "dangling", "link", "real"}));
}

BOOST_AUTO_TEST_CASE(a_failed_write_leaves_no_staging_directory) {
  TempDir source, out;
  Policy trained(hf_model(random_qwen3(source, "float32")), 10, 1);
  const auto weights = trained.flat_parameters();
  ExportOptions options;
  options.max_shard_bytes = 4000;
  // Files may not grow past 3000 bytes (a full disk, as a write sees it): the shards are written until one fails.
  struct rlimit before {};
  ::getrlimit(RLIMIT_FSIZE, &before);
  const struct rlimit small { 3000, before.rlim_max };
  const auto previous = std::signal(SIGXFSZ, SIG_IGN);
  ::setrlimit(RLIMIT_FSIZE, &small);
  BOOST_CHECK_EXCEPTION(
      export_hf(source.dir(), named(trained.parameter_names(), weights, trained), out.file("model"), options), Error,
      [](const Error& e) { return std::string(e.what()).find("File too large") != std::string::npos; });
  ::setrlimit(RLIMIT_FSIZE, &before);
  std::signal(SIGXFSZ, previous);
  BOOST_TEST(entries_of(out.dir()).empty());
}

BOOST_AUTO_TEST_SUITE_END()
