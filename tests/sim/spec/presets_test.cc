// The bundled presets (sim/spec/presets.h): listing every kind, resolving names, and the errors.
#include "sim/spec/presets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "sim/core/error.h"

namespace moesim {
namespace {

const std::filesystem::path kRoot = MOESIM_SOURCE_DIR;

const PresetInfo* find(const std::vector<PresetInfo>& list, const std::string& name) {
  const auto it = std::find_if(list.begin(), list.end(), [&](const PresetInfo& p) { return p.name == name; });
  return it == list.end() ? nullptr : &*it;
}

TEST(Presets, EveryKindListsItsFilesWithSizeAndSource) {
  const std::vector<PresetInfo> models = list_presets(kRoot, PresetKind::kModel);
  const PresetInfo* ds = find(models, "deepseek-v3");
  ASSERT_NE(ds, nullptr);
  EXPECT_EQ(ds->title, "DeepSeek-V3");
  EXPECT_EQ(ds->size, "256 experts top-8, d_model 7168, 61 layers, 1 shared, 671.0B parameters");
  const PresetInfo* llama = find(models, "llama-3-70b");
  ASSERT_NE(llama, nullptr);
  EXPECT_EQ(llama->size, "dense, d_model 8192, 80 layers, 70.6B parameters");
  EXPECT_NE(ds->source.find("arXiv:2412.19437"), std::string::npos);
  EXPECT_TRUE(std::is_sorted(models.begin(), models.end(),
                             [](const PresetInfo& a, const PresetInfo& b) { return a.name < b.name; }));

  const std::vector<PresetInfo> clusters = list_presets(kRoot, PresetKind::kCluster);
  const PresetInfo* adira = find(clusters, "adira-8x-dgx-a100");
  ASSERT_NE(adira, nullptr);
  EXPECT_EQ(adira->size.rfind("8 nodes x 8 = 64 x ", 0), 0u) << adira->size;
  const std::vector<PresetInfo> nodes = list_presets(kRoot, PresetKind::kNode);
  const PresetInfo* node = find(nodes, "hgx-h100");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->size.rfind("8 x ", 0), 0u) << node->size;
  const std::vector<PresetInfo> gpus = list_presets(kRoot, PresetKind::kGpu);
  ASSERT_NE(find(gpus, "h100-sxm5"), nullptr);
  EXPECT_NE(find(gpus, "h100-sxm5")->size.find("80.0 GiB"), std::string::npos) << find(gpus, "h100-sxm5")->size;
  for (PresetKind k : {PresetKind::kModel, PresetKind::kGpu, PresetKind::kNode, PresetKind::kCluster})
    for (const PresetInfo& p : list_presets(kRoot, k)) EXPECT_FALSE(p.source.empty()) << p.path << " cites no source";
}

TEST(Presets, NamesResolveToTheBundledFilesAndPathsStayAsGiven) {
  EXPECT_EQ(std::filesystem::path(resolve_model_arg("deepseek-v3", "--model")).filename(), "deepseek-v3.yaml");
  EXPECT_EQ(std::filesystem::path(resolve_hardware_arg("dgx-a100", "--hardware")).parent_path().filename(), "nodes");
  EXPECT_EQ(std::filesystem::path(resolve_hardware_arg("adira-8x-dgx-a100", "--hardware")).parent_path().filename(),
            "clusters");
  EXPECT_EQ(std::filesystem::path(resolve_hardware_arg("h100-sxm5", "--hardware")).parent_path().filename(), "gpus");
  EXPECT_EQ(resolve_model_arg("models/none.yaml", "--model"), "models/none.yaml");  // the loader names it
  EXPECT_EQ(resolve_hardware_arg("./x", "--hardware"), "./x");
}

TEST(Presets, AnUnknownNameNamesTheFlagAndTheClosestPresets) {
  try {
    resolve_model_arg("deepseek-v4", "--model");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--model 'deepseek-v4' is neither a file nor the name of a bundled model; closest: deepseek-v3"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("moesim presets models"), std::string::npos) << m;
  }
  EXPECT_THROW(resolve_hardware_arg("dgx-z100", "--hardware"), InputError);
}

TEST(Presets, DataDirFromTheEnvironment) {
  ::setenv("MOESIM_DATA_DIR", kRoot.c_str(), 1);
  EXPECT_EQ(preset_root(), kRoot);
  ::setenv("MOESIM_DATA_DIR", "/nonexistent-moesim-data", 1);
  EXPECT_THROW(preset_root(), InputError);
  ::unsetenv("MOESIM_DATA_DIR");
}

}  // namespace
}  // namespace moesim
