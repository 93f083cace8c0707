// PJRT C API client: plugin loading, the calling convention, and the
// Client / Buffer / Event / Executable wrappers declared in pjrt.h.
#include "pjrt/pjrt.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <new>
#include <unordered_map>
#include <utility>

#include "pjrt_c_api.h"

namespace tpu::pjrt {
namespace {

// absl::StatusCode numbering, as used by PJRT_Error_Code.
constexpr int kUnknown = 2;
constexpr int kInvalidArgument = 3;
constexpr int kFailedPrecondition = 9;
constexpr int kOutOfRange = 11;
constexpr int kUnimplemented = 12;

// Argument struct storage. A plugin built against a newer header has bigger
// argument structs and rejects a struct_size smaller than its own, while any
// plugin accepts a larger one. So every struct is followed by zeroed padding
// and struct_size covers it: a newer plugin sees its extra fields as zero,
// which is their documented default.
template <typename T>
class Args {
 public:
  static constexpr size_t kPadding = 512;
  Args() {
    std::memset(storage_, 0, sizeof(storage_));
    p_ = new (storage_) T{};
    p_->struct_size = sizeof(T) + kPadding;
  }
  Args(const Args&) = delete;
  Args& operator=(const Args&) = delete;
  T* operator->() { return p_; }
  T* get() { return p_; }

 private:
  alignas(T) unsigned char storage_[sizeof(T) + kPadding];
  T* p_;
};

// Runs a callable at scope exit (plugin-owned resources released on every path).
template <typename F>
class ScopeExit {
 public:
  explicit ScopeExit(F f) : f_(std::move(f)) {}
  ~ScopeExit() { f_(); }
  ScopeExit(const ScopeExit&) = delete;
  ScopeExit& operator=(const ScopeExit&) = delete;

 private:
  F f_;
};

}  // namespace

// The loaded plugin. Immutable after construction, so shared freely between
// threads. The dlopen handle is deliberately never closed: plugins start
// threads and register atexit handlers that outlive any client.
class Api {
 public:
  Api(std::string path, const PJRT_Api* table) : path_(std::move(path)), table_(table) {}

  const std::string& path() const { return path_; }
  std::pair<int, int> version() const {
    return {table_->pjrt_api_version.major_version, table_->pjrt_api_version.minor_version};
  }

  // The function at `offset` in the plugin's PJRT_Api, or null if the plugin's
  // table is too short to contain it (an older plugin) or leaves it unset.
  template <typename Fn>
  Fn* Find(size_t offset) const {
    if (offset + sizeof(Fn*) > table_->struct_size) return nullptr;
    Fn* fn;
    std::memcpy(&fn, reinterpret_cast<const char*>(table_) + offset, sizeof(fn));
    return fn;
  }
  template <typename Fn>
  Fn* Require(size_t offset, const char* name) const {
    Fn* fn = Find<Fn>(offset);
    if (fn == nullptr) throw Error(std::string("plugin does not implement ") + name, kUnimplemented);
    return fn;
  }

  // The one checking path: turns a PJRT_Error into pjrt::Error (destroying it).
  void Check(PJRT_Error* error, const char* call) const {
    if (error == nullptr) return;
    int code = Code(error);
    std::string message = TakeMessage(error);
    throw Error(std::string(call) + " failed: " + message, code);
  }
  // Reads the message of `error` and destroys it.
  std::string TakeMessage(PJRT_Error* error) const;
  // Destroys `error`, reporting it on stderr; for destructors, which cannot throw.
  void Report(PJRT_Error* error, const char* call) const {
    if (error == nullptr) return;
    std::string message = TakeMessage(error);
    std::fprintf(stderr, "torch_tpu: %s failed: %s\n", call, message.c_str());
  }

 private:
  int Code(PJRT_Error* error) const;

  std::string path_;
  const PJRT_Api* table_;
};

// PJRT_FN(api, PJRT_X): the plugin's PJRT_X or an Error naming it.
// PJRT_CALL(api, PJRT_X, args): calls it with padded `args` and checks the result.
// PJRT_TRY_FN(api, PJRT_X): the function or null, for destructors.
#define PJRT_FN(api, fn) ((api).Require<fn>(offsetof(PJRT_Api, fn), #fn))
#define PJRT_TRY_FN(api, fn) ((api).Find<fn>(offsetof(PJRT_Api, fn)))
#define PJRT_CALL(api, fn, args) ((api).Check(PJRT_FN(api, fn)((args).get()), #fn))

std::string Api::TakeMessage(PJRT_Error* error) const {
  std::string message = "(no message)";
  if (auto* fn = PJRT_TRY_FN(*this, PJRT_Error_Message)) {
    Args<PJRT_Error_Message_Args> a;
    a->error = error;
    fn(a.get());
    if (a->message != nullptr) message.assign(a->message, a->message_size);
  }
  if (auto* fn = PJRT_TRY_FN(*this, PJRT_Error_Destroy)) {
    Args<PJRT_Error_Destroy_Args> a;
    a->error = error;
    fn(a.get());
  }
  return message;
}

int Api::Code(PJRT_Error* error) const {
  auto* fn = PJRT_TRY_FN(*this, PJRT_Error_GetCode);
  if (fn == nullptr) return kUnknown;
  Args<PJRT_Error_GetCode_Args> a;
  a->error = error;
  if (PJRT_Error* e = fn(a.get())) {
    TakeMessage(e);  // cannot happen in practice; do not leak it
    return kUnknown;
  }
  return static_cast<int>(a->code);
}

namespace {

// ---------------------------------------------------------------------------
// Loading. One Api per distinct PJRT_Api table: loading the same plugin twice
// (several clients) returns the same Api, so PJRT_Plugin_Initialize runs once.

std::shared_ptr<Api> LoadApi(const std::string& path) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    throw Error("Cannot load PJRT plugin " + path + ": " + (why ? why : "unknown dlopen error"),
                kFailedPrecondition);
  }
  using GetPjrtApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetPjrtApiFn>(::dlsym(handle, "GetPjrtApi"));
  if (get_api == nullptr) {
    throw Error("PJRT plugin " + path + " does not export GetPjrtApi", kFailedPrecondition);
  }
  const PJRT_Api* table = get_api();
  if (table == nullptr) throw Error("GetPjrtApi of " + path + " returned null", kFailedPrecondition);
  if (table->struct_size < offsetof(PJRT_Api, pjrt_api_version) + sizeof(PJRT_Api_Version)) {
    throw Error("PJRT plugin " + path + " has a truncated PJRT_Api table", kFailedPrecondition);
  }

  static std::mutex mu;
  static auto* loaded = new std::unordered_map<const PJRT_Api*, std::shared_ptr<Api>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded->find(table);
  if (it != loaded->end()) return it->second;

  const int major = table->pjrt_api_version.major_version;
  const int minor = table->pjrt_api_version.minor_version;
  if (major != PJRT_API_MAJOR) {
    throw Error("PJRT plugin " + path + " implements PJRT C API " + std::to_string(major) + "." +
                    std::to_string(minor) + ", but this build uses API " +
                    std::to_string(PJRT_API_MAJOR) + "." + std::to_string(PJRT_API_MINOR) +
                    " (major versions must match)",
                kFailedPrecondition);
  }
  auto api = std::make_shared<Api>(path, table);
  Args<PJRT_Plugin_Initialize_Args> a;
  PJRT_CALL(*api, PJRT_Plugin_Initialize, a);
  loaded->emplace(table, api);
  return api;
}

PJRT_Device* DeviceAt(const std::vector<PJRT_Device*>& devices, int index) {
  if (index < 0 || static_cast<size_t>(index) >= devices.size()) {
    throw Error("device index " + std::to_string(index) + " out of range (" +
                    std::to_string(devices.size()) + " addressable devices)",
                kOutOfRange);
  }
  return devices[index];
}

PJRT_DeviceDescription* Description(const Api& api, PJRT_Device* device) {
  Args<PJRT_Device_GetDescription_Args> d;
  d->device = device;
  PJRT_CALL(api, PJRT_Device_GetDescription, d);
  return d->device_description;
}

int DeviceId(const Api& api, PJRT_Device* device) {
  Args<PJRT_DeviceDescription_Id_Args> a;
  a->device_description = Description(api, device);
  PJRT_CALL(api, PJRT_DeviceDescription_Id, a);
  return a->id;
}

// A PJRT_Executable (the compiled, not loaded, view of a loaded executable),
// destroyed at scope exit.
class UnloadedExecutable {
 public:
  UnloadedExecutable(const Api& api, PJRT_LoadedExecutable* loaded) : api_(api) {
    Args<PJRT_LoadedExecutable_GetExecutable_Args> a;
    a->loaded_executable = loaded;
    PJRT_CALL(api_, PJRT_LoadedExecutable_GetExecutable, a);
    exe_ = a->executable;
  }
  ~UnloadedExecutable() {
    if (auto* fn = PJRT_TRY_FN(api_, PJRT_Executable_Destroy)) {
      Args<PJRT_Executable_Destroy_Args> a;
      a->executable = exe_;
      api_.Report(fn(a.get()), "PJRT_Executable_Destroy");
    }
  }
  UnloadedExecutable(const UnloadedExecutable&) = delete;
  UnloadedExecutable& operator=(const UnloadedExecutable&) = delete;
  PJRT_Executable* get() const { return exe_; }

 private:
  const Api& api_;
  PJRT_Executable* exe_ = nullptr;
};

void AppendVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// CompileOptionsProto.compile_portable_executable (field 4, varint) = true.
// Protobuf merges concatenated messages, so appending it to any serialized
// options sets the flag.
constexpr char kPortableExecutable[] = "\x20\x01";

}  // namespace

// ---------------------------------------------------------------------------
// Element types and compile options.

size_t ElementSize(ElementType t) {
  switch (t) {
    case ElementType::PRED: case ElementType::S8: case ElementType::U8: return 1;
    case ElementType::F8E5M2: case ElementType::F8E4M3FN: case ElementType::F8E5M2FNUZ:
    case ElementType::F8E4M3FNUZ: return 1;
    case ElementType::S16: case ElementType::U16: case ElementType::F16: case ElementType::BF16: return 2;
    case ElementType::S32: case ElementType::U32: case ElementType::F32: return 4;
    case ElementType::S64: case ElementType::U64: case ElementType::F64: case ElementType::C64: return 8;
    case ElementType::C128: return 16;
    case ElementType::INVALID: return 0;
  }
  return 0;
}

const char* ElementTypeName(ElementType t) {
  switch (t) {
    case ElementType::INVALID: return "invalid";
    case ElementType::PRED: return "pred";
    case ElementType::S8: return "s8";
    case ElementType::S16: return "s16";
    case ElementType::S32: return "s32";
    case ElementType::S64: return "s64";
    case ElementType::U8: return "u8";
    case ElementType::U16: return "u16";
    case ElementType::U32: return "u32";
    case ElementType::U64: return "u64";
    case ElementType::F16: return "f16";
    case ElementType::F32: return "f32";
    case ElementType::F64: return "f64";
    case ElementType::BF16: return "bf16";
    case ElementType::F8E5M2: return "f8e5m2";
    case ElementType::F8E4M3FN: return "f8e4m3fn";
    case ElementType::F8E5M2FNUZ: return "f8e5m2fnuz";
    case ElementType::F8E4M3FNUZ: return "f8e4m3fnuz";
    case ElementType::C64: return "c64";
    case ElementType::C128: return "c128";
  }
  return "invalid";
}

std::string EncodeCompileOptions(int num_replicas, int num_partitions,
                                 const std::vector<int>& replica_devices) {
  if (num_replicas < 1 || num_partitions < 1) {
    throw Error("EncodeCompileOptions: num_replicas and num_partitions must be >= 1",
                kInvalidArgument);
  }
  if (!replica_devices.empty() &&
      (num_partitions != 1 || replica_devices.size() != static_cast<size_t>(num_replicas))) {
    throw Error("EncodeCompileOptions: a device assignment needs one device per replica and "
                "one partition",
                kInvalidArgument);
  }
  // ExecutableBuildOptionsProto: num_replicas = 4, num_partitions = 5 (varints).
  std::string build;
  build.push_back(0x20);
  AppendVarint(build, static_cast<uint64_t>(num_replicas));
  build.push_back(0x28);
  AppendVarint(build, static_cast<uint64_t>(num_partitions));
  if (!replica_devices.empty()) {
    // DeviceAssignmentProto { replica_count = 1, computation_count = 2,
    // computation_devices = 3 { replica_device_ids = 1 (repeated) } }.
    std::string computation;
    for (int id : replica_devices) {
      computation.push_back(0x08);
      AppendVarint(computation, static_cast<uint64_t>(static_cast<int64_t>(id)));
    }
    std::string assignment;
    assignment.push_back(0x08);
    AppendVarint(assignment, static_cast<uint64_t>(num_replicas));
    assignment.push_back(0x10);
    AppendVarint(assignment, 1);
    assignment.push_back(0x1a);
    AppendVarint(assignment, computation.size());
    assignment += computation;
    // ExecutableBuildOptionsProto.device_assignment = 9 (length-delimited).
    build.push_back(0x4a);
    AppendVarint(build, assignment.size());
    build += assignment;
  }
  // CompileOptionsProto: executable_build_options = 3 (length-delimited).
  std::string out;
  out.push_back(0x1a);
  AppendVarint(out, build.size());
  return out + build;
}

namespace {
// One env_option_overrides entry whose OptionOverrideProto is `v`.
std::string OptionOverrideEntry(const std::string& name, const std::string& v) {
  // Map entry { key = 1 (string), value = 2 (OptionOverrideProto) }.
  std::string entry;
  entry.push_back(0x0a);
  AppendVarint(entry, name.size());
  entry += name;
  entry.push_back(0x12);
  AppendVarint(entry, v.size());
  entry += v;
  std::string out;
  out.push_back(0x3a);
  AppendVarint(out, entry.size());
  return out + entry;
}
}  // namespace

std::string EncodeOptionOverride(const std::string& name, int64_t value) {
  // OptionOverrideProto { int_field = 3 (varint) }.
  std::string v(1, '\x18');
  AppendVarint(v, static_cast<uint64_t>(value));
  return OptionOverrideEntry(name, v);
}

std::string EncodeBoolOptionOverride(const std::string& name, bool value) {
  // OptionOverrideProto { bool_field = 2 (varint) }.
  return OptionOverrideEntry(name, std::string{'\x10', static_cast<char>(value ? 1 : 0)});
}

// ---------------------------------------------------------------------------
// Event

Event::Event(std::shared_ptr<Api> api, PJRT_Event* ev) : api_(std::move(api)), ev_(ev) {}

Event::~Event() {
  if (ev_ == nullptr) return;
  if (auto* fn = PJRT_TRY_FN(*api_, PJRT_Event_Destroy)) {
    Args<PJRT_Event_Destroy_Args> a;
    a->event = ev_;
    api_->Report(fn(a.get()), "PJRT_Event_Destroy");
  }
}

bool Event::IsReady() const {
  if (ev_ == nullptr) return true;
  Args<PJRT_Event_IsReady_Args> a;
  a->event = ev_;
  PJRT_CALL(*api_, PJRT_Event_IsReady, a);
  return a->is_ready;
}

void Event::Await() const {
  if (ev_ == nullptr) return;
  Args<PJRT_Event_Await_Args> a;
  a->event = ev_;
  PJRT_CALL(*api_, PJRT_Event_Await, a);
  // Await reports the event's status on current plugins; the event's own error
  // is asked for as well so a plugin that reports only wait failures from
  // Await still surfaces a failed computation.
  Args<PJRT_Event_Error_Args> e;
  e->event = ev_;
  PJRT_CALL(*api_, PJRT_Event_Error, e);
}

namespace {
struct OnReadyState {
  std::shared_ptr<Api> api;
  std::function<void(const std::string&)> fn;
};

void OnReadyTrampoline(PJRT_Error* error, void* user_arg) {
  std::unique_ptr<OnReadyState> state(static_cast<OnReadyState*>(user_arg));
  std::string message;
  if (error != nullptr) {
    message = state->api->TakeMessage(error);
    if (message.empty()) message = "unknown PJRT error";
  }
  // Runs on a plugin thread: an exception must not unwind into the plugin.
  try {
    state->fn(message);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torch_tpu: exception in PJRT OnReady callback: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "torch_tpu: exception in PJRT OnReady callback\n");
  }
}
}  // namespace

void Event::OnReady(std::function<void(const std::string& error)> fn) {
  if (ev_ == nullptr) {
    fn(std::string());
    return;
  }
  auto state = std::make_unique<OnReadyState>(OnReadyState{api_, std::move(fn)});
  Args<PJRT_Event_OnReady_Args> a;
  a->event = ev_;
  a->callback = &OnReadyTrampoline;
  a->user_arg = state.get();
  PJRT_CALL(*api_, PJRT_Event_OnReady, a);
  state.release();  // owned by the callback from now on
}

// ---------------------------------------------------------------------------
// Buffer

Buffer::Buffer(std::shared_ptr<Api> api, PJRT_Buffer* buf) : api_(std::move(api)), buf_(buf) {}

Buffer::~Buffer() {
  if (buf_ == nullptr) return;
  if (auto* fn = PJRT_TRY_FN(*api_, PJRT_Buffer_Destroy)) {
    Args<PJRT_Buffer_Destroy_Args> a;
    a->buffer = buf_;
    api_->Report(fn(a.get()), "PJRT_Buffer_Destroy");
  }
}

ElementType Buffer::element_type() const {
  Args<PJRT_Buffer_ElementType_Args> a;
  a->buffer = buf_;
  PJRT_CALL(*api_, PJRT_Buffer_ElementType, a);
  return static_cast<ElementType>(a->type);
}

std::vector<int64_t> Buffer::dims() const {
  Args<PJRT_Buffer_Dimensions_Args> a;
  a->buffer = buf_;
  PJRT_CALL(*api_, PJRT_Buffer_Dimensions, a);
  return std::vector<int64_t>(a->dims, a->dims + a->num_dims);
}

size_t Buffer::on_device_size_bytes() const {
  Args<PJRT_Buffer_OnDeviceSizeInBytes_Args> a;
  a->buffer = buf_;
  PJRT_CALL(*api_, PJRT_Buffer_OnDeviceSizeInBytes, a);
  return a->on_device_size_in_bytes;
}

std::unique_ptr<Event> Buffer::ToHostAsync(void* dst, size_t dst_size) const {
  if (dst == nullptr && dst_size != 0) {
    throw Error("Buffer::ToHostAsync: null destination", kInvalidArgument);
  }
  Args<PJRT_Buffer_ToHostBuffer_Args> a;
  a->src = buf_;
  a->host_layout = nullptr;  // the buffer's own layout: dense major-to-minor
  a->dst = dst;
  a->dst_size = dst_size;
  PJRT_CALL(*api_, PJRT_Buffer_ToHostBuffer, a);
  return std::make_unique<Event>(api_, a->event);
}

std::unique_ptr<Event> Buffer::ReadyEvent() const {
  Args<PJRT_Buffer_ReadyEvent_Args> a;
  a->buffer = buf_;
  PJRT_CALL(*api_, PJRT_Buffer_ReadyEvent, a);
  return std::make_unique<Event>(api_, a->event);
}

// ---------------------------------------------------------------------------
// Executable

namespace {
void DestroyLoadedExecutable(const Api& api, PJRT_LoadedExecutable* exe) {
  if (exe == nullptr) return;
  if (auto* fn = PJRT_TRY_FN(api, PJRT_LoadedExecutable_Destroy)) {
    Args<PJRT_LoadedExecutable_Destroy_Args> a;
    a->executable = exe;
    api.Report(fn(a.get()), "PJRT_LoadedExecutable_Destroy");
  }
}
}  // namespace

Executable::Executable(std::shared_ptr<Api> api, PJRT_LoadedExecutable* exe, PJRT_Device* device)
    : api_(std::move(api)), exe_(exe), device_(device) {
  try {
    UnloadedExecutable unloaded(*api_, exe_);
    Args<PJRT_Executable_NumOutputs_Args> a;
    a->executable = unloaded.get();
    PJRT_CALL(*api_, PJRT_Executable_NumOutputs, a);
    num_outputs_ = a->num_outputs;
  } catch (...) {
    // The destructor does not run for a throwing constructor.
    DestroyLoadedExecutable(*api_, exe_);
    throw;
  }
}

Executable::~Executable() { DestroyLoadedExecutable(*api_, exe_); }

std::vector<std::unique_ptr<Buffer>> Executable::Execute(const std::vector<PJRT_Buffer*>& args,
                                                         const std::vector<int64_t>& non_donatable,
                                                         std::unique_ptr<Event>* done) const {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == nullptr) {
      throw Error("Executable::Execute: argument " + std::to_string(i) + " is null",
                  kInvalidArgument);
    }
  }
  Args<PJRT_ExecuteOptions> options;
  options->non_donatable_input_indices = non_donatable.data();
  options->num_non_donatable_input_indices = non_donatable.size();

  std::vector<PJRT_Buffer*> outputs(num_outputs_, nullptr);
  PJRT_Buffer* const* argument_list = args.data();
  PJRT_Buffer** output_list = outputs.data();
  PJRT_Event* complete = nullptr;

  Args<PJRT_LoadedExecutable_Execute_Args> a;
  a->executable = exe_;
  a->options = options.get();
  a->argument_lists = &argument_list;
  a->num_devices = 1;
  a->num_args = args.size();
  a->output_lists = &output_list;
  a->device_complete_events = done != nullptr ? &complete : nullptr;
  a->execute_device = device_;
  PJRT_CALL(*api_, PJRT_LoadedExecutable_Execute, a);

  std::vector<std::unique_ptr<Buffer>> result;
  result.reserve(outputs.size());
  for (PJRT_Buffer* b : outputs) result.push_back(std::make_unique<Buffer>(api_, b));
  if (done != nullptr) *done = std::make_unique<Event>(api_, complete);
  return result;
}

std::vector<int> Executable::addressable_device_ids() const {
  Args<PJRT_LoadedExecutable_AddressableDevices_Args> a;
  a->executable = exe_;
  PJRT_CALL(*api_, PJRT_LoadedExecutable_AddressableDevices, a);
  std::vector<int> ids;
  for (size_t i = 0; i < a->num_addressable_devices; ++i) ids.push_back(DeviceId(*api_, a->addressable_devices[i]));
  return ids;
}

std::vector<std::vector<std::unique_ptr<Buffer>>> Executable::ExecuteOnDevices(
    const std::vector<std::vector<PJRT_Buffer*>>& args) const {
  if (args.empty()) throw Error("Executable::ExecuteOnDevices: no devices", kInvalidArgument);
  const size_t num_args = args[0].size();
  for (size_t d = 0; d < args.size(); ++d) {
    if (args[d].size() != num_args) {
      throw Error("Executable::ExecuteOnDevices: every device needs the same number of arguments",
                  kInvalidArgument);
    }
    for (size_t i = 0; i < num_args; ++i) {
      if (args[d][i] == nullptr) {
        throw Error("Executable::ExecuteOnDevices: argument " + std::to_string(i) + " of device " +
                        std::to_string(d) + " is null",
                    kInvalidArgument);
      }
    }
  }
  Args<PJRT_ExecuteOptions> options;
  std::vector<PJRT_Buffer* const*> argument_lists;
  std::vector<std::vector<PJRT_Buffer*>> outputs(args.size(), std::vector<PJRT_Buffer*>(num_outputs_, nullptr));
  std::vector<PJRT_Buffer**> output_lists;
  for (size_t d = 0; d < args.size(); ++d) {
    argument_lists.push_back(args[d].data());
    output_lists.push_back(outputs[d].data());
  }
  Args<PJRT_LoadedExecutable_Execute_Args> a;
  a->executable = exe_;
  a->options = options.get();
  a->argument_lists = argument_lists.data();
  a->num_devices = args.size();
  a->num_args = num_args;
  a->output_lists = output_lists.data();
  a->device_complete_events = nullptr;
  a->execute_device = nullptr;
  PJRT_CALL(*api_, PJRT_LoadedExecutable_Execute, a);
  std::vector<std::vector<std::unique_ptr<Buffer>>> result(args.size());
  for (size_t d = 0; d < args.size(); ++d) {
    for (PJRT_Buffer* b : outputs[d]) result[d].push_back(std::make_unique<Buffer>(api_, b));
  }
  return result;
}

std::string Executable::Serialize() const {
  UnloadedExecutable unloaded(*api_, exe_);
  Args<PJRT_Executable_Serialize_Args> a;
  a->executable = unloaded.get();
  PJRT_CALL(*api_, PJRT_Executable_Serialize, a);
  ScopeExit free_bytes([&] {
    if (a->serialized_executable_deleter != nullptr) {
      a->serialized_executable_deleter(a->serialized_executable);
    }
  });
  return std::string(a->serialized_bytes, a->serialized_bytes_size);
}

// ---------------------------------------------------------------------------
// Client

namespace {
PJRT_Error* KvGet(PJRT_KeyValueGetCallback_Args* args) {
  auto* store = static_cast<KeyValueStore*>(args->user_arg);
  try {
    std::string v = store->get(std::string(args->key, args->key_size), args->timeout_in_ms);
    char* out = new char[v.size() + 1];
    std::memcpy(out, v.data(), v.size());
    args->value = out;
    args->value_size = v.size();
    args->value_deleter_callback = [](char* p) { delete[] p; };
    return nullptr;
  } catch (const std::exception& e) {
    std::string m = std::string("key-value store get: ") + e.what();
    return (*args->callback_error)(PJRT_Error_Code_DEADLINE_EXCEEDED, m.data(), m.size());
  }
}

PJRT_Error* KvPut(PJRT_KeyValuePutCallback_Args* args) {
  auto* store = static_cast<KeyValueStore*>(args->user_arg);
  try {
    store->put(std::string(args->key, args->key_size), std::string(args->value, args->value_size));
    return nullptr;
  } catch (const std::exception& e) {
    std::string m = std::string("key-value store put: ") + e.what();
    return (*args->callback_error)(PJRT_Error_Code_INTERNAL, m.data(), m.size());
  }
}

PJRT_Client* CreateClient(const Api& api, const std::vector<PJRT_NamedValue>& options,
                          KeyValueStore* kv = nullptr) {
  Args<PJRT_Client_Create_Args> a;
  a->create_options = options.empty() ? nullptr : options.data();
  a->num_options = options.size();
  if (kv != nullptr) {
    a->kv_get_callback = &KvGet;
    a->kv_get_user_arg = kv;
    a->kv_put_callback = &KvPut;
    a->kv_put_user_arg = kv;
  }
  PJRT_CALL(api, PJRT_Client_Create, a);
  return a->client;
}

PJRT_NamedValue Int64Option(const char* name, const int64_t* values, size_t n, bool list) {
  PJRT_NamedValue v{};
  v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  v.name = name;
  v.name_size = std::strlen(name);
  if (list) {
    v.type = PJRT_NamedValue_kInt64List;
    v.int64_array_value = values;
    v.value_size = n;
  } else {
    v.type = PJRT_NamedValue_kInt64;
    v.int64_value = values[0];
    v.value_size = 1;
  }
  return v;
}

std::vector<PJRT_NamedValue> NamedOptions(const std::vector<NamedOption>& in) {
  std::vector<PJRT_NamedValue> out;
  for (const NamedOption& o : in) {
    PJRT_NamedValue v{};
    v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    v.name = o.name.c_str();
    v.name_size = o.name.size();
    v.value_size = 1;
    switch (o.kind) {
      case NamedOption::kInt64:
        v.type = PJRT_NamedValue_kInt64;
        v.int64_value = o.i;
        break;
      case NamedOption::kFloat:
        v.type = PJRT_NamedValue_kFloat;
        v.float_value = o.f;
        break;
      case NamedOption::kBool:
        v.type = PJRT_NamedValue_kBool;
        v.bool_value = o.b;
        break;
      case NamedOption::kString:
        v.type = PJRT_NamedValue_kString;
        v.string_value = o.s.c_str();
        v.value_size = o.s.size();
        break;
    }
    out.push_back(v);
  }
  return out;
}

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}
}  // namespace

std::shared_ptr<Client> Client::Create(const std::string& plugin_path, const ClientOptions& opts) {
  if (opts.cpu_device_count < 1) {
    throw Error("ClientOptions.cpu_device_count must be >= 1", kInvalidArgument);
  }
  if (opts.num_nodes < 1 || opts.node_id < 0 || opts.node_id >= opts.num_nodes) {
    throw Error("ClientOptions: node_id must be in [0, num_nodes)", kInvalidArgument);
  }
  if (opts.num_nodes > 1 && !opts.kv_store) {
    throw Error("ClientOptions: a multi-process client needs a key-value store", kInvalidArgument);
  }
  std::shared_ptr<Api> api = LoadApi(plugin_path);
  std::shared_ptr<Client> client(new Client());  // private constructor
  client->api_ = api;
  client->plugin_path_ = plugin_path;
  client->num_nodes_ = opts.num_nodes;
  client->kv_store_ = opts.num_nodes > 1 ? opts.kv_store : nullptr;

  // Plugins reject create options they do not know (the CUDA plugin does), so
  // cpu_device_count goes only to what looks like the CPU plugin; should that
  // plugin not know the option either, fall back to its defaults.
  const std::string base = BaseName(plugin_path);
  const bool cpu = base.find("cpu") != std::string::npos;
  const bool cuda = base.find("cuda") != std::string::npos;
  std::vector<PJRT_NamedValue> options = NamedOptions(opts.platform_options);
  if (cuda && !opts.visible_devices.empty()) {
    options.push_back(Int64Option("visible_devices", opts.visible_devices.data(),
                                  opts.visible_devices.size(), true));
  }
  if (opts.num_nodes > 1) {
    // The CUDA plugin takes its place in the job as options; libtpu reads
    // its topology from the environment and needs only the store.
    if (cuda) {
      options.push_back(Int64Option("node_id", &opts.node_id, 1, false));
      options.push_back(Int64Option("num_nodes", &opts.num_nodes, 1, false));
    }
    client->client_ = CreateClient(*api, options, client->kv_store_.get());
  } else if (cpu) {
    const int64_t count_value = opts.cpu_device_count;
    PJRT_NamedValue count = Int64Option("cpu_device_count", &count_value, 1, false);
    try {
      client->client_ = CreateClient(*api, {count});
    } catch (const Error& e) {
      if (e.code() != kInvalidArgument && e.code() != kUnimplemented) throw;
      try {
        client->client_ = CreateClient(*api, {});
      } catch (const Error&) {
        throw e;
      }
    }
  } else {
    client->client_ = CreateClient(*api, options);
  }

  Args<PJRT_Client_PlatformName_Args> name;
  name->client = client->client_;
  PJRT_CALL(*api, PJRT_Client_PlatformName, name);
  client->platform_name_.assign(name->platform_name, name->platform_name_size);

  Args<PJRT_Client_PlatformVersion_Args> version;
  version->client = client->client_;
  PJRT_CALL(*api, PJRT_Client_PlatformVersion, version);
  client->platform_version_.assign(version->platform_version, version->platform_version_size);

  Args<PJRT_Client_AddressableDevices_Args> devices;
  devices->client = client->client_;
  PJRT_CALL(*api, PJRT_Client_AddressableDevices, devices);
  client->devices_.assign(devices->addressable_devices,
                          devices->addressable_devices + devices->num_addressable_devices);
  return client;
}

Client::~Client() {
  if (client_ == nullptr) return;
  if (auto* fn = PJRT_TRY_FN(*api_, PJRT_Client_Destroy)) {
    Args<PJRT_Client_Destroy_Args> a;
    a->client = client_;
    api_->Report(fn(a.get()), "PJRT_Client_Destroy");
  }
}

std::pair<int, int> Client::api_version() const { return api_->version(); }

namespace {
std::vector<std::pair<std::string, std::string>> AttributesOf(const Api& api) {
  std::vector<std::pair<std::string, std::string>> out;
  auto* fn = PJRT_TRY_FN(api, PJRT_Plugin_Attributes);
  if (fn == nullptr) return out;  // an older plugin
  Args<PJRT_Plugin_Attributes_Args> a;
  api.Check(fn(a.get()), "PJRT_Plugin_Attributes");
  for (size_t i = 0; i < a->num_attributes; ++i) {
    const PJRT_NamedValue& v = a->attributes[i];
    std::string name(v.name, v.name_size), value;
    switch (v.type) {
      case PJRT_NamedValue_kString:
        value.assign(v.string_value, v.value_size);
        break;
      case PJRT_NamedValue_kInt64:
        value = std::to_string(v.int64_value);
        break;
      case PJRT_NamedValue_kInt64List:
        for (size_t j = 0; j < v.value_size; ++j)
          value += (j ? "." : "") + std::to_string(v.int64_array_value[j]);
        break;
      case PJRT_NamedValue_kFloat:
        value = std::to_string(v.float_value);
        break;
      case PJRT_NamedValue_kBool:
        value = v.bool_value ? "true" : "false";
        break;
    }
    out.emplace_back(std::move(name), std::move(value));
  }
  return out;
}
}  // namespace

std::vector<std::pair<std::string, std::string>> Client::attributes() const {
  return AttributesOf(*api_);
}

PluginProbe Probe(const std::string& path) {
  std::shared_ptr<Api> api = LoadApi(path);
  PluginProbe p;
  std::tie(p.major, p.minor) = api->version();
  p.attributes = AttributesOf(*api);
  return p;
}

std::string Client::plugin_identity() const {
  struct stat st;
  long long size = -1, mtime_ns = -1;
  if (::stat(plugin_path_.c_str(), &st) == 0) {
    size = static_cast<long long>(st.st_size);
    mtime_ns = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  }
  auto [major, minor] = api_->version();
  return plugin_path_ + "|pjrt-api=" + std::to_string(major) + "." + std::to_string(minor) +
         "|platform=" + platform_version_ + "|size=" + std::to_string(size) +
         "|mtime_ns=" + std::to_string(mtime_ns);
}

int Client::device_id(int device) const { return DeviceId(*api_, DeviceAt(devices_, device)); }

std::vector<std::pair<int, int>> Client::global_devices() const {
  Args<PJRT_Client_Devices_Args> a;
  a->client = client_;
  PJRT_CALL(*api_, PJRT_Client_Devices, a);
  std::vector<std::pair<int, int>> out;
  for (size_t i = 0; i < a->num_devices; ++i) {
    Args<PJRT_DeviceDescription_ProcessIndex_Args> p;
    p->device_description = Description(*api_, a->devices[i]);
    PJRT_CALL(*api_, PJRT_DeviceDescription_ProcessIndex, p);
    out.emplace_back(DeviceId(*api_, a->devices[i]), p->process_index);
  }
  return out;
}

std::string Client::device_kind(int device) const {
  Args<PJRT_Device_GetDescription_Args> d;
  d->device = DeviceAt(devices_, device);
  PJRT_CALL(*api_, PJRT_Device_GetDescription, d);
  Args<PJRT_DeviceDescription_Kind_Args> k;
  k->device_description = d->device_description;
  PJRT_CALL(*api_, PJRT_DeviceDescription_Kind, k);
  return std::string(k->device_kind, k->device_kind_size);
}

MemoryStats Client::memory_stats(int device) const {
  MemoryStats stats;
  PJRT_Device* dev = DeviceAt(devices_, device);
  // Diagnostic only and optional for plugins: an unimplemented or failing
  // call yields zeros rather than an exception.
  auto* fn = PJRT_TRY_FN(*api_, PJRT_Device_MemoryStats);
  if (fn == nullptr) return stats;
  Args<PJRT_Device_MemoryStats_Args> a;
  a->device = dev;
  if (PJRT_Error* error = fn(a.get())) {
    api_->TakeMessage(error);
    return stats;
  }
  stats.bytes_in_use = a->bytes_in_use;
  if (a->peak_bytes_in_use_is_set) {
    stats.peak_bytes_in_use = a->peak_bytes_in_use;
    stats.peak_known = true;
  }
  if (a->bytes_limit_is_set) {
    stats.bytes_limit = a->bytes_limit;
    stats.limit_known = true;
  }
  return stats;
}

std::unique_ptr<Buffer> Client::BufferFromHost(const void* data, ElementType type,
                                               const std::vector<int64_t>& dims,
                                               const std::vector<int64_t>& byte_strides,
                                               int device) {
  // Validated here because the plugin aborts on some invalid inputs.
  if (ElementSize(type) == 0) {
    throw Error(std::string("BufferFromHost: invalid element type ") +
                    std::to_string(static_cast<int>(type)),
                kInvalidArgument);
  }
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d < 0) throw Error("BufferFromHost: negative dimension", kInvalidArgument);
    elements *= d;
  }
  if (!byte_strides.empty() && byte_strides.size() != dims.size()) {
    throw Error("BufferFromHost: byte_strides has " + std::to_string(byte_strides.size()) +
                    " entries for " + std::to_string(dims.size()) + " dimensions",
                kInvalidArgument);
  }
  if (data == nullptr && elements > 0) {
    throw Error("BufferFromHost: null data", kInvalidArgument);
  }
  Args<PJRT_Client_BufferFromHostBuffer_Args> a;
  a->client = client_;
  a->data = data;
  a->type = static_cast<PJRT_Buffer_Type>(type);
  a->dims = dims.data();
  a->num_dims = dims.size();
  a->byte_strides = byte_strides.empty() ? nullptr : byte_strides.data();
  a->num_byte_strides = byte_strides.size();
  a->host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  a->device = DeviceAt(devices_, device);
  PJRT_CALL(*api_, PJRT_Client_BufferFromHostBuffer, a);
  auto buffer = std::make_unique<Buffer>(api_, a->buffer);
  if (a->done_with_host_buffer != nullptr) {
    Event(api_, a->done_with_host_buffer).Await();
  }
  return buffer;
}

std::unique_ptr<Executable> Client::Compile(const std::string& mlir_text,
                                            const std::string& compile_options, int device) {
  // An empty options string aborts inside the plugin.
  if (compile_options.empty()) {
    throw Error("Compile: empty compile options (use EncodeCompileOptions())", kInvalidArgument);
  }
  PJRT_Device* dev = DeviceAt(devices_, device);
  // Without a device assignment XLA compiles for the first device. Launching
  // on another one needs a portable executable (run on execute_device).
  std::string options = compile_options;
  if (device != 0) options += kPortableExecutable;

  return std::make_unique<Executable>(api_, CompileRaw(mlir_text, options), dev);
}

std::unique_ptr<Executable> Client::CompileForDevices(const std::string& mlir_text,
                                                      const std::vector<int>& replica_devices) {
  if (replica_devices.empty()) throw Error("CompileForDevices: no devices", kInvalidArgument);
  const std::string options =
      EncodeCompileOptions(static_cast<int>(replica_devices.size()), 1, replica_devices);
  return std::make_unique<Executable>(api_, CompileRaw(mlir_text, options), nullptr);
}

PJRT_LoadedExecutable* Client::CompileRaw(const std::string& mlir_text, const std::string& options) {
  Args<PJRT_Program> program;
  // The plugin only reads `code` during compilation; the field is non-const
  // because PJRT_Program is also an output struct elsewhere.
  program->code = const_cast<char*>(mlir_text.data());
  program->code_size = mlir_text.size();
  program->format = "mlir";
  program->format_size = 4;
  Args<PJRT_Client_Compile_Args> a;
  a->client = client_;
  a->program = program.get();
  a->compile_options = options.data();
  a->compile_options_size = options.size();
  PJRT_CALL(*api_, PJRT_Client_Compile, a);
  return a->executable;
}

std::unique_ptr<Executable> Client::Deserialize(const std::string& bytes, int device) {
  std::string error;
  std::unique_ptr<Executable> exe = TryDeserialize(bytes, &error, device);
  if (!exe) throw Error(error, kInvalidArgument);
  return exe;
}

std::unique_ptr<Executable> Client::TryDeserialize(const std::string& bytes, std::string* error,
                                                   int device) {
  PJRT_Device* dev = DeviceAt(devices_, device);
  if (bytes.empty()) {
    *error = "Deserialize: empty executable";
    return nullptr;
  }
  Args<PJRT_Executable_DeserializeAndLoad_Args> a;
  a->client = client_;
  a->serialized_executable = bytes.data();
  a->serialized_executable_size = bytes.size();
  // As in Compile: another device than the first needs a portable executable,
  // which the stored options of an executable compiled for device 0 do not
  // ask for, so they are replaced (this API is single-device anyway).
  std::string options;
  if (device != 0) {
    options = EncodeCompileOptions() + kPortableExecutable;
    a->overridden_serialized_compile_options = options.data();
    a->overridden_serialized_compile_options_size = options.size();
  }
  if (PJRT_Error* e = PJRT_FN(*api_, PJRT_Executable_DeserializeAndLoad)(a.get())) {
    *error = "PJRT_Executable_DeserializeAndLoad failed: " + api_->TakeMessage(e);
    return nullptr;
  }
  return std::make_unique<Executable>(api_, a->loaded_executable, dev);
}

}  // namespace tpu::pjrt
