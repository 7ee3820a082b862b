#include "runtime/comm/process_group.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/program_folder.h"

namespace moesim::runtime {

bool started_by_mpi_launcher() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

bool agree_on_input(ProcessGroup* group, const std::string& error) {
  if (group == nullptr || group->size() == 1) {
    if (!error.empty()) throw InputError(error);
    return true;
  }
  if (group->all_true(error.empty())) return true;
  int root_failed = group->rank() == 0 && !error.empty() ? 1 : 0;
  group->broadcast(&root_failed, sizeof root_failed, 0);
  if (!error.empty() && group->rank() == 0) throw InputError(error);
  if (!error.empty() && root_failed == 0) throw InputError("process " + std::to_string(group->rank()) + ": " + error);
  return false;
}

namespace {

namespace fs = std::filesystem;

#ifdef MOESIM_HAVE_MPI
constexpr bool kBuiltWithMpi = true;  // the plugin is built beside the programs
#else
constexpr bool kBuiltWithMpi = false;
#endif

// The plugin's file name and the function it exports (mpi_plugin.cc).
constexpr const char* kPluginFile = "libmoesim_mpi.so";
constexpr const char* kPluginFactory = "moesim_mpi_world_create";

// Where the plugin is: beside the program (the build tree) or in ../lib of it (an installed tree,
// bin/ and lib/, where the programs' RPATH looks too).
std::vector<fs::path> plugin_places() {
  const fs::path bin = program_folder();
  if (bin.empty()) return {};
  return {bin / kPluginFile, bin.parent_path() / "lib" / kPluginFile};
}

// Several processes started without a way to work together would each run the whole job alone:
// refused, naming why. One process alone (mpirun -np 1) runs as without a launcher.
std::unique_ptr<ProcessGroup> no_mpi_world(const std::string& why, const std::string& remedy) {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && std::atoi(v) > 1)
      throw InputError(std::string("this process was started by an MPI launcher (") + var + "=" + v + ") but " +
                       why + ", so the processes cannot work together; " + remedy);
  }
  return nullptr;
}

std::unique_ptr<ProcessGroup> open_plugin(const fs::path& plugin) {
  // RTLD_GLOBAL: Open MPI loads components of its own that need libmpi's symbols in the global scope.
  void* handle = dlopen(plugin.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) throw InputError("cannot load the MPI plugin " + plugin.string() + ": " + dlerror());
  // Never closed: the world's code lives in it until the process ends.
  void* create = dlsym(handle, kPluginFactory);
  if (create == nullptr)
    throw InputError(plugin.string() + " is not moesim's MPI plugin (it has no " + kPluginFactory + ")");
  return std::unique_ptr<ProcessGroup>(reinterpret_cast<ProcessGroup* (*)()>(create)());
}

}  // namespace

std::unique_ptr<ProcessGroup> launched_process_group() { return launched_process_group(plugin_places()); }

std::unique_ptr<ProcessGroup> launched_process_group(const std::vector<fs::path>& places) {
  if (!started_by_mpi_launcher()) return nullptr;
  if (!kBuiltWithMpi)
    return no_mpi_world("this build of moesim has no MPI support (MOESIM_WITH_MPI=OFF, or no MPI was found)",
                        "rebuild with MPI or run one process without mpirun");
  std::string tried;
  for (const fs::path& plugin : places) {
    std::error_code ec;
    if (fs::exists(plugin, ec)) return open_plugin(plugin);
    tried += (tried.empty() ? "" : ", ") + plugin.string();
  }
  return no_mpi_world("moesim's MPI plugin is missing (tried " + tried + ")",
                      "install moesim with its lib/ folder (cmake --install) or run one process without mpirun");
}

}  // namespace moesim::runtime
