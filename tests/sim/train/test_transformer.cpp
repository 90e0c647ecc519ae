// The transformer's ops against central finite differences in binary64, the
// tied embedding end to end, the autocast formats of attention, the text
// data and the learning-rate schedule.
#include <catch2/catch.hpp>
#include <cmath>

#include "finite_differences.hpp"
#include "rpsim/config/config.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/text.hpp"
#include "rpsim/train/trainer.hpp"

using namespace rpsim;
using namespace rpsim::sim::config;
using namespace rpsim::sim::train;
using namespace rpsim::sim::train::testing;

namespace {

Matrix token_ids(Eigen::Index rows, Eigen::Index cols, int vocabulary, std::uint64_t stream) {
  Matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i)
    m.data()[i] = double(counter_random(5, stream, std::uint64_t(i)) % std::uint64_t(vocabulary));
  return m;
}

nlohmann::json tiny_gpt(const std::string& policy) {
  return {{"name", "tiny"},
          {"seed", 1},
          {"policy", policy},
          {"model", {{"type", "gpt"}, {"n_layer", 1}, {"n_embd", 8}, {"n_head", 2}, {"block_size", 4}}},
          {"data", {{"name", "synthetic-text"}, {"train_limit", 64}, {"test_limit", 8}}},
          {"optimizer", {{"type", "adamw"}, {"lr", 0.01}, {"weight_decay", 0.1}}},
          {"batch_size", 4},
          {"steps", 3},
          {"eval_every", 2},
          {"eval_batch_size", 4},
          {"telemetry", {{"histogram_steps", nlohmann::json::array()}}}};
}

}  // namespace

TEST_CASE("train: Embedding gradients match finite differences", "[train][transformer]") {
  Embedding e("wte", 5, 4, 3);
  e.token.value = random_matrix(5, 3, 1);
  e.position.value = random_matrix(4, 3, 2);
  check_layer(e, token_ids(2, 4, 5, 3), 1e-6, false);
}

TEST_CASE("train: causal self-attention gradients match finite differences", "[train][transformer]") {
  CausalSelfAttention a("attn", 3, 2);
  check_layer(a, random_matrix(2 * 3, 3 * 4, 4, 1.5));
}

TEST_CASE("train: attention is causal", "[train][transformer]") {
  const PrecisionPolicy fp64 = named_policy("fp64");
  const StepContext ctx{&fp64, 0, 0};
  CausalSelfAttention a("attn", 4, 2);
  Matrix x = random_matrix(4, 12, 5);
  const Matrix y0 = a.forward(Tensor{x, &formats::binary64()}, ctx).values;
  x.row(3) *= 3.0;  // the last token's q, k, v
  const Matrix y1 = a.forward(Tensor{x, &formats::binary64()}, ctx).values;
  CHECK(y1.topRows(3) == y0.topRows(3));
  CHECK(y1.row(3) != y0.row(3));
}

TEST_CASE("train: the softmax kernel leaves masked entries out of each row, not in as zeros",
          "[train][transformer]") {
  // rpsim.torch's F.softmax runs these kernels on masked_fill's -inf: row i of the causal softmax must be
  // the softmax of the row's first i + 1 scores alone, in value and gradient, bit for bit.
  const Matrix s = random_matrix(5, 5, 6, 2.0), dp = random_matrix(5, 5, 7);
  const Mask causal = causal_mask(5);
  const Matrix p = softmax_rows(s, formats::binary32(), causal);
  const Matrix ds = softmax_rows_backward(p, dp, formats::binary32(), causal);
  for (Eigen::Index i = 0; i < 5; ++i) {
    const Mask all = Mask::Constant(1, i + 1, true);
    const Matrix pi = softmax_rows(Matrix(s.row(i).head(i + 1)), formats::binary32(), all);
    CHECK(p.row(i).head(i + 1) == pi);
    CHECK(p.row(i).tail(4 - i).isZero(0.0));
    CHECK(ds.row(i).head(i + 1) ==
          softmax_rows_backward(pi, Matrix(dp.row(i).head(i + 1)), formats::binary32(), all));
    CHECK(ds.row(i).tail(4 - i).isZero(0.0));
    CHECK(std::abs(pi.sum() - 1.0) < 1e-6);
  }
}

TEST_CASE("train: a residual block's gradients match finite differences", "[train][transformer]") {
  std::vector<std::unique_ptr<Layer>> body;
  body.push_back(std::make_unique<LayerNorm>("ln", 4));
  auto lin = std::make_unique<Linear>("fc", 4, 4);
  lin->weight.value = random_matrix(4, 4, 6);
  lin->bias.value = random_matrix(1, 4, 7);
  body.push_back(std::move(lin));
  body.push_back(std::make_unique<GELU>("gelu"));
  Residual r("block", std::move(body));
  check_layer(r, random_matrix(3, 4, 8, 2.0));
}

TEST_CASE("train: the tied output projection's gradients match finite differences", "[train][transformer]") {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Embedding>("wte", 5, 2, 3));
  layers.push_back(std::make_unique<LMHead>("head", "wte"));
  for (auto& l : layers) l->link(layers);
  auto& emb = static_cast<Embedding&>(*layers[0]);
  emb.token.value = random_matrix(5, 3, 9);
  // The head alone: d/dx and d/d(token weight) of sum(R .* x W^T).
  const PrecisionPolicy fp64 = named_policy("fp64");
  const StepContext ctx{&fp64, 0, 0};
  const Matrix x0 = random_matrix(3, 3, 10);
  check_layer(*layers[1], x0);
  const Matrix r = random_matrix(3, 5, 99);
  layers[1]->forward(Tensor{x0, &formats::binary64()}, ctx);
  layers[1]->backward(Tensor{r, &formats::binary64()}, ctx, true);
  const Matrix grad = emb.token.grad;
  for (Eigen::Index i = 0; i < grad.size(); ++i) {
    const double keep = emb.token.value.data()[i];
    emb.token.value.data()[i] = keep + 1e-6;
    const double up = objective(*layers[1], x0, r, ctx);
    emb.token.value.data()[i] = keep - 1e-6;
    const double down = objective(*layers[1], x0, r, ctx);
    emb.token.value.data()[i] = keep;
    CHECK(grad.data()[i] == Approx((up - down) / 2e-6).margin(1e-6));
  }
}

TEST_CASE("train: a whole GPT's gradients, tied embedding included, match finite differences",
          "[train][transformer]") {
  const Config config = parse_config(tiny_gpt("fp64"));
  const DataSplit data = load_data(config.data);
  Model m = build_model(config, data.train);
  const StepContext ctx{&config.policy, 0, 0};
  const std::vector<std::size_t> idx{0, 5};
  const Matrix x = data.train.batch(idx);
  const std::vector<int> labels = data.train.targets(idx);
  REQUIRE(labels.size() == 8);
  auto loss = [&] {
    Tensor t{x, &formats::binary64()};
    for (auto& l : m.layers) t = l->forward(t, ctx);
    return m.loss->forward(t, labels, ctx);
  };
  loss();
  Tensor dy = m.loss->backward(1.0, ctx);
  for (std::size_t i = m.layers.size(); i-- > 0;) dy = m.layers[i]->backward(dy, ctx, i > 0);
  for (Parameter* p : m.parameters()) {
    const Matrix g = p->grad;
    REQUIRE(g.size() == p->value.size());
    for (Eigen::Index i = 0; i < p->value.size(); i += 1 + p->value.size() / 7) {
      const double keep = p->value.data()[i];
      p->value.data()[i] = keep + 1e-6;
      const double up = loss();
      p->value.data()[i] = keep - 1e-6;
      const double down = loss();
      p->value.data()[i] = keep;
      INFO(p->name << " entry " << i);
      CHECK(g.data()[i] == Approx((up - down) / 2e-6).margin(1e-7).epsilon(1e-4));
    }
  }
}

TEST_CASE("train: autocast runs attention's products in fp16 and its softmax in fp32",
          "[train][transformer]") {
  const PrecisionPolicy amp = named_policy("fp16-amp");
  CHECK(amp.rule("matmul").compute == &formats::binary16());
  CHECK(amp.rule("softmax").compute == &formats::binary32());
  CHECK(amp.rule("softmax").output == &formats::binary32());
  CHECK(amp.rule("lm_head").compute == &formats::binary16());
  CHECK(amp.rule("add").follow_inputs);
  CHECK(amp.rule("embedding").follow_inputs);
  const StepContext ctx{&amp, 0, 0};
  CausalSelfAttention a("attn", 4, 2);
  const Tensor y =
      a.forward(Tensor{rounded(formats::binary32(), random_matrix(8, 12, 11)), &formats::binary32()}, ctx);
  CHECK(y.format == &formats::binary16());
  CHECK(rounded(formats::binary16(), y.values) == y.values);
  // The residual add promotes: binary32 + binary16 is binary32.
  std::vector<std::unique_ptr<Layer>> body;
  body.push_back(std::make_unique<Linear>("fc", 3, 3));
  Residual r("block", std::move(body));
  CHECK(r.forward(Tensor{random_matrix(2, 3, 12), &formats::binary32()}, ctx).format == &formats::binary32());
  // FP8 policies keep the tied head out of FP8 (TE's output layer).
  CHECK_FALSE(named_policy("fp8").rule("lm_head").scaled_inputs);
  CHECK(named_policy("fp8").rule("linear").scaled_inputs);
}

TEST_CASE("train: text windows, byte vocabulary and next-token targets", "[train][transformer]") {
  DataConfig c;
  c.context = 3;
  std::vector<std::string> entries(10, "ab\n");
  entries[9] = "zz\n";  // every tenth entry is validation text
  const DataSplit s = split_text(entries, c);
  CHECK(s.vocabulary == "\nabz");
  CHECK(s.train.classes == 4);
  REQUIRE(s.train.size() == (9 * 4 - 1) / 3);
  const Matrix x = s.train.batch({0, 1});
  CHECK(x(0, 0) == 1);  // 'a'
  CHECK(x(1, 0) == 0);  // window 1 starts at token 3: '\n'
  const std::vector<int> t = s.train.targets({0});
  CHECK(t == std::vector<int>{2, 0, 0});  // "b\n\n" follows "ab\n"
  CHECK(s.test.tokens.front() == 3);      // 'z'
  CHECK(generated_sentences(3) == generated_sentences(3));
}

TEST_CASE("train: warmup and cosine decay of the learning rate", "[train][transformer]") {
  OptimizerConfig o;
  o.lr = 1.0;
  CHECK(o.lr_at(100) == 1.0);  // no schedule
  o.warmup_steps = 9;
  o.decay_steps = 109;
  o.min_lr = 0.1;
  CHECK(o.lr_at(0) == Approx(0.1));
  CHECK(o.lr_at(8) == Approx(0.9));
  CHECK(o.lr_at(9) == Approx(1.0));
  CHECK(o.lr_at(59) == Approx(0.55));
  CHECK(o.lr_at(109) == Approx(0.1));
  CHECK(o.lr_at(500) == 0.1);
}

TEST_CASE("train: a tiny GPT trains beside its shadow and writes validation losses", "[train][transformer]") {
  const RunResult r = run(parse_config(tiny_gpt("fp32")), RunOptions{});
  REQUIRE(r.steps_done == 3);
  REQUIRE(r.evaluations.size() == 3);  // before step 0, after step 2, at the end
  for (const auto& e : r.evaluations)
    CHECK(e.test_loss_nats == Approx(e.shadow_test_loss_nats).epsilon(1e-4));
  CHECK(r.evaluations_csv.rfind("step,epoch,test_loss_emulated_nats,test_loss_fp64_nats", 0) == 0);
  CHECK(r.steps_csv.find("h0_attn_weight_grad_underflow_fraction") != std::string::npos);
  CHECK(r.steps_csv.find("wte_weight_grad_underflow_fraction") != std::string::npos);
}

TEST_CASE("train: model and data tables reject mismatches naming the key", "[train][transformer]") {
  auto j = tiny_gpt("fp32");
  j["data"]["name"] = "synthetic";
  CHECK_THROWS_WITH(run(parse_config(j), RunOptions{}), Catch::Contains("model.type: gpt needs a text"));
  j["model"]["type"] = "transformer";
  CHECK_THROWS_WITH(parse_config(j), Catch::Contains("mlp, cnn, gpt, layers"));
  auto k = tiny_gpt("fp32");
  k["model"]["n_head"] = 3;
  CHECK_THROWS_WITH(run(parse_config(k), RunOptions{}), Catch::Contains("model.n_embd"));
  k["data"]["name"] = "wikipedia";
  CHECK_THROWS_WITH(parse_config(k), Catch::Contains("fortunes"));
}
