// A C++ client of the PJRT C API. No torch headers here: this layer is tested
// on its own against a real plugin (pjrt_test.cc).
//
// Every call into the plugin goes through one checking path that turns a
// PJRT_Error into pjrt::Error (message, code and the name of the call), so an
// error path is never forgotten.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

struct PJRT_Api;
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_Buffer;
struct PJRT_Event;
struct PJRT_LoadedExecutable;

namespace tpu::pjrt {

// Numbering equals PJRT_Buffer_Type, so conversion is a cast.
enum class ElementType : int {
  INVALID = 0, PRED = 1, S8 = 2, S16 = 3, S32 = 4, S64 = 5, U8 = 6, U16 = 7,
  U32 = 8, U64 = 9, F16 = 10, F32 = 11, F64 = 12, BF16 = 13, C64 = 14, C128 = 15,
  F8E5M2 = 16, F8E4M3FN = 17, F8E5M2FNUZ = 19, F8E4M3FNUZ = 20,
};
size_t ElementSize(ElementType t);
const char* ElementTypeName(ElementType t);

// PJRT error codes (same numbering as PJRT_Error_Code / absl::StatusCode).
class Error : public std::runtime_error {
 public:
  Error(std::string message, int code) : std::runtime_error(std::move(message)), code_(code) {}
  int code() const { return code_; }
  bool is_resource_exhausted() const { return code_ == 8; }
 private:
  int code_;
};

class Api;  // the loaded plugin: dlopen handle + PJRT_Api table

// Plugin discovery. `explicit_path` (from TORCH_TPU_PLUGIN_PATH) wins; then
// `platform` ("tpu", "cuda", "cpu" or "" = auto) restricts the search; the
// search looks in each of `search_dirs` (site-packages folders) for
// libtpu/libtpu.so, jax_plugins/xla_cuda*/xla_cuda_plugin.so,
// xla_plugins/xla_cuda*_pjrt/*.so and xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so,
// in that order of preference (CUDA only when a GPU answers: /dev/nvidia0 exists).
// Returns the path, or throws Error whose message names TORCH_TPU_PLUGIN_PATH
// and `pip install xla-cpu-pjrt==0.0.1`.
struct PluginChoice {
  std::string path;
  std::string platform;  // "tpu" | "cuda" | "cpu" | "" if unknown (explicit path)
};
PluginChoice FindPlugin(const std::string& explicit_path, const std::string& platform,
                        const std::vector<std::string>& search_dirs);
// Every plugin found, in order of preference (the first is FindPlugin's):
// automatic mode tries the next when a client cannot be created (libtpu
// installed on a machine without a TPU). Throws as FindPlugin when none.
// `skipped`, if given, receives the accelerator plugins found but passed
// over in automatic mode because the machine has no such device.
std::vector<PluginChoice> FindPlugins(const std::string& explicit_path, const std::string& platform,
                                      const std::vector<std::string>& search_dirs,
                                      std::vector<PluginChoice>* skipped = nullptr);
// Whether a TPU chip is attached (/dev/accel*, /dev/vfio/<n>, or a Google
// TPU PCI device). libtpu queries the GCE metadata server for minutes when
// loaded on a machine without one, so it is loaded only with a chip, or
// when asked for explicitly (then with TPU_SKIP_MDS_QUERY=1: it fails at
// once instead).
bool TpuPresent();

// Loads a plugin (dlopen, GetPjrtApi, the API version check,
// PJRT_Plugin_Initialize) and reads its attributes without creating a
// client: what torch_tpu.info and the fallback's messages report.
struct PluginProbe {
  int major = 0, minor = 0;
  std::vector<std::pair<std::string, std::string>> attributes;
};
PluginProbe Probe(const std::string& path);

class Event {
 public:
  Event(std::shared_ptr<Api> api, PJRT_Event* ev);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  bool IsReady() const;
  // Blocks until ready; throws Error if the event carries an error.
  void Await() const;
  // Calls `fn` (from a plugin thread, possibly immediately) with an empty
  // string on success or the error message.
  void OnReady(std::function<void(const std::string& error)> fn);
 private:
  std::shared_ptr<Api> api_;
  PJRT_Event* ev_;
};

class Buffer {
 public:
  Buffer(std::shared_ptr<Api> api, PJRT_Buffer* buf);
  ~Buffer();  // PJRT_Buffer_Destroy
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ElementType element_type() const;
  std::vector<int64_t> dims() const;
  size_t on_device_size_bytes() const;
  // Starts an asynchronous copy of the whole buffer (dense, major-to-minor)
  // into `dst` (`dst_size` bytes); the returned event fires when done.
  std::unique_ptr<Event> ToHostAsync(void* dst, size_t dst_size) const;
  void ToHost(void* dst, size_t dst_size) const { ToHostAsync(dst, dst_size)->Await(); }
  // Event that fires when the buffer's value is computed (or failed).
  std::unique_ptr<Event> ReadyEvent() const;
  PJRT_Buffer* raw() const { return buf_; }
 private:
  std::shared_ptr<Api> api_;
  PJRT_Buffer* buf_;
};

class Executable {
 public:
  Executable(std::shared_ptr<Api> api, PJRT_LoadedExecutable* exe, PJRT_Device* device);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;
  size_t num_outputs() const { return num_outputs_; }
  // Launches on the one device; returns immediately with output buffers whose
  // values may still be pending. `non_donatable` lists argument indices that
  // must not be donated even if the program declares aliasing. If `done` is
  // non-null it receives the completion event.
  std::vector<std::unique_ptr<Buffer>> Execute(const std::vector<PJRT_Buffer*>& args,
                                               const std::vector<int64_t>& non_donatable = {},
                                               std::unique_ptr<Event>* done = nullptr) const;
  // For a program compiled for several devices (Client::CompileForDevices):
  // the global ids of the devices of this process it runs on, in the order
  // ExecuteOnDevices takes their argument lists.
  std::vector<int> addressable_device_ids() const;
  // Launches on every addressable device at once, `args[i]` on the i-th of
  // addressable_device_ids(); returns each device's outputs.
  std::vector<std::vector<std::unique_ptr<Buffer>>> ExecuteOnDevices(
      const std::vector<std::vector<PJRT_Buffer*>>& args) const;
  // PJRT_Executable_Serialize of the underlying executable.
  std::string Serialize() const;
  PJRT_LoadedExecutable* raw() const { return exe_; }
 private:
  std::shared_ptr<Api> api_;
  PJRT_LoadedExecutable* exe_;
  PJRT_Device* device_;
  size_t num_outputs_ = 0;
};

struct MemoryStats {
  int64_t bytes_in_use = 0;
  int64_t peak_bytes_in_use = 0;  // 0 if the plugin does not report it
  int64_t bytes_limit = 0;        // 0 if the plugin does not report it
  bool peak_known = false, limit_known = false;
};

// Encodes a serialized xla.CompileOptionsProto by hand (see pjrt-facts.md):
// executable_build_options { num_replicas, num_partitions, device_assignment }.
// `replica_devices` (optional, one partition): the global device id of each
// replica; without it XLA assigns devices 0..num_replicas-1.
std::string EncodeCompileOptions(int num_replicas = 1, int num_partitions = 1,
                                 const std::vector<int>& replica_devices = {});
// CompileOptionsProto.env_option_overrides (field 7), one entry: an XLA
// debug option set for this compilation only, over the plugin's defaults and
// XLA_FLAGS. Appended to serialized options (protobuf merges concatenated
// messages; a map field gains the entry).
std::string EncodeOptionOverride(const std::string& name, int64_t value);
std::string EncodeBoolOptionOverride(const std::string& name, bool value);

// A key-value store shared by the processes of a multi-process client (the
// c10d store under tpu_dist). `get` blocks up to `timeout_ms` and throws on
// timeout; both throw std::exception on failure.
struct KeyValueStore {
  std::function<std::string(const std::string& key, int timeout_ms)> get;
  std::function<void(const std::string& key, const std::string& value)> put;
};

// A create option for one platform's plugin (PJRT_NamedValue): plugins
// reject names they do not know, so these are chosen per platform
// (PlatformClientOptions).
struct NamedOption {
  enum Kind { kInt64, kFloat, kBool, kString } kind = kInt64;
  std::string name;
  int64_t i = 0;
  float f = 0;
  bool b = false;
  std::string s;
};

struct ClientOptions {
  int64_t cpu_device_count = 1;  // passed only to the CPU plugin
  // Multi-process clients (accelerator plugins): this process's index, the
  // number of processes, the local devices it owns, and the store through
  // which the plugin exchanges topology. Unused when num_nodes == 1.
  int64_t node_id = 0, num_nodes = 1;
  std::vector<int64_t> visible_devices;
  std::shared_ptr<KeyValueStore> kv_store;
  // Passed as they are (the CUDA plugin's allocator settings).
  std::vector<NamedOption> platform_options;
};

// The create options torch_tpu sets on purpose for the plugin of `choice`,
// from the environment (see README, "Plugins"):
//  - cuda: memory on demand (preallocate false unless
//    TORCH_TPU_CUDA_PREALLOCATE=1), memory_fraction (TORCH_TPU_CUDA_MEMORY_FRACTION,
//    0.9 by default), allocator (TORCH_TPU_CUDA_ALLOCATOR: default, bfc,
//    platform, cuda_async); under torchrun (LOCAL_WORLD_SIZE > 1) the
//    process sees only GPU LOCAL_RANK (visible_devices).
//  - tpu: under torchrun, one chip per process: TPU_VISIBLE_CHIPS=LOCAL_RANK
//    and the rest of libtpu's topology variables (TpuTopologyEnv), set in
//    the environment unless the user set them.
// Throws Error (invalid argument) naming the variable for a bad value.
ClientOptions PlatformClientOptions(const PluginChoice& choice);
// libtpu's topology variables for one chip per process on one host:
// TPU_VISIBLE_CHIPS, TPU_CHIPS_PER_PROCESS_BOUNDS, TPU_PROCESS_BOUNDS,
// TPU_PROCESS_PORT, TPU_PROCESS_ADDRESSES, CLOUD_TPU_TASK_ID. Empty when
// not under torchrun with more than one local process.
std::vector<std::pair<std::string, std::string>> TpuTopologyEnv(int local_rank, int local_world_size);

class Client {
 public:
  // Loads the plugin (dlopen + GetPjrtApi), checks the API major version,
  // calls PJRT_Plugin_Initialize once and creates the client.
  static std::shared_ptr<Client> Create(const std::string& plugin_path,
                                        const ClientOptions& opts = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& platform_name() const { return platform_name_; }      // "cpu", "cuda", "tpu"
  const std::string& platform_version() const { return platform_version_; }
  const std::string& plugin_path() const { return plugin_path_; }
  std::pair<int, int> api_version() const;  // plugin's (major, minor)
  // PJRT_Plugin_Attributes: xla_version, stablehlo_current_version,
  // stablehlo_minimum_version, ... (values as text; arrays dot-joined).
  std::vector<std::pair<std::string, std::string>> attributes() const;
  // Identity of the plugin build for cache keys: path, API version, platform
  // version and the file's size and mtime.
  std::string plugin_identity() const;
  int device_count() const { return static_cast<int>(devices_.size()); }  // addressable
  // Global id of addressable device `device` (unique across processes).
  int device_id(int device) const;
  // Every device of the client, across processes: (global id, process index).
  std::vector<std::pair<int, int>> global_devices() const;
  int64_t num_nodes() const { return num_nodes_; }
  std::string device_kind(int device) const;  // e.g. "cpu", "NVIDIA H200"
  MemoryStats memory_stats(int device) const;

  // Copies host data to the device. `byte_strides` empty = dense
  // major-to-minor. The data is copied before the call returns
  // (kImmutableOnlyDuringCall) so the caller may free it at once.
  std::unique_ptr<Buffer> BufferFromHost(const void* data, ElementType type,
                                         const std::vector<int64_t>& dims,
                                         const std::vector<int64_t>& byte_strides = {},
                                         int device = 0);
  // Compiles MLIR text (format "mlir") for one device.
  std::unique_ptr<Executable> Compile(const std::string& mlir_text,
                                      const std::string& compile_options = EncodeCompileOptions(),
                                      int device = 0);
  // Compiles MLIR text for num_replicas = replica_devices.size() replicas,
  // replica i on the device with global id replica_devices[i] (devices of
  // other processes included); launch it with Executable::ExecuteOnDevices.
  std::unique_ptr<Executable> CompileForDevices(const std::string& mlir_text,
                                                const std::vector<int>& replica_devices);
  // PJRT_Executable_DeserializeAndLoad.
  std::unique_ptr<Executable> Deserialize(const std::string& bytes, int device = 0);
  // The same without throwing: null, with the plugin's message in *error,
  // when the plugin does not load the bytes.
  std::unique_ptr<Executable> TryDeserialize(const std::string& bytes, std::string* error,
                                             int device = 0);

  const std::shared_ptr<Api>& api() const { return api_; }
 private:
  Client() = default;
  PJRT_LoadedExecutable* CompileRaw(const std::string& mlir_text, const std::string& options);
  std::shared_ptr<Api> api_;
  PJRT_Client* client_ = nullptr;
  std::vector<PJRT_Device*> devices_;
  std::string platform_name_, platform_version_, plugin_path_;
  int64_t num_nodes_ = 1;
  std::shared_ptr<KeyValueStore> kv_store_;  // read by the plugin's callbacks
};

}  // namespace tpu::pjrt
