// model.gradient_checkpointing: the layers run again in the backward instead of keeping their activations, and every
// gradient is the one a kept graph gives, to the bit: a scratch model, Gemma 2 (sandwich norms, a window, soft caps)
// in float32 and bfloat16, LoRA (the first layer's input takes no gradient, its adapters do), a frozen first layer.
#include "arclight/model/policy.hpp"

#include "../temp_dir.hpp"
#include "test_models.hpp"

#include <boost/test/unit_test.hpp>
#include <torch/autograd.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

using namespace arclight;
using namespace arclight::model;

namespace {

const std::string tiny_gemma2 = R"({"architectures": ["Gemma2ForCausalLM"], "vocab_size": 40, "hidden_size": 16,
    "intermediate_size": 24, "num_hidden_layers": 3, "num_attention_heads": 2, "num_key_value_heads": 1,
    "head_dim": 8, "query_pre_attn_scalar": 8, "sliding_window": 4, "max_position_embeddings": 128,
    "attn_logit_softcapping": 5.0, "final_logit_softcapping": 8.0})";

// The nodes of the graph behind `output` that recompute a layer.
int recomputing_nodes(const torch::Tensor& output) {
  std::vector<torch::autograd::Node*> todo{output.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  int found = 0;
  while (!todo.empty()) {
    torch::autograd::Node* node = todo.back();
    todo.pop_back();
    if (!node || !seen.insert(node).second) continue;
    if (node->name().find("LayerRecompute") != std::string::npos) ++found;
    for (const auto& edge : node->next_edges()) todo.push_back(edge.function.get());
  }
  return found;
}

struct Gradients {
  std::vector<float> values;  // each trainable parameter's, one after another
  int recomputing_nodes = 0;
};

// The loss's figures' gradients after a backward of a fixed mix of the log-probs and entropies of two rows of 12
// tokens; `prepare` may freeze parameters first.
Gradients gradients(const ModelConfig& config, const std::function<void(Policy&)>& prepare = {}) {
  Policy policy(config, 20, 3);
  if (prepare) prepare(policy);
  torch::manual_seed(11);
  const auto tokens = torch::randint(0, 20, {2, 12});
  const auto temperatures = torch::rand({2, 12}) + 0.5;
  const auto d_logprobs = torch::randn({2, 11}), d_entropy = torch::randn({2, 11});
  policy.zero_gradients();
  std::vector<const float*> views;  // the flat buffer's: the nested backward accumulates into them in place
  for (const FloatBuffer& g : policy.gradient_buffers()) views.push_back(g.data);
  torch::Tensor entropy;
  const auto logprobs = policy.token_logprobs(tokens, temperatures, &entropy);
  Gradients out;
  out.recomputing_nodes = recomputing_nodes(logprobs);
  ((logprobs * d_logprobs).sum() + (entropy * d_entropy).sum()).backward();
  const std::vector<FloatBuffer> after = policy.gradient_buffers();
  for (std::size_t i = 0; i < after.size(); ++i) {
    BOOST_TEST((after[i].data == views[i]));
    out.values.insert(out.values.end(), after[i].data, after[i].data + after[i].size);
  }
  return out;
}

ModelConfig recomputing(ModelConfig config) {
  config.gradient_checkpointing = true;
  return config;
}

double largest(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::abs(x)));
  return m;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(layer_recompute)

BOOST_AUTO_TEST_CASE(recomputed_layers_give_the_kept_graphs_gradients_to_the_bit) {
  TempDir dir;
  write_random_hf_model(dir, tiny_gemma2);
  ModelConfig bf16 = hf_model(dir);
  bf16.dtype = ComputeType::bfloat16;
  for (const auto& [name, config] :
       {std::pair{"scratch", small()}, {"Gemma 2", hf_model(dir)}, {"Gemma 2 bf16", bf16}}) {
    BOOST_TEST_CONTEXT(name) {
      const auto kept = gradients(config), recomputed = gradients(recomputing(config));
      BOOST_TEST(kept.recomputing_nodes == 0);
      BOOST_TEST(recomputed.recomputing_nodes == (config.source == ModelSource::hf ? 3 : 2));  // one a layer
      BOOST_TEST(largest(kept.values) > 1e-3);
      BOOST_TEST(kept.values == recomputed.values);
    }
  }
}

// LoRA freezes the embeddings: the first layer's input takes no gradient, yet its adapters' do. A frozen first layer:
// the second's input takes none and its parameters do.
BOOST_AUTO_TEST_CASE(a_layer_whose_input_takes_no_gradient_still_trains) {
  TempDir dir;
  write_random_hf_model(dir, tiny_gemma2);
  ModelConfig lora = hf_model(dir);
  lora.lora_rank = 2;
  lora.lora_targets = {"q", "v", "down"};
  const auto kept = gradients(lora), recomputed = gradients(recomputing(lora));
  BOOST_TEST(recomputed.recomputing_nodes == 3);
  BOOST_TEST(largest(kept.values) > 1e-3);
  BOOST_TEST(kept.values == recomputed.values);

  const auto freeze_first_layer = [](Policy& policy) {
    const auto names = policy.parameter_names();
    const auto parameters = policy.parameters();
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i].rfind("model.embed_tokens.", 0) == 0 || names[i].rfind("model.layers.0.", 0) == 0)
        parameters[i].set_requires_grad(false);
  };
  const auto frozen_kept = gradients(hf_model(dir), freeze_first_layer);
  const auto frozen_recomputed = gradients(recomputing(hf_model(dir)), freeze_first_layer);
  BOOST_TEST(frozen_recomputed.recomputing_nodes == 2);  // the first layer needs no backward: it runs as it is
  BOOST_TEST(largest(frozen_kept.values) > 1e-3);
  BOOST_TEST(frozen_kept.values == frozen_recomputed.values);
}

// A backward that would make a graph of the gradients (create_graph), which a recomputed layer cannot, is refused with
// a message instead of answering without that graph.
BOOST_AUTO_TEST_CASE(a_graph_of_the_gradients_is_refused) {
  Policy policy(recomputing(small()), 20, 3);
  const auto logprobs = policy.token_logprobs(torch::randint(0, 20, {1, 6}), torch::ones({1, 6}));
  BOOST_CHECK_EXCEPTION(
      torch::autograd::grad({logprobs.sum()}, {policy.parameters().front()}, {}, true, true), std::exception,
      [](const std::exception& e) { return std::string(e.what()).find("create_graph") != std::string::npos; });
}

BOOST_AUTO_TEST_SUITE_END()
