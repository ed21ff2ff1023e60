// The Janus tensor map (JanusSpec: the one list that validates and loads a
// checkpoint) against the tensors PyTorch's modules define (LlamaForCausalLM +
// tools/janus_torch VQModel, recorded in checkpoint_golden.json), and
// ValidateTensors' errors.
#include "engine/families/janus/janus_spec.h"

#include <map>
#include <set>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/tests/test_files.h"
#include "engine/model/weight_source.h"
#include "engine/vq/vq_tensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace argen::janus {
namespace {

using checkpoint::Checkpoint;

using checkpoint::testing::RawTensor;
using checkpoint::testing::ReadBytes;
using checkpoint::testing::ScratchDir;
using checkpoint::testing::TinyCheckpoint;
using checkpoint::testing::TinyDir;
using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// Tensors a Janus checkpoint has that generation never reads.
bool NotForGeneration(const std::string& name) {
  return StartsWith(name, "vision_model.") || StartsWith(name, "aligner.") || name == "language_model.lm_head.weight" ||
         StartsWith(name, "gen_vision_model.encoder.") || StartsWith(name, "gen_vision_model.quant_conv.") ||
         name == "gen_vision_model.quantize.codebook_used";
}

class GenerationTensorsTiny : public ::testing::TestWithParam<std::string> {};

TEST_P(GenerationTensorsTiny, ListIsExactlyWhatPyTorchDefinesForGeneration) {
  auto config = LoadJanusConfig(TinyCheckpoint(GetParam()));
  ASSERT_TRUE(config.ok()) << config.status();
  const json golden = json::parse(ReadBytes(TinyDir() + "/checkpoint_golden.json"))["variants"][GetParam()]["tensors"];
  absl::StatusOr<model::ModelSpec> spec = JanusSpec(*config);
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::map<std::string, std::vector<int64_t>> expected;
  for (const model::TensorRef* e : model::AllTensors(*spec)) {
    EXPECT_TRUE(expected.emplace(e->name, e->shape).second) << "listed twice: " << e->name;
  }
  for (const auto& [name, shape] : expected) {
    ASSERT_TRUE(golden.contains(name)) << name << " is not a tensor of the PyTorch modules";
    EXPECT_EQ(golden[name]["shape"].get<std::vector<int64_t>>(), shape) << name;
  }
  for (const auto& [name, g] : golden.items()) {
    EXPECT_EQ(expected.count(name), NotForGeneration(name) ? 0u : 1u)
        << name << (NotForGeneration(name) ? " should not be needed" : " is missing from the list");
  }
}

TEST_P(GenerationTensorsTiny, ValidateAcceptsTinyCheckpoint) {
  auto config = LoadJanusConfig(TinyCheckpoint(GetParam()));
  ASSERT_TRUE(config.ok());
  auto ckpt = Checkpoint::Open(TinyCheckpoint(GetParam()));
  ASSERT_TRUE(ckpt.ok());
  absl::StatusOr<model::ModelSpec> spec = JanusSpec(*config);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(model::ValidateTensors(**ckpt, *spec).ok()) << model::ValidateTensors(**ckpt, *spec);
}

INSTANTIATE_TEST_SUITE_P(Tiny, GenerationTensorsTiny, ::testing::Values("tiny-mha", "tiny-gqa-sharded"));

TEST(GenerationTensors, OfficialVq16DecoderLayout) {
  vq::Vq16Config vq;  // official defaults: ch 128, ch_mult [1,1,2,2,4], 2 res blocks
  std::map<std::string, std::vector<int64_t>> t;
  for (const vq::VqTensor& e : vq::VqDecoderTensors(vq)) t[e.name] = e.shape;
  const std::string d = "gen_vision_model.decoder.";
  EXPECT_EQ(t.at("gen_vision_model.quantize.embedding.weight"), (std::vector<int64_t>{16384, 8}));
  EXPECT_EQ(t.at("gen_vision_model.post_quant_conv.weight"), (std::vector<int64_t>{256, 8, 1, 1}));
  EXPECT_EQ(t.at(d + "conv_in.weight"), (std::vector<int64_t>{512, 256, 3, 3}));
  EXPECT_EQ(t.at(d + "mid.1.proj_out.weight"), (std::vector<int64_t>{512, 512, 1, 1}));
  EXPECT_EQ(t.at(d + "conv_blocks.0.attn.2.q.weight"), (std::vector<int64_t>{512, 512, 1, 1}));  // 3 attn at 24x24
  EXPECT_EQ(t.count(d + "conv_blocks.1.attn.0.q.weight"), 0u);
  EXPECT_EQ(t.at(d + "conv_blocks.1.res.0.nin_shortcut.weight"), (std::vector<int64_t>{256, 512, 1, 1}));
  EXPECT_EQ(t.count(d + "conv_blocks.1.res.1.nin_shortcut.weight"), 0u);
  EXPECT_EQ(t.at(d + "conv_blocks.3.upsample.conv.weight"), (std::vector<int64_t>{128, 128, 3, 3}));
  EXPECT_EQ(t.count(d + "conv_blocks.4.upsample.conv.weight"), 0u);  // full resolution: no upsample
  EXPECT_EQ(t.at(d + "conv_blocks.4.res.2.conv2.weight"), (std::vector<int64_t>{128, 128, 3, 3}));
  EXPECT_EQ(t.at(d + "conv_out.weight"), (std::vector<int64_t>{3, 128, 3, 3}));
  EXPECT_EQ(t.at(d + "norm_out.bias"), (std::vector<int64_t>{128}));
}

// Rewrites tiny-mha's model.safetensors in a scratch copy through `edit`.
class EditedCheckpoint : public ::testing::Test {
 protected:
  template <typename Edit>
  void Make(Edit edit) {
    checkpoint::testing::CopyDir(TinyCheckpoint("tiny-mha"), dir_.path());
    std::vector<RawTensor> tensors = checkpoint::testing::ReadAll(dir_.File("model.safetensors"));
    edit(tensors);
    checkpoint::testing::WriteBytes(dir_.File("model.safetensors"), checkpoint::testing::SafetensorsBytes(tensors));
  }
  absl::Status Validate() {
    auto config = LoadJanusConfig(dir_.path());
    if (!config.ok()) return config.status();
    auto ckpt = Checkpoint::Open(dir_.path());
    if (!ckpt.ok()) return ckpt.status();
    absl::StatusOr<model::ModelSpec> spec = JanusSpec(*config);
    if (!spec.ok()) return spec.status();
    return model::ValidateTensors(**ckpt, *spec);
  }
  ScratchDir dir_;
};

TEST_F(EditedCheckpoint, UnderstandingModulesAndLmHeadAreNotNeeded) {
  Make(
      [](std::vector<RawTensor>& t) { std::erase_if(t, [](const RawTensor& r) { return NotForGeneration(r.name); }); });
  EXPECT_TRUE(Validate().ok()) << Validate();
}

TEST_F(EditedCheckpoint, MissingTensorIsNamed) {
  Make([](std::vector<RawTensor>& t) {
    std::erase_if(t, [](const RawTensor& r) { return r.name == "gen_vision_model.decoder.mid.1.q.weight"; });
  });
  absl::Status s = Validate();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'gen_vision_model.decoder.mid.1.q.weight'"));
}

TEST_F(EditedCheckpoint, MisShapedTensorNamesTensorExpectedAndActual) {
  Make([](std::vector<RawTensor>& t) {
    for (RawTensor& r : t) {
      if (r.name == "gen_head.vision_head.weight") r.shape = {32, 128};  // same bytes, wrong shape
    }
  });
  absl::Status s = Validate();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("model.safetensors"), HasSubstr("'gen_head.vision_head.weight'"),
                    HasSubstr("has shape [32, 128]"), HasSubstr("expected [64, 64]")));
}

TEST_F(EditedCheckpoint, GqaShapesAreCheckedAgainstKvHeads) {
  // tiny-mha's k_proj is [64, 64]; a GQA-shaped [32, 64] k_proj contradicts its config.
  Make([](std::vector<RawTensor>& t) {
    for (RawTensor& r : t) {
      if (r.name == "language_model.model.layers.1.self_attn.k_proj.weight") {
        r.shape = {32, 64};
        r.bytes.resize(r.bytes.size() / 2);
      }
    }
  });
  absl::Status s = Validate();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("layers.1.self_attn.k_proj.weight"), HasSubstr("[32, 64]"), HasSubstr("[64, 64]")));
}

}  // namespace
}  // namespace argen::janus
