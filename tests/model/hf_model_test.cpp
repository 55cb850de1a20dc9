// Hugging Face model directories: tiny ones of each architecture written here (config.json and safetensors weights,
// in one file and in shards with an index), read with transformers' defaults and checked; then one malformation at a
// time, each refused with a ModelFileError naming the key, the tensor or the shard.
#include "arclight/model/hf_model.hpp"
#include "arclight/model/architecture.hpp"
#include "../temp_dir.hpp"
#include "hf_config_helpers.hpp"

#include <boost/test/unit_test.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

using namespace arclight;
using namespace arclight::model;
namespace fs = std::filesystem;
using namespace hf_test;

namespace {

// Four tiny configs: GQA everywhere (2 or 4 heads over 1 or 2 kv heads), each architecture's peculiarity on.
const std::string llama_config = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 16, "hidden_size": 8,
  "intermediate_size": 12, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
  "max_position_embeddings": 256, "bos_token_id": 0, "eos_token_id": [1, 2], "torch_dtype": "bfloat16",
  "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 64}})";
const std::string qwen2_config = R"({
  "architectures": ["Qwen2ForCausalLM"], "vocab_size": 16, "hidden_size": 8, "intermediate_size": 12,
  "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "rope_theta": 1000000.0,
  "rms_norm_eps": 1e-05, "tie_word_embeddings": true, "rope_scaling": null, "sliding_window": null,
  "use_sliding_window": false, "eos_token_id": 3, "bos_token_id": null})";
const std::string qwen3_config = R"({
  "architectures": ["Qwen3ForCausalLM"], "vocab_size": 16, "hidden_size": 8, "intermediate_size": 12,
  "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 6,
  "tie_word_embeddings": true, "eos_token_id": 5, "rope_theta": 1000000})";
const std::string mistral_config = R"({
  "architectures": ["MistralForCausalLM"], "vocab_size": 16, "hidden_size": 16, "intermediate_size": 24,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "sliding_window": null})";

// The Llama directory, its tensors changed by `edit`, expected to fail the check with every fragment named.
void expect_weights_refused(const std::function<void(Tensors&)>& edit, const std::vector<std::string>& fragments,
                            const std::vector<std::string>& int_tensors = {}) {
  BOOST_TEST_CONTEXT("expecting \"" << fragments.front() << "\"") {
    TempDir dir;
    write_text(dir.file("config.json"), llama_config);
    const HfConfig config = read_hf_config(dir.dir());
    Tensors tensors = expected_tensors(config);
    edit(tensors);
    write_weights(dir, tensors, 1, DType::bf16, int_tensors);
    const HfWeights weights = HfWeights::open(dir.dir());
    BOOST_CHECK_EXCEPTION(weights.check_against(config), ModelFileError,
                          [&](const ModelFileError& e) { return mentions(e, fragments); });
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hf_model)

BOOST_AUTO_TEST_CASE(llama_config_with_defaults_and_llama3_rope) {
  const HfConfig c = parse_hf_config(llama_config, "config.json");
  BOOST_TEST(c.architecture == "LlamaForCausalLM");
  BOOST_TEST(c.head_dim == 4);  // hidden_size / num_attention_heads
  BOOST_TEST(c.num_key_value_heads == 1);
  BOOST_TEST(c.rope_theta == 10000.0);
  BOOST_TEST(c.rms_norm_eps == 1e-6);
  BOOST_TEST(!c.tie_word_embeddings);
  BOOST_TEST(!c.attention_bias);
  BOOST_TEST(!c.o_proj_bias);
  BOOST_TEST(!c.qk_norm);
  BOOST_TEST(!c.sliding_window.has_value());
  BOOST_REQUIRE(c.rope_scaling.has_value());
  BOOST_TEST(c.rope_scaling->type == "llama3");
  BOOST_TEST(c.rope_scaling->factor == 8.0);
  BOOST_TEST(c.rope_scaling->high_freq_factor == 4.0);
  BOOST_TEST(c.rope_scaling->original_max_position_embeddings == 64);
  BOOST_TEST((c.eos_token_ids == std::vector<int>{1, 2}));
  BOOST_TEST(c.bos_token_id.value() == 0);
  BOOST_TEST(c.torch_dtype == "bfloat16");
  // Both keys: transformers 5 takes dtype, as here.
  const std::string both =
      replaced(llama_config, R"("torch_dtype": "bfloat16")", R"("torch_dtype": "bfloat16", "dtype": "float16")");
  BOOST_TEST(parse_hf_config(both, "config.json").torch_dtype == "float16");

  // Absent keys: LlamaConfig's defaults, num_key_value_heads falling back to num_attention_heads.
  const HfConfig d = parse_hf_config(R"({"architectures": ["LlamaForCausalLM"]})", "config.json");
  BOOST_TEST(d.vocab_size == 32000);
  BOOST_TEST(d.hidden_size == 4096);
  BOOST_TEST(d.intermediate_size == 11008);
  BOOST_TEST(d.num_hidden_layers == 32);
  BOOST_TEST(d.num_key_value_heads == 32);
  BOOST_TEST(d.head_dim == 128);
  BOOST_TEST(d.max_position_embeddings == 2048);
  BOOST_TEST(d.bos_token_id.value() == 1);
  BOOST_TEST((d.eos_token_ids == std::vector<int>{2}));
  BOOST_TEST(!d.rope_scaling.has_value());
  // attention_bias puts a bias on q, k, v and o.
  const HfConfig b = parse_hf_config(replaced(llama_config, "\"model_type\"", "\"attention_bias\": true, \"x\""), "c");
  BOOST_TEST(b.attention_bias);
  BOOST_TEST(b.o_proj_bias);
  BOOST_TEST(expected_tensors(b).size() == expected_tensors(c).size() + 2 * 4);
  // transformers 5's rope_parameters, beside a rope_scaling that is null (as transformers 5 reads it: rope_scaling or
  // rope_parameters): its theta and scaling, not the defaults.
  const HfConfig p = parse_hf_config(R"({"architectures": ["LlamaForCausalLM"], "rope_scaling": null,
      "max_position_embeddings": 8192, "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0,
      "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 1024}})",
                                     "config.json");
  BOOST_TEST(p.rope_theta == 500000.0);
  BOOST_REQUIRE(p.rope_scaling.has_value());
  BOOST_TEST(p.rope_scaling->type == "llama3");
  // A context cut back to the original length (a common edit to save memory): transformers warns and loads it.
  const HfConfig cut = parse_hf_config(R"({"architectures": ["LlamaForCausalLM"], "max_position_embeddings": 1024,
      "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 1024}})",
                                       "config.json");
  BOOST_TEST(cut.rope_scaling->original_max_position_embeddings == 1024);
}

// YaRN as Qwen's model cards have users add it, read as transformers 5 and vLLM read it: the factor given (not the
// ratio of the two lengths), the original context for the ramp, cos and sin scaled by 0.1 ln(factor) + 1 unless
// attention_factor (or DeepSeek's mscale pair) says otherwise.
BOOST_AUTO_TEST_CASE(yarn_rope_as_qwen_documents_it) {
  const std::string qwen25 = R"({"architectures": ["Qwen2ForCausalLM"], "max_position_embeddings": 40960,
      "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}})";
  const HfConfig c = parse_hf_config(qwen25, "config.json");
  BOOST_REQUIRE(c.rope_scaling.has_value());
  BOOST_TEST(c.rope_scaling->type == "yarn");
  BOOST_TEST(c.rope_scaling->factor == 4.0);
  BOOST_TEST(c.rope_scaling->original_max_position_embeddings == 32768);
  BOOST_TEST(c.rope_scaling->beta_fast == 32.0);
  BOOST_TEST(c.rope_scaling->beta_slow == 1.0);
  BOOST_TEST(c.rope_scaling->truncate);
  BOOST_TEST(c.rope_scaling->attention_factor == 0.1 * std::log(4.0) + 1, boost::test_tools::tolerance(1e-12));
  const auto yarn = [&](const std::string& fields) {
    return *parse_hf_config(R"({"architectures": ["Qwen3ForCausalLM"], "max_position_embeddings": 8192,
        "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, )" +
                                fields + "}}",
                            "config.json")
                .rope_scaling;
  };
  BOOST_TEST(yarn(R"("factor": 2.0)").original_max_position_embeddings == 8192);  // absent: max_position_embeddings
  BOOST_TEST(yarn(R"("factor": 2.0, "attention_factor": 1.5)").attention_factor == 1.5);
  BOOST_TEST(yarn(R"("factor": 1.0)").attention_factor == 1.0);
  const auto deepseek = yarn(R"("factor": 40, "mscale": 0.707, "mscale_all_dim": 1.0, "beta_fast": 16,
      "beta_slow": 2, "truncate": false)");
  BOOST_TEST(deepseek.attention_factor == (0.0707 * std::log(40.0) + 1) / (0.1 * std::log(40.0) + 1),
             boost::test_tools::tolerance(1e-12));
  BOOST_TEST(deepseek.beta_fast == 16.0);
  BOOST_TEST(deepseek.beta_slow == 2.0);
  BOOST_TEST(!deepseek.truncate);
  BOOST_TEST(!yarn(R"("factor": 2.0, "truncate": null)").truncate);  // None, which transformers reads as false
  const std::vector<std::pair<std::string, std::vector<std::string>>> refused = {
      {R"("factor": 0.5)", {"\"rope_scaling.factor\"", "at least 1"}},
      {R"("factor": 4.0, "beta_fast": -1)", {"\"rope_scaling.beta_fast\"", "positive"}},
      {R"("factor": 4.0, "truncate": "yes")", {"\"rope_scaling.truncate\"", "true or false"}},
      {R"("factor": 4.0, "attention_factor": 0)", {"\"rope_scaling.attention_factor\"", "positive"}},
      {R"("factor": 4.0, "mscale": 1, "mscale_all_dim": -7.2)", {"\"rope_scaling.mscale_all_dim\"", "0 or more"}},
      {R"("factor": 4.0, "attention_factor": 1e39)", {"\"rope_scaling.attention_factor\"", "outside 0.01 to 100"}},
      {R"("factor": 1e8, "mscale": 1, "mscale_all_dim": 1e300)", {"\"rope_scaling.mscale\"", "outside"}},
      {R"("factor": 4.0, "beta_fast": 1e-306)", {"\"rope_scaling\"", "beta_fast", "undefined"}},
      {R"("factor": 4.0, "x": 0}, "rope_theta": 1.0, "y": {"z": 0)", {"\"rope_scaling\"", "RoPE base above 1"}}};
  for (const auto& [fields, fragments] : refused)
    expect_config_refused(replaced(qwen25, "\"factor\": 4.0", fields), fragments);
}

BOOST_AUTO_TEST_CASE(qwen_and_mistral_defaults) {
  const HfConfig q2 = parse_hf_config(qwen2_config, "config.json");
  BOOST_TEST(q2.attention_bias);  // Qwen2's q, k, v always have one
  BOOST_TEST(!q2.o_proj_bias);
  BOOST_TEST(q2.tie_word_embeddings);
  BOOST_TEST(q2.rope_theta == 1e6);
  BOOST_TEST(q2.rms_norm_eps == 1e-5);
  BOOST_TEST(!q2.bos_token_id.has_value());
  BOOST_TEST((q2.eos_token_ids == std::vector<int>{3}));
  const HfConfig q2d = parse_hf_config(R"({"architectures": ["Qwen2ForCausalLM"]})", "config.json");
  BOOST_TEST(q2d.num_key_value_heads == 32);  // Qwen2Config's own default, not num_attention_heads
  // null is transformers' None: as many key/value heads as attention heads, not the absent key's default
  BOOST_TEST(parse_hf_config(R"({"architectures": ["Qwen2ForCausalLM"], "num_attention_heads": 16,
                                 "num_key_value_heads": null})",
                             "c")
                 .num_key_value_heads == 16);
  BOOST_TEST(q2d.vocab_size == 151936);
  BOOST_TEST(q2d.intermediate_size == 22016);
  BOOST_TEST(q2d.max_position_embeddings == 32768);
  BOOST_TEST(q2d.rope_theta == 10000.0);
  BOOST_TEST(!q2d.tie_word_embeddings);
  BOOST_TEST(q2d.eos_token_ids.empty());
  BOOST_TEST(!q2d.sliding_window.has_value());  // use_sliding_window defaults to false

  const HfConfig q3 = parse_hf_config(qwen3_config, "config.json");
  BOOST_TEST(q3.head_dim == 6);  // explicit, not hidden_size / heads
  BOOST_TEST(q3.qk_norm);
  BOOST_TEST(!q3.attention_bias);
  BOOST_TEST(parse_hf_config(R"({"architectures": ["Qwen3ForCausalLM"]})", "c").head_dim == 128);

  const HfConfig m = parse_hf_config(mistral_config, "config.json");
  BOOST_TEST(!m.sliding_window.has_value());  // null: full attention
  BOOST_TEST(m.head_dim == 4);
  const HfConfig md = parse_hf_config(R"({"architectures": ["MistralForCausalLM"]})", "config.json");
  BOOST_TEST(md.num_key_value_heads == 8);
  BOOST_TEST(parse_hf_config(R"({"architectures": ["MistralForCausalLM"], "num_attention_heads": 4,
                                 "num_key_value_heads": null})",
                             "c")
                 .num_key_value_heads == 4);
  BOOST_TEST(md.intermediate_size == 14336);
  BOOST_TEST(md.max_position_embeddings == 131072);
  BOOST_TEST(md.sliding_window.value() == 4096);
  BOOST_TEST(md.bos_token_id.value() == 1);
  BOOST_TEST(!md.attention_bias);
}

// Qwen's window, as transformers builds layer_types: only the layers from max_window_layers (28) on slide.
BOOST_AUTO_TEST_CASE(qwen_layers_slide_from_max_window_layers_on) {
  const std::string sliding = replaced(replaced(qwen2_config, "\"sliding_window\": null", "\"sliding_window\": 5"),
                                       "\"use_sliding_window\": false", "\"use_sliding_window\": true");
  BOOST_TEST(!parse_hf_config(sliding, "c").sliding_window.has_value());  // 2 layers, both before the 28th
  const std::string all_slide = replaced(sliding, "\"architectures\"", "\"max_window_layers\": 0, \"architectures\"");
  BOOST_TEST(parse_hf_config(all_slide, "c").sliding_window.value() == 5);
  const std::string typed =
      replaced(sliding, "\"architectures\"",
               "\"layer_types\": [\"sliding_attention\", \"sliding_attention\"], \"architectures\"");
  BOOST_TEST(parse_hf_config(typed, "c").sliding_window.value() == 5);
  const std::string full =
      replaced(typed, "[\"sliding_attention\", \"sliding_attention\"]", "[\"full_attention\", \"full_attention\"]");
  BOOST_TEST(!parse_hf_config(full, "c").sliding_window.has_value());
  // One window serves every layer: a mix is refused, as is a list that does not name each layer.
  expect_config_refused(replaced(sliding, "\"architectures\"", "\"max_window_layers\": 1, \"architectures\""),
                        {"\"max_window_layers\"", "1 of 2 layers"});
  expect_config_refused(
      replaced(typed, "[\"sliding_attention\", \"sliding_attention\"]", "[\"full_attention\", \"sliding_attention\"]"),
      {"\"layer_types\"", "1 of 2 layers"});
  expect_config_refused(replaced(typed, "[\"sliding_attention\", \"sliding_attention\"]", "[\"sliding_attention\"]"),
                        {"\"layer_types\"", "a list of 2"});
}

BOOST_AUTO_TEST_CASE(expected_tensors_per_architecture) {
  const Tensors llama = expected_tensors(parse_hf_config(llama_config, "c"));
  BOOST_TEST(llama.size() == 1 + 2 * 9 + 1 + 1u);
  BOOST_TEST(llama.front().name == "model.embed_tokens.weight");
  BOOST_TEST(llama.back().name == "lm_head.weight");
  BOOST_TEST((find(llama, "model.layers.1.self_attn.k_proj.weight").shape == std::vector<std::int64_t>{4, 8}));
  BOOST_TEST((find(llama, "model.layers.1.self_attn.q_proj.weight").shape == std::vector<std::int64_t>{8, 8}));
  BOOST_TEST((find(llama, "model.layers.0.mlp.down_proj.weight").shape == std::vector<std::int64_t>{8, 12}));
  BOOST_TEST((find(llama, "lm_head.weight").shape == std::vector<std::int64_t>{16, 8}));

  const Tensors qwen2 = expected_tensors(parse_hf_config(qwen2_config, "c"));
  BOOST_TEST(qwen2.size() == 1 + 2 * 12 + 1u);  // biases on q, k, v; tied: no lm_head
  BOOST_TEST((find(qwen2, "model.layers.0.self_attn.v_proj.bias").shape == std::vector<std::int64_t>{4}));

  const Tensors qwen3 = expected_tensors(parse_hf_config(qwen3_config, "c"));
  BOOST_TEST(qwen3.size() == 1 + 11 + 1u);
  BOOST_TEST((find(qwen3, "model.layers.0.self_attn.q_proj.weight").shape == std::vector<std::int64_t>{24, 8}));
  BOOST_TEST((find(qwen3, "model.layers.0.self_attn.k_proj.weight").shape == std::vector<std::int64_t>{12, 8}));
  BOOST_TEST((find(qwen3, "model.layers.0.self_attn.o_proj.weight").shape == std::vector<std::int64_t>{8, 24}));
  BOOST_TEST((find(qwen3, "model.layers.0.self_attn.k_norm.weight").shape == std::vector<std::int64_t>{6}));

  const Tensors mistral = expected_tensors(parse_hf_config(mistral_config, "c"));
  BOOST_TEST(mistral.size() == 1 + 2 * 9 + 2u);
  BOOST_TEST((find(mistral, "model.layers.0.self_attn.k_proj.weight").shape == std::vector<std::int64_t>{8, 16}));
}

BOOST_AUTO_TEST_CASE(each_architecture_one_file_and_sharded_passes_the_check) {
  for (const std::string& text : {llama_config, qwen2_config, qwen3_config, mistral_config}) {
    for (int shards : {1, 2, 3}) {
      TempDir dir;
      write_text(dir.file("config.json"), text);
      const HfConfig config = read_hf_config(dir.dir());
      BOOST_TEST_CONTEXT(config.architecture << " in " << shards << " file(s)") {
        const Tensors tensors = expected_tensors(config);
        write_weights(dir, tensors, shards, shards == 2 ? DType::f32 : DType::bf16);
        const HfWeights weights = HfWeights::open(dir.dir());
        BOOST_TEST(weights.file_count() == static_cast<std::size_t>(shards));
        BOOST_TEST(weights.names().size() == tensors.size());
        BOOST_CHECK_NO_THROW(weights.check_against(config));
        const auto& k = weights.entry("model.layers.0.self_attn.k_proj.weight");
        BOOST_TEST(k.shape == find(tensors, k.name).shape);
        BOOST_TEST(weights.bytes(k.name).size() == tensor_bytes(k.dtype, k.shape).value());
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(what_transformers_ignores_is_accepted) {
  TempDir dir;
  write_text(dir.file("config.json"), qwen2_config);
  const HfConfig config = read_hf_config(dir.dir());
  Tensors tensors = expected_tensors(config);
  tensors.push_back({"lm_head.weight", {16, 8}});  // a tied model may still carry it: tying overwrites it
  tensors.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", {2}});
  write_weights(dir, tensors);
  BOOST_CHECK_NO_THROW(HfWeights::open(dir.dir()).check_against(config));
}

BOOST_AUTO_TEST_CASE(weights_not_matching_the_config_are_refused) {
  const std::string k_proj = "model.layers.1.self_attn.k_proj.weight";
  const std::string up_proj = "model.layers.1.mlp.up_proj.weight";
  const auto drop = [](const std::string& name) {
    return [name](Tensors& t) {
      t.erase(std::remove_if(t.begin(), t.end(), [&](const auto& e) { return e.name == name; }), t.end());
    };
  };
  expect_weights_refused(drop(up_proj), {up_proj, "missing"});
  expect_weights_refused(
      [](Tensors& t) {
        t.push_back({"model.layers.0.self_attn.extra.weight", {8}});
      },
      {"model.layers.0.self_attn.extra.weight", "LlamaForCausalLM"});
  expect_weights_refused(
      [&](Tensors& t) {
        for (auto& e : t)
          if (e.name == k_proj) e.shape = {8, 8};
      },
      {k_proj, "[8, 8]", "expected [4, 8]"});
  expect_weights_refused([](Tensors&) {}, {"model.norm.weight", "I32"}, {"model.norm.weight"});
  // Every problem in one message.
  expect_weights_refused(
      [&](Tensors& t) {
        drop(up_proj)(t);
        drop("lm_head.weight")(t);
      },
      {"2 problems", up_proj, "lm_head.weight"});
  // An untied model's lm_head is no optional extra.
  expect_weights_refused(drop("lm_head.weight"), {"'lm_head.weight' is missing"});
  // A layer count the weights cannot hold is refused before the expected tensors are listed (2^31 - 1 layers would
  // not fit in memory).
  TempDir small;
  write_weights(small, expected_tensors(parse_hf_config(llama_config, "c")));
  const HfConfig huge =
      parse_hf_config(replaced(llama_config, "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 2147483647"), "c");
  BOOST_CHECK_EXCEPTION(HfWeights::open(small.dir()).check_against(huge), ModelFileError, [](const ModelFileError& e) {
    return mentions(e, {"num_hidden_layers 2147483647", "the 21 tensors the weights hold"});
  });
  // As many layers as a header holds empty tensors (a hostile one of a million listed millions of problems, gigabytes
  // of them): refused before the list.
  TempDir empties;
  Tensors empty_tensors;
  for (int i = 0; i < 1000; ++i) empty_tensors.push_back({"t" + std::to_string(i), {0}});
  write_weights(empties, empty_tensors);
  const HfConfig thousand =
      parse_hf_config(replaced(llama_config, "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1000"), "c");
  BOOST_CHECK_EXCEPTION(HfWeights::open(empties.dir()).check_against(thousand), ModelFileError,
                        [](const ModelFileError& e) { return mentions(e, {"needs far more than the 1000 tensors"}); });
  // Many problems: the first ten, then a count.
  expect_weights_refused([](Tensors& t) { t.resize(2); }, {"19 problems", "and 9 more"});
}

BOOST_AUTO_TEST_CASE(malformed_configs_are_refused) {
  expect_config_refused(replaced(llama_config, "LlamaForCausalLM", "GPT2LMHeadModel"),
                        {"\"architectures\"", "GPT2LMHeadModel", "LlamaForCausalLM", "MistralForCausalLM"});
  expect_config_refused(R"({"vocab_size": 3})", {"\"architectures\"", "missing"});
  expect_config_refused(R"({"architectures": "LlamaForCausalLM"})", {"\"architectures\"", "expected a list"});
  expect_config_refused(replaced(llama_config, "\"hidden_size\": 8", "\"hidden_size\": \"8\""),
                        {"\"hidden_size\"", "expected an integer", "string"});
  expect_config_refused(replaced(llama_config, "\"hidden_size\": 8", "\"hidden_size\": 8.5"),
                        {"\"hidden_size\"", "expected an integer"});
  expect_config_refused(replaced(qwen2_config, "\"tie_word_embeddings\": true", "\"tie_word_embeddings\": 1"),
                        {"\"tie_word_embeddings\"", "expected true or false"});
  expect_config_refused(replaced(qwen2_config, "\"rope_theta\": 1000000.0", "\"rope_theta\": \"big\""),
                        {"\"rope_theta\"", "expected a number"});
  expect_config_refused(replaced(llama_config, "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 0"),
                        {"\"num_hidden_layers\"", "positive"});
  expect_config_refused(replaced(llama_config, "\"vocab_size\": 16", "\"vocab_size\": 99999999999"),
                        {"\"vocab_size\"", "out of range"});
  expect_config_refused(replaced(mistral_config, "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3"),
                        {"\"num_key_value_heads\"", "does not divide"});
  expect_config_refused(replaced(mistral_config, "\"num_attention_heads\": 4", "\"num_attention_heads\": 6"),
                        {"\"hidden_size\"", "not a multiple"});
  expect_config_refused(replaced(llama_config, "\"rope_type\": \"llama3\"", "\"rope_type\": \"longrope\""),
                        {"\"rope_scaling.rope_type\"", "\"longrope\"", "not supported", "llama3", "yarn"});
  expect_config_refused(replaced(llama_config, "\"rope_type\": \"llama3\"", "\"type\": \"dynamic\""),
                        {"\"dynamic\"", "not supported"});
  expect_config_refused(
      replaced(llama_config, "\"rope_type\": \"llama3\"", "\"type\": \"llama3\", \"rope_type\": \"default\""),
      {"\"rope_scaling\"", "\"llama3\"", "\"default\"", "agree"});
  expect_config_refused(replaced(llama_config, "\"factor\": 8.0,", ""), {"\"rope_scaling.factor\"", "missing"});
  expect_config_refused(replaced(llama_config, "\"rope_scaling\": {", "\"rope_scaling\": 3, \"y\": {"),
                        {"\"rope_scaling\"", "expected an object"});
  expect_config_refused(replaced(llama_config, "[1, 2]", "[1, \"2\"]"), {"\"eos_token_id\"", "expected an integer"});
  expect_config_refused(replaced(llama_config, "[1, 2]", "[1, 16]"), {"\"eos_token_id\"", "outside the vocabulary"});
  expect_config_refused(replaced(qwen3_config, "\"head_dim\": 6", "\"head_dim\": 5"), {"\"head_dim\"", "even"});
  expect_config_refused(replaced(llama_config, "\"architectures\"", "\"hidden_act\": \"gelu\", \"architectures\""),
                        {"\"hidden_act\"", "\"gelu\"", "not supported"});
  // RoPE on a share of each head's dimensions (transformers reads it for every architecture): not silently on all
  expect_config_refused(
      replaced(llama_config, "\"architectures\"", "\"partial_rotary_factor\": 0.5, \"architectures\""),
      {"\"partial_rotary_factor\"", "0.5", "not supported"});
  BOOST_CHECK_NO_THROW(parse_hf_config(
      replaced(llama_config, "\"architectures\"", "\"partial_rotary_factor\": 1.0, \"architectures\""), "x/c.json"));
  expect_config_refused("{\"architectures\": [", {"not JSON"});
  // Nested 100,000 deep: one error, and its message does not print the value (printing recurses once per level).
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_config_refused("{\"architectures\": " + deep + "}", {"\"architectures\"", "a list of 1"});
  expect_config_refused("[1]", {"expected a JSON object"});

  TempDir dir;
  BOOST_CHECK_EXCEPTION(read_hf_config(dir.dir()), ModelFileError,
                        [&](const ModelFileError& e) { return mentions(e, {dir.file("config.json")}); });
}

BOOST_AUTO_TEST_CASE(bad_weight_files_and_indexes_are_refused) {
  const auto refused = [](const TempDir& dir, const std::vector<std::string>& fragments) {
    BOOST_CHECK_EXCEPTION(HfWeights::open(dir.dir()), ModelFileError,
                          [&](const ModelFileError& e) { return mentions(e, fragments); });
  };
  const Tensors tensors = expected_tensors(parse_hf_config(llama_config, "c"));
  {
    TempDir dir;  // no weights at all
    refused(dir, {"model.safetensors", "model.safetensors.index.json"});
  }
  {
    TempDir dir;  // a FIFO (a tarball may hold one) is refused, not opened: opening it would wait for a writer
    BOOST_REQUIRE(::mkfifo(dir.file("model.safetensors").c_str(), 0600) == 0);
    refused(dir, {"model.safetensors", "not a regular file"});
    BOOST_REQUIRE(::mkfifo(dir.file("config.json").c_str(), 0600) == 0);
    BOOST_CHECK_EXCEPTION(read_hf_config(dir.dir()), ModelFileError, [&](const ModelFileError& e) {
      return mentions(e, {"config.json", "not a regular file"});
    });
  }
  {
    TempDir dir;  // a shard named but not there
    write_weights(dir, tensors, 2);
    fs::remove(dir.file("model-00002-of-00002.safetensors"));
    refused(dir, {"model-00002-of-00002.safetensors", "missing"});
  }
  for (const std::string shard : {"../model-00001-of-00002.safetensors", "sub/x.safetensors", "..", ""}) {
    TempDir dir;  // a shard outside the directory
    write_weights(dir, tensors, 2);
    std::ifstream in(dir.file("model.safetensors.index.json"));
    const std::string index((std::istreambuf_iterator<char>(in)), {});
    write_text(dir.file("model.safetensors.index.json"),
               replaced(index, "\"model-00001-of-00002.safetensors\"", "\"" + shard + "\""));
    refused(dir, {"\"" + shard + "\"", "not a plain file name", "model.embed_tokens.weight"});
  }
  {
    TempDir dir;  // the map puts a tensor in a shard that lacks it
    write_weights(dir, tensors, 2);
    std::ifstream in(dir.file("model.safetensors.index.json"));
    const std::string index((std::istreambuf_iterator<char>(in)), {});
    write_text(dir.file("model.safetensors.index.json"), replaced(index, "\"model.embed_tokens.weight\":\"model-00001",
                                                                  "\"model.embed_tokens.weight\":\"model-00002"));
    refused(dir, {"model.embed_tokens.weight", "not in its shard"});
  }
  {
    TempDir dir;  // a tensor in two shards: which copy transformers takes depends on the order it reads them
    write_weights(dir, tensors, 2);
    std::size_t largest = 0;
    for (const auto& t : tensors) largest = std::max<std::size_t>(largest, tensor_bytes(DType::bf16, t.shape).value());
    const std::vector<char> zeros(largest);
    std::vector<TensorToWrite> every;
    for (const auto& t : tensors)
      every.push_back({t.name, DType::bf16, t.shape, zeros.data(), tensor_bytes(DType::bf16, t.shape).value()});
    write_safetensors(dir.file("model-00001-of-00002.safetensors"), every);
    refused(dir, {"model-00001-of-00002.safetensors", "in this shard too", "model-00002-of-00002.safetensors"});
  }
  {
    TempDir dir;  // a shard holds a tensor the map leaves out
    write_weights(dir, tensors, 2);
    std::ifstream in(dir.file("model.safetensors.index.json"));
    const std::string index((std::istreambuf_iterator<char>(in)), {});
    write_text(dir.file("model.safetensors.index.json"),
               replaced(index, "\"model.norm.weight\":\"model-00002-of-00002.safetensors\",", ""));
    refused(dir, {"model.norm.weight", "not in model.safetensors.index.json's weight_map"});
  }
  {
    TempDir dir;
    write_text(dir.file("model.safetensors.index.json"), R"({"weight_map": []})");
    refused(dir, {"weight_map"});
  }
  {
    TempDir dir;
    write_weights(dir, tensors);
    BOOST_CHECK_EXCEPTION(HfWeights::open(dir.dir()).entry("nope"), ModelFileError,
                          [&](const ModelFileError& e) { return mentions(e, {"'nope'"}); });
  }
}

BOOST_AUTO_TEST_SUITE_END()

// What defines a model beside its weights: a copy elsewhere digests alike; a changed, added or removed file is named.
BOOST_AUTO_TEST_CASE(a_definition_digest_names_the_files_that_differ) {
  TempDir original, copy;
  for (const TempDir* dir : {&original, &copy}) {
    write_text(dir->file("config.json"), qwen3_config);
    write_text(dir->file("tokenizer.json"), "{\"model\": {}}");
    write_text(dir->file("model.safetensors"), "weights are not part of it");
  }
  write_text(copy.file("model.safetensors"), "other weights");
  const std::string saved = definition_digest(original.dir());
  BOOST_TEST(saved.find("config.json ") == 0);
  BOOST_TEST(saved.find("\ntokenizer.json ") != std::string::npos);
  BOOST_TEST(saved.find("safetensors") == std::string::npos);
  BOOST_TEST(definition_differences(saved, definition_digest(copy.dir())).empty());

  write_text(copy.file("config.json"), qwen3_config + " ");
  write_text(copy.file("tokenizer_config.json"), "{}");
  fs::remove(copy.file("tokenizer.json"));
  const std::vector<std::string> differences = definition_differences(saved, definition_digest(copy.dir()));
  const std::vector<std::string> expected = {"config.json differs", "tokenizer.json is not there now",
                                             "tokenizer_config.json was not there"};
  BOOST_TEST(differences == expected, boost::test_tools::per_element());
  BOOST_CHECK_THROW(definition_differences("config.json 123\n", saved), ModelFileError);
}
