// The accumulation-kind table (accumulation_kinds.hpp): every row parses its
// spec, writes it back, and builds the same model from JSON; names, help and
// errors come from the rows.
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/accumulation_kinds.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"

using namespace rpsim;
using namespace rpsim::sim;

namespace {

// A spec string and the JSON object naming the same model.
struct Example {
  const char* spec;
  const char* json;
};

// Examples per row name: a new row without one fails the first test below.
const std::map<std::string, std::vector<Example>>& examples() {
  static const std::map<std::string, std::vector<Example>> table{
      {"sequential",
       {{"sequential:bf16:sr:seed=7", R"({"kind":"sequential","format":"bf16","rounding":"sr","seed":7})"},
        {"recursive", R"({"kind":"recursive"})"}}},
      {"fma", {{"fma:fp16:rtz", R"({"kind":"fma","format":"fp16","rounding":"rtz"})"}}},
      {"pairwise", {{"pairwise:fp16", R"({"kind":"pairwise","format":"fp16"})"}}},
      {"blocked",
       {{"blocked:8:bf16:rtz", R"({"kind":"blocked","block":8,"format":"bf16","rounding":"rtz"})"},
        {"blocked:32", R"({"kind":"blocked"})"}}},
      {"kahan", {{"compensated:fp16", R"({"kind":"kahan","format":"fp16"})"}}},
      {"exact",
       {{"exact", R"({"kind":"exact"})"},
        {"exact:fp32:rd", R"({"kind":"exact","format":"fp32","rounding":"rd"})"}}},
      {"tc",
       {{"tc:h100", R"({"kind":"tc","preset":"h100"})"},
        {"tc:ada:e4m3:fp16:c_join=after_products:step_interleave=2",
         R"({"kind":"tc","preset":"ada","input":"e4m3","output":"fp16","c_join":"after_products",
             "step_interleave":2})"},
        {"tc:h100:e4m3:fp32:wgmma:input_b=e5m2",
         R"({"kind":"tc","preset":"h100","input":"e4m3","output":"fp32","instruction":"wgmma",
             "input_b":"e5m2"})"},
        {"tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0",
         R"({"kind":"tc","preset":"b200","input":"e4m3","output":"fp32","instruction":"tcgen05.mma",
             "scale":"ue8m0"})"}}},
      {"kernel",
       {{"kernel:h100:tf32:fp32:stored=binary32:split_k=8",
         R"({"kind":"kernel","gpu":"h100","input":"tf32","output":"fp32","stored":"fp32","split_k":8})"},
        {"kernel:h100:e4m3:fp32:wgmma:promotion=4",
         R"({"kind":"kernel","gpu":"h100","input":"e4m3","output":"fp32","instruction":"wgmma","promotion":4})"},
        {"kernel:h100:fp16:fp32", R"({"kind":"kernel","gpu":"h100","input":"fp16","output":"fp32"})"},
        // Issue #40's fields: the split-K merge, CUTLASS's residue tile, a CUDA-core order.
        {"kernel:h100:fp16:fp16:split_k=3:split_tile=8:residue_tile=32:merge=serial:terms_per_step=8",
         R"({"kind":"kernel","gpu":"h100","input":"fp16","output":"fp16","split_k":3,"split_tile":8,
             "residue_tile":32,"merge":"serial","terms_per_step":8})"},
        {"kernel:h100:fp16:fp32:simt=gemv:simt_threads=32:simt_vector=4:simt_combine=butterfly",
         R"({"kind":"kernel","gpu":"h100","input":"fp16","output":"fp32","simt":"gemv","simt_threads":32,
             "simt_vector":4,"simt_combine":"butterfly"})"}}},
      {"cublas",
       {{"cublas:h100:bf16:bf16:rpr=1",
         R"({"kind":"cublas","gpu":"h100","input":"bf16","output":"bf16","rpr":1})"},
        {"cublas:h100:tf32:fp32", R"({"kind":"cublas","gpu":"h100","input":"tf32","output":"fp32"})"}}},
      {"eigen", {{"eigen:fp64:rne", R"({"kind":"eigen"})"}}},
  };
  return table;
}

// Values of every input format above (e4m3 included), so that any model
// reads them exactly.
const std::vector<double> kA{1, 0.5, 0.25, -1, 2, 0.125, -0.5, 1.5, 3, -0.75, 0.375, 1};
const std::vector<double> kB{0.25, 0.125, 2, 0.0625, -1, 1.5, 0.5, -3, 0.5, 1, -0.25, 0.75};

}  // namespace

TEST_CASE("every accumulation kind round-trips: spec -> model -> spec, JSON -> model equals spec -> model",
          "[accumulation][kinds]") {
  for (const AccumulationKind& kind : accumulation_kinds()) {
    INFO(kind.name);
    REQUIRE(examples().count(kind.name) == 1);
    for (const Example& e : examples().at(kind.name)) {
      INFO(e.spec);
      const AccumulationModel m = AccumulationModel::parse(e.spec);
      CHECK(std::string(accumulation_kind_of(m).name) == kind.name);
      const AccumulationModel again = AccumulationModel::parse(m.spec());
      CHECK(again.spec() == m.spec());
      CHECK(std::string(accumulation_kind_of(again).name) == kind.name);
      const AccumulationModel j = AccumulationModel::from_json(nlohmann::json::parse(e.json));
      CHECK(j.spec() == m.spec());
      CHECK(j.output_format() == m.output_format());
      CHECK(j.rounding() == m.rounding());
      // Block-scaled instructions take their scales in GEMM only.
      if (const TensorCoreModel* tc = m.bare_instruction(); tc && tc->scale_block > 0) continue;
      CHECK(again.dot(kA, kB, 0.25) == m.dot(kA, kB, 0.25));
      CHECK(j.dot(kA, kB, 0.25) == m.dot(kA, kB, 0.25));
    }
  }
  CHECK(examples().size() == accumulation_kinds().size());
}

TEST_CASE("a bare Tensor Core instruction is a schedule from the moment it is parsed",
          "[accumulation][kinds][tc]") {
  const auto tc = AccumulationModel::parse("tc:h100:fp16:fp32");
  REQUIRE(std::holds_alternative<KernelSchedule>(tc.variant()));
  REQUIRE(tc.bare_instruction() != nullptr);
  CHECK(tc.bare_instruction()->preset == "h100");
  CHECK(tc.spec() == "tc:h100:binary16:binary32");
  // A model built from the instruction itself is the same model.
  const AccumulationModel built(tensor_core_preset("h100", formats::binary16(), formats::binary32()));
  CHECK(built.spec() == tc.spec());
  CHECK(built.dot(kA, kB, 0.25) == tc.dot(kA, kB, 0.25));
  // The kernel over the same instruction names its GPU: a kernel, not a bare instruction.
  const auto kernel = AccumulationModel::parse("kernel:h100:fp16:fp32");
  CHECK(kernel.bare_instruction() == nullptr);
  CHECK(std::string(accumulation_kind_of(kernel).name) == "kernel");
  CHECK(kernel.spec() == "kernel:h100:binary16:binary32");
}

TEST_CASE("accumulation kinds: names, aliases, help and errors come from the table",
          "[accumulation][kinds]") {
  CHECK(std::string(find_accumulation_kind("recursive")->name) == "sequential");
  CHECK(std::string(find_accumulation_kind("compensated")->name) == "kahan");
  CHECK(std::string(find_accumulation_kind("cublas")->name) == "cublas");
  CHECK(find_accumulation_kind("cublass") == nullptr);
  CHECK(find_accumulation_kind("") == nullptr);
  const std::string help = accumulation_kind_help();
  for (const AccumulationKind& kind : accumulation_kinds()) {
    INFO(kind.name);
    CHECK(help.find(kind.usage) != std::string::npos);
    CHECK(help.find(kind.help) != std::string::npos);
  }
  CHECK_THROWS_WITH(AccumulationModel::parse("magic"), Catch::Contains(accumulation_kind_names()));
  CHECK_THROWS_WITH(AccumulationModel::from_json(nlohmann::json::parse(R"({"kind":"magic"})")),
                    Catch::Contains("'magic'") && Catch::Contains(accumulation_kind_names()));
  CHECK_THROWS_WITH(
      AccumulationModel::from_json(nlohmann::json::parse(R"({"kind":"tc","preset":"h100","seed":3})")),
      Catch::Contains("tc takes no seed"));
  CHECK_THROWS_WITH(AccumulationModel::parse("cublas"), Catch::Contains("unknown kernel preset"));
}

TEST_CASE("accumulation errors are typed and wrapped once", "[accumulation][kinds]") {
  // A field's own error, wrapped by the kind's parser with the spec: one
  // prefix, whichever layer threw.
  for (const char* spec :
       {"tc:h100:fp16:fp32:fraction_bits=x", "tc:h100:fp16:fp32:terms=8", "kernel:h100:fp16:fp32:split_k=x",
        "kernel:h100:fp16:fp99", "cublas:h100:fp16:fp16:rpr=2", "blocked:0", "sequential:fp32:rnx",
        "tc:h100:fp99"}) {
    INFO(spec);
    try {
      AccumulationModel::parse(spec);
      FAIL("parsed");
    } catch (const AccumulationSpecError& e) {
      const std::string what = e.what();
      CHECK(what.starts_with(std::string("accumulation model '") + spec + "': "));
      CHECK(what.find("accumulation model '", 1) == std::string::npos);
    }
  }
  CHECK_THROWS_AS(AccumulationModel::from_json(nlohmann::json::parse(
                      R"({"kind":"kernel","gpu":"h100","input":"fp16","output":"fp32","split_k":"x"})")),
                  AccumulationSpecError);
  CHECK_THROWS_WITH(AccumulationModel::from_json(nlohmann::json::parse(
                        R"({"kind":"kernel","gpu":"h100","input":"fp16","output":"fp32","split_k":"x"})")),
                    Catch::Contains("split_k"));
  CHECK_THROWS_WITH(AccumulationModel::from_json(nlohmann::json::parse(R"({"kind":"tc","preset":3})")),
                    Catch::Contains("field 'preset' must be a string"));
  CHECK_THROWS_AS(AccumulationModel::from_json(nlohmann::json(3)), AccumulationSpecError);
}

TEST_CASE("accumulation kinds carry the run plan's cost per multiply-add", "[accumulation][kinds]") {
  // run_plan.cpp's measured figures: native binary32/binary64 free, narrower
  // sequential 23 ns, the bare Tensor Core chain 2.6 ns, other emulation 250 ns.
  CHECK(AccumulationModel::parse("sequential:fp32").plan_seconds_per_multiply_add() == 0);
  CHECK(AccumulationModel::parse("fma:fp64").plan_seconds_per_multiply_add() == 0);
  CHECK(AccumulationModel::parse("sequential:bf16").plan_seconds_per_multiply_add() == 23e-9);
  CHECK(AccumulationModel::parse("sequential:bf16:sr").plan_seconds_per_multiply_add() == 250e-9);
  CHECK(AccumulationModel::parse("tc:h100:bf16:fp32").plan_seconds_per_multiply_add() == 2.6e-9);
  CHECK(AccumulationModel::parse("kernel:h100:bf16:fp32").plan_seconds_per_multiply_add() == 250e-9);
  CHECK(AccumulationModel::parse("cublas:h100:bf16:bf16").plan_seconds_per_multiply_add() == 250e-9);
  CHECK(AccumulationModel::parse("pairwise").plan_seconds_per_multiply_add() == 250e-9);
  CHECK(AccumulationModel::parse("eigen").plan_seconds_per_multiply_add() == 0);
}
