// Gemma's configs, as transformers' config classes read them (Gemma 1, 2 and 3, and the text model of a multimodal
// Gemma 3): defaults, layer types, RoPE by layer type, soft caps, and what the decoder does not do refused.
#include "../temp_dir.hpp"
#include "arclight/model/architecture.hpp"
#include "arclight/model/hf_model.hpp"
#include "hf_config_helpers.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using namespace arclight;
using namespace arclight::model;
using namespace hf_test;

BOOST_AUTO_TEST_SUITE(hf_model)

// Gemma 3, as Gemma3TextConfig reads a config.json (Gemma 3 1B's keys, transformers 4.5x) and transformers 5's
// rope_parameters by layer type; what its decoder does not do is refused.
BOOST_AUTO_TEST_CASE(gemma3_config) {
  const std::string gemma = R"({"architectures": ["Gemma3ForCausalLM"], "vocab_size": 16, "hidden_size": 8,
      "intermediate_size": 12, "num_hidden_layers": 7, "num_attention_heads": 2, "num_key_value_heads": 1,
      "head_dim": 6, "query_pre_attn_scalar": 4, "sliding_window": 3, "rope_scaling": null,
      "attn_logit_softcapping": null, "final_logit_softcapping": null})";
  const HfConfig g = parse_hf_config(gemma, "c");
  BOOST_TEST((g.qk_norm && g.gemma_norms && g.tie_word_embeddings));
  BOOST_TEST(g.hidden_activation == "gelu_pytorch_tanh");
  BOOST_TEST(g.query_pre_attn_scalar.value() == 4);
  BOOST_TEST(g.rope_theta == 1e6);
  BOOST_TEST(g.local_rope_theta.value() == 1e4);
  BOOST_TEST(g.sliding_window.value() == 3);
  // every sliding_window_pattern-th (6th) layer attends in full
  BOOST_TEST((g.sliding_layers == std::vector<bool>{true, true, true, true, true, false, true}));
  BOOST_TEST((g.bos_token_id.value() == 2 && g.eos_token_ids == std::vector<int>{1}));
  const HfConfig d = parse_hf_config(R"({"architectures": ["Gemma3ForCausalLM"]})", "c");
  BOOST_TEST((d.vocab_size == 262208 && d.head_dim == 256 && d.num_key_value_heads == 4 && d.sliding_window == 4096));
  BOOST_TEST(d.query_pre_attn_scalar.value() == 256);
  const auto with = [&](const std::string& keys) {
    return replaced(gemma, "\"architectures\"", keys + ", \"architectures\"");
  };
  BOOST_TEST(parse_hf_config(with(R"("sliding_window_pattern": 2)"), "c").sliding_layers.at(1) == false);
  const HfConfig typed =
      parse_hf_config(with(R"("layer_types": ["full_attention", "sliding_attention", "full_attention", "full_attention",
          "full_attention", "full_attention", "sliding_attention"])"),
                      "c");
  BOOST_TEST((typed.sliding_layers == std::vector<bool>{false, true, false, false, false, false, true}));
  const HfConfig linear = parse_hf_config(
      replaced(gemma, "\"rope_scaling\": null", R"("rope_scaling": {"rope_type": "linear", "factor": 8.0})"), "c");
  BOOST_TEST((linear.rope_scaling->type == "linear" && linear.rope_scaling->factor == 8.0));
  const std::string by_type = replaced(gemma, "\"rope_scaling\": null", R"("rope_parameters": {
      "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 500000.0},
      "sliding_attention": {"rope_type": "default", "rope_theta": 20000.0}})");
  const HfConfig v5 = parse_hf_config(by_type, "c");
  BOOST_TEST((v5.rope_theta == 5e5 && v5.local_rope_theta.value() == 2e4 && v5.rope_scaling->factor == 8.0));
  const Tensors tensors = expected_tensors(g);
  BOOST_TEST(tensors.size() == 1 + 7 * 13 + 1u);  // 4 norms and q/k norms a layer; tied: no lm_head
  BOOST_TEST((find(tensors, "model.layers.6.post_feedforward_layernorm.weight").shape == std::vector<std::int64_t>{8}));
  BOOST_TEST((find(tensors, "model.layers.0.self_attn.q_norm.weight").shape == std::vector<std::int64_t>{6}));
  BOOST_TEST((!g.attn_logit_softcapping && !g.final_logit_softcapping && !d.final_logit_softcapping));
  // soft caps where a config sets them, as transformers applies them
  BOOST_TEST(
      parse_hf_config(replaced(gemma, "\"final_logit_softcapping\": null", "\"final_logit_softcapping\": 30.0"), "c")
          .final_logit_softcapping.value() == 30);
  expect_config_refused(with(R"("hidden_activation": "gelu")"), {"\"hidden_activation\"", "\"gelu\" is not supported"});
  expect_config_refused(with(R"("use_bidirectional_attention": true)"), {"\"use_bidirectional_attention\""});
  expect_config_refused(replaced(by_type, R"({"rope_type": "default", "rope_theta": 20000.0})",
                                 R"({"rope_type": "linear", "factor": 2.0})"),
                        {"\"rope_parameters.sliding_attention\"", "not supported"});
  // It loads, in bfloat16 and not in float16, which its activations overflow (in transformers too).
  TempDir dir;
  ModelConfig model = hf_model_in(dir, gemma, tensors);
  model.dtype = ComputeType::bfloat16;
  BOOST_TEST(describe(check_model(model, 0).architecture).find("sliding window 3 on 6 layers") != std::string::npos);
  model.dtype = ComputeType::float16;
  BOOST_CHECK_EXCEPTION(check_model(model, 0), UsageError, [](const UsageError& e) {
    return std::string(e.what()).find("overflows float16") != std::string::npos;
  });
  // transformers 5 fills a layer type left out with the theta given above, unscaled
  const HfConfig one_type = parse_hf_config(
      replaced(gemma, "\"rope_scaling\": null", R"("rope_parameters": {"full_attention": {"rope_type": "default",
          "rope_theta": 40000.0}}, "rope_local_base_freq": 500.0)"),
      "c");
  BOOST_TEST((one_type.rope_theta == 4e4 && one_type.local_rope_theta.value() == 500 && !one_type.rope_scaling));
  expect_config_refused(replaced(by_type, "\"rope_parameters\"",
                                 R"("rope_scaling": {"rope_type": "linear", "factor": 2.0}, "rope_parameters")"),
                        {"\"rope_scaling\"", "beside rope_parameters"});
  expect_config_refused(replaced(gemma, "\"sliding_window\": 3", "\"sliding_window\": null"),
                        {"\"sliding_window\"", "need a window"});
  expect_config_refused(with(R"("partial_rotary_factor": 0.5)"), {"\"partial_rotary_factor\""});
  expect_config_refused(
      replaced(gemma, "\"rope_scaling\": null", R"("rope_scaling": {"rope_type": "longrope", "factor": 4.0})"),
      {"\"rope_scaling.rope_type\"", "\"longrope\" is not supported"});
}

// Gemma 2, as Gemma2Config reads a config.json (Gemma 2 2B's keys): soft caps by default, none where null; the window
// on every other layer from the first unless layer_types says otherwise; one RoPE, as Llama's.
BOOST_AUTO_TEST_CASE(gemma2_config) {
  const std::string gemma = R"({"architectures": ["Gemma2ForCausalLM"], "vocab_size": 16, "hidden_size": 8,
      "intermediate_size": 12, "num_hidden_layers": 5, "num_attention_heads": 2, "num_key_value_heads": 1,
      "head_dim": 6, "query_pre_attn_scalar": 4, "sliding_window": 3, "attn_logit_softcapping": 50.0,
      "final_logit_softcapping": 30.0, "cache_implementation": "hybrid"})";
  const HfConfig g = parse_hf_config(gemma, "c");
  BOOST_TEST((g.gemma_norms && !g.qk_norm && g.tie_word_embeddings && !g.local_rope_theta));
  BOOST_TEST(g.hidden_activation == "gelu_pytorch_tanh");
  BOOST_TEST((g.query_pre_attn_scalar.value() == 4 && g.rope_theta == 1e4 && g.sliding_window.value() == 3));
  BOOST_TEST((g.sliding_layers == std::vector<bool>{true, false, true, false, true}));
  BOOST_TEST((g.attn_logit_softcapping.value() == 50 && g.final_logit_softcapping.value() == 30));
  const HfConfig d = parse_hf_config(R"({"architectures": ["Gemma2ForCausalLM"]})", "c");
  BOOST_TEST((d.vocab_size == 256000 && d.hidden_size == 2304 && d.head_dim == 256 && d.num_key_value_heads == 4));
  BOOST_TEST((d.max_position_embeddings == 8192 && d.sliding_window == 4096 && d.query_pre_attn_scalar == 256.0));
  BOOST_TEST((d.attn_logit_softcapping.value() == 50 && d.final_logit_softcapping.value() == 30));
  BOOST_TEST((d.bos_token_id.value() == 2 && d.eos_token_ids == std::vector<int>{1}));
  const auto with = [&](const std::string& keys) {
    return replaced(gemma, "\"architectures\"", keys + ", \"architectures\"");
  };
  const HfConfig uncapped =
      parse_hf_config(replaced(gemma, "\"attn_logit_softcapping\": 50.0", "\"attn_logit_softcapping\": null"), "c");
  BOOST_TEST((!uncapped.attn_logit_softcapping && uncapped.final_logit_softcapping.value() == 30));
  const HfConfig typed = parse_hf_config(with(R"("layer_types": ["full_attention", "sliding_attention",
      "full_attention", "full_attention", "sliding_attention"])"),
                                         "c");
  BOOST_TEST((typed.sliding_layers == std::vector<bool>{false, true, false, false, true}));
  // Gemma 3's key is not Gemma 2's: transformers ignores it
  BOOST_TEST(parse_hf_config(with(R"("sliding_window_pattern": 3)"), "c").sliding_layers.at(1) == false);
  const HfConfig v5 =
      parse_hf_config(with(R"("rope_parameters": {"rope_type": "default", "rope_theta": 20000.0})"), "c");
  BOOST_TEST((v5.rope_theta == 2e4 && !v5.rope_scaling));
  const Tensors tensors = expected_tensors(g);
  BOOST_TEST(tensors.size() == 1 + 5 * 11 + 1u);  // 4 norms a layer, no q/k norms; tied: no lm_head
  BOOST_TEST((find(tensors, "model.layers.4.pre_feedforward_layernorm.weight").shape == std::vector<std::int64_t>{8}));
  expect_config_refused(replaced(gemma, "50.0", "-1.0"), {"\"attn_logit_softcapping\"", "must be positive"});
  expect_config_refused(replaced(gemma, "30.0", "\"30\""), {"\"final_logit_softcapping\"", "expected a number"});
  expect_config_refused(with(R"("use_bidirectional_attention": true)"), {"\"use_bidirectional_attention\""});
  expect_config_refused(replaced(gemma, "\"sliding_window\": 3", "\"sliding_window\": null"),
                        {"\"sliding_window\"", "need a window"});
  expect_config_refused(with(R"("hidden_activation": "gelu")"), {"\"hidden_activation\"", "\"gelu\" is not supported"});
  expect_config_refused(with(R"("rope_scaling": {"rope_type": "longrope", "factor": 4.0})"),
                        {"\"rope_scaling.rope_type\"", "\"longrope\" is not supported"});
  // It loads, and says what it is; float16 is refused as for Gemma 3
  TempDir dir;
  ModelConfig model = hf_model_in(dir, gemma, tensors);
  const std::string description = describe(check_model(model, 0).architecture);
  for (const char* part : {"sliding window 3 on 3 layers", "scores soft-capped at 50", "logits soft-capped at 30"})
    BOOST_TEST(description.find(part) != std::string::npos, description << " lacks " << part);
  model.dtype = ComputeType::float16;
  BOOST_CHECK_THROW(check_model(model, 0), UsageError);
}

// Gemma 3 4B-27B: Gemma3ForConditionalGeneration, whose text model is read from text_config and its tensors under
// either prefix (Google's files, transformers 4.52 on), the vision tower's left unread; a causal LM may not hold them.
BOOST_AUTO_TEST_CASE(the_text_model_of_a_multimodal_gemma3) {
  const std::string multimodal = R"({"architectures": ["Gemma3ForConditionalGeneration"], "eos_token_id": [1, 106],
      "torch_dtype": "bfloat16", "text_config": {"model_type": "gemma3_text", "vocab_size": 128, "hidden_size": 8,
      "intermediate_size": 12, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
      "head_dim": 6, "sliding_window": 3, "rope_scaling": {"rope_type": "linear", "factor": 8.0}},
      "vision_config": {"model_type": "siglip_vision_model"}})";
  const HfConfig c = parse_hf_config(multimodal, "c");
  BOOST_TEST(c.text_of_multimodal);
  BOOST_TEST(c.architecture == "Gemma3ForConditionalGeneration");
  BOOST_TEST((c.gemma_norms && c.hidden_size == 8 && c.num_hidden_layers == 2 && c.rope_scaling->factor == 8.0));
  BOOST_TEST((c.eos_token_ids == std::vector<int>{1, 106} && c.torch_dtype == "bfloat16"));
  BOOST_TEST(!parse_hf_config(replaced(multimodal, "ConditionalGeneration", "CausalLM"), "c").text_of_multimodal);
  // End tokens in text_config where none are beside it
  const std::string inside = replaced(replaced(multimodal, "\"eos_token_id\": [1, 106],", ""), "\"vocab_size\"",
                                      "\"eos_token_id\": [1, 106], \"vocab_size\"");
  BOOST_TEST((parse_hf_config(inside, "c").eos_token_ids == std::vector<int>{1, 106}));
  expect_config_refused(R"({"architectures": ["Gemma3ForConditionalGeneration"]})", {"\"text_config\""});
  expect_config_refused(replaced(multimodal, "\"hidden_size\": 8", "\"hidden_size\": -8"),
                        {"\"text_config.hidden_size\"", "must be positive"});
  for (const std::string prefix : {"language_model.", "model.language_model."}) {
    TempDir dir;
    write_text(dir.file("config.json"), multimodal);
    Tensors tensors;
    for (ExpectedTensor t : expected_tensors(c)) {
      t.name = prefix == "language_model." ? prefix + t.name : prefix + t.name.substr(std::string("model.").size());
      tensors.push_back(std::move(t));
    }
    tensors.push_back(
        {(prefix == "language_model." ? "" : "model.") + std::string("vision_tower.patch.weight"), {4, 3}});
    write_weights(dir, tensors, 2);
    BOOST_TEST_CONTEXT(prefix) {
      const HfWeights weights = HfWeights::open(dir.dir());
      BOOST_CHECK_NO_THROW(weights.check_against(c));
      BOOST_TEST(weights.has("model.layers.1.post_feedforward_layernorm.weight"));  // the causal LM's name
      // The same tensors beside the text model's own config, a causal LM's: the vision tower's is one too many.
      const std::string causal = R"({"architectures": ["Gemma3ForCausalLM"], "vocab_size": 128, "hidden_size": 8,
          "intermediate_size": 12, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
          "head_dim": 6, "sliding_window": 3})";
      BOOST_CHECK_EXCEPTION(weights.check_against(parse_hf_config(causal, "c")), ModelFileError,
                            [](const ModelFileError& e) {
                              const std::string what = e.what();
                              return what.find("vision_tower.patch.weight") != std::string::npos &&
                                     what.find("is missing") == std::string::npos;
                            });
    }
  }
}

// Gemma 1, as GemmaConfig reads a config.json (Gemma 2B's keys): Gemma's norms and embeddings without the norms
// after attention and the MLP, windows or caps; the activation under either key, Google's first "gelu" read as the
// tanh approximation Gemma was trained with; float16 refused as for Gemma 2 and 3.
BOOST_AUTO_TEST_CASE(gemma_config) {
  const std::string gemma = R"({"architectures": ["GemmaForCausalLM"], "model_type": "gemma", "vocab_size": 16,
      "hidden_size": 8, "intermediate_size": 12, "num_hidden_layers": 3, "num_attention_heads": 2,
      "num_key_value_heads": 1, "head_dim": 6, "hidden_act": "gelu", "rope_scaling": null, "rope_theta": 10000.0})";
  const HfConfig g = parse_hf_config(gemma, "c");
  BOOST_TEST((g.gemma_norms && !g.sandwich_norms && !g.qk_norm && g.tie_word_embeddings));
  BOOST_TEST(g.hidden_activation == "gelu_pytorch_tanh");
  BOOST_TEST((!g.query_pre_attn_scalar && !g.sliding_window && g.sliding_layers.empty() && !g.local_rope_theta));
  BOOST_TEST((!g.attn_logit_softcapping && !g.final_logit_softcapping && !g.rope_scaling));
  const HfConfig d = parse_hf_config(R"({"architectures": ["GemmaForCausalLM"]})", "c");
  BOOST_TEST((d.vocab_size == 256000 && d.hidden_size == 3072 && d.intermediate_size == 24576));
  BOOST_TEST((d.num_hidden_layers == 28 && d.num_attention_heads == 16 && d.num_key_value_heads == 16));
  BOOST_TEST((d.head_dim == 256 && d.max_position_embeddings == 8192 && d.rope_theta == 1e4));
  BOOST_TEST((d.bos_token_id.value() == 2 && d.eos_token_ids == std::vector<int>{1} && d.tie_word_embeddings));
  BOOST_TEST(d.hidden_activation == "gelu_pytorch_tanh");
  const auto with = [&](const std::string& keys) {
    return replaced(gemma, "\"architectures\"", keys + ", \"architectures\"");
  };
  // transformers before 4.48 reads hidden_activation, 4.48 on hidden_act: each that is set must be Gemma's
  BOOST_TEST(parse_hf_config(with(R"("hidden_activation": "gelu_pytorch_tanh")"), "c").hidden_activation ==
             "gelu_pytorch_tanh");
  BOOST_TEST(parse_hf_config(replaced(gemma, "\"gelu\"", "\"gelu_pytorch_tanh\""), "c").hidden_activation ==
             "gelu_pytorch_tanh");
  expect_config_refused(with(R"("hidden_activation": "gelu")"), {"\"hidden_activation\"", "\"gelu\" is not supported"});
  expect_config_refused(replaced(gemma, "\"gelu\"", "\"silu\""), {"\"hidden_act\"", "\"silu\" is not supported"});
  BOOST_TEST(parse_hf_config(with(R"("hidden_activation": null)"), "c").hidden_activation == "gelu_pytorch_tanh");
  expect_config_refused(replaced(with(R"("hidden_activation": "gelu_pytorch_tanh")"), "\"gelu\"", "\"relu\""),
                        {"\"hidden_act\"", "\"relu\" is not supported"});
  const HfConfig v5 =
      parse_hf_config(replaced(gemma, "\"rope_scaling\": null, \"rope_theta\": 10000.0",
                               R"("rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 20000.0})"),
                      "c");
  BOOST_TEST((v5.rope_theta == 2e4 && v5.rope_scaling->factor == 2.0));
  const HfConfig biased = parse_hf_config(with(R"("attention_bias": true)"), "c");
  BOOST_TEST((biased.attention_bias && biased.o_proj_bias));
  expect_config_refused(with(R"("use_bidirectional_attention": true)"), {"\"use_bidirectional_attention\""});
  // q, k, v, o, three MLP projections, a norm before attention and one before the MLP; tied: no lm_head
  const Tensors tensors = expected_tensors(g);
  BOOST_TEST(tensors.size() == 1 + 3 * 9 + 1u);
  BOOST_TEST((find(tensors, "model.layers.2.post_attention_layernorm.weight").shape == std::vector<std::int64_t>{8}));
  BOOST_TEST((find(tensors, "model.layers.0.self_attn.q_proj.weight").shape == std::vector<std::int64_t>{12, 8}));
  // It loads, and says what it is: no window or caps; float16 is refused as for Gemma 2 and 3
  TempDir dir;
  ModelConfig model = hf_model_in(dir, gemma, tensors);
  const Architecture a = check_model(model, 0).architecture;
  BOOST_TEST((a.norm == NormKind::rms_norm_offset && a.scaled_embeddings && !a.sandwich_norms));
  BOOST_TEST((a.mlp == MlpKind::gated_gelu_tanh && !a.attention_scale && !a.sliding_window));
  const std::string description = describe(a);
  for (const char* absent : {"sliding window", "soft-capped", "norms before and after"})
    BOOST_TEST(description.find(absent) == std::string::npos, description << " has " << absent);
  model.dtype = ComputeType::float16;
  BOOST_CHECK_THROW(check_model(model, 0), UsageError);
}

BOOST_AUTO_TEST_SUITE_END()
