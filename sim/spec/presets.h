// The bundled presets (models/*.yaml, hardware/{gpus,nodes,clusters}/*.yaml): where they are, what
// each one is, and picking one by name.
//
// A preset's name is its file name without .yaml (`deepseek-v3`, `dgx-a100`, `adira-8x-dgx-a100`).
// The folder holding models/ and hardware/ is, in this order: $MOESIM_DATA_DIR; share/moesim
// beside the installed binary (`cmake --install`); the source tree the binary was built from.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace moesim {

enum class PresetKind { kModel, kGpu, kNode, kCluster };
std::string_view to_string(PresetKind k);  // "models", "gpus", "nodes", "clusters"

struct PresetInfo {
  PresetKind kind = PresetKind::kModel;
  std::string name;    // the file stem: what --model / --hardware accept
  std::string path;    // the file
  std::string title;   // the file's `name:`
  std::string size;    // one phrase: experts and layers, memory, GPUs
  std::string source;  // the file's `source:`
};

// The data folder (see above); InputError naming the places tried when none holds the presets.
std::filesystem::path preset_root();

// Every preset of `kind` under `root`, sorted by name. Each file is loaded with the validating
// loaders, so a broken preset is an InputError naming it.
std::vector<PresetInfo> list_presets(const std::filesystem::path& root, PresetKind kind);

// A --model argument: an existing file as given, else the bundled model of that name. InputError
// naming `flag`, the name and the closest preset names when it is neither.
std::string resolve_model_arg(const std::string& arg, const std::string& flag);
// A --hardware argument: an existing file, else a bundled cluster, node or GPU of that name.
std::string resolve_hardware_arg(const std::string& arg, const std::string& flag);

}  // namespace moesim
