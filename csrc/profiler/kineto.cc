// The tpu device's Kineto child profiler, registered for the PrivateUse1
// backend. torch.profiler (Kineto) configures a session when a trace
// starts, pushes each ATen op's correlation id to it on the op's thread,
// and at the end asks it for its activities:
//   - a kernel (CONCURRENT_KERNEL) on the tpu device row for every program
//     that ran, linked to the op that launched it (in Fused Eager: the op
//     that flushed), so that key_averages() fills the device columns;
//   - a "tpu::execute" span (PRIVATEUSE1_RUNTIME) on the launching thread,
//     with a flow arrow to the kernel;
//   - "tpu::compile" / "tpu::load_executable" spans with the cache tier;
//   - memcpy events (GPU_MEMCPY) for host<->device copies, with bytes.
// Kernel times come from PJRT completion events (any plugin, CPU included).
//
// This file alone includes Kineto's headers (built with USE_KINETO).
#include <IActivityProfiler.h>
#include <ThreadUtil.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "device/allocator.h"
#include "lazy/runtime.h"
#include "profiler/recorder.h"

namespace tpu::profiler {
namespace {

using libkineto::ActivityType;

constexpr int64_t kStream = 1;  // the one resource (queue) of the device row

bool Wanted(const std::set<ActivityType>& types, Record::Kind kind) {
  switch (kind) {
    case Record::kKernel:
      return types.count(ActivityType::CONCURRENT_KERNEL) != 0;
    case Record::kCopyToDevice:
    case Record::kCopyToHost:
      return types.count(ActivityType::GPU_MEMCPY) != 0;
    case Record::kExecute:
    case Record::kCompile:
      return types.count(ActivityType::PRIVATEUSE1_RUNTIME) != 0;
  }
  return false;
}

class TpuSession final : public libkineto::IActivityProfilerSession {
 public:
  explicit TpuSession(std::set<ActivityType> types) : types_(std::move(types)) {}
  ~TpuSession() override {
    if (recording_) Recorder::Get().Stop();
  }

  void start() override {
    start_ns_ = NowNs();
    recording_ = true;
    status_ = libkineto::TraceStatus::RECORDING;
    Recorder::Get().Start();
  }

  void stop() override {
    // Programs launched while recording finish first, so that their kernels
    // are in the trace (as a CUDA trace holds the kernels the ops launched).
    if (lazy::Runtime::initialized()) lazy::Runtime::Get().AwaitPending();
    Recorder::Get().Stop();
    recording_ = false;
    end_ns_ = NowNs();
    records_ = Recorder::Get().Take();
    status_ = libkineto::TraceStatus::READY;
  }

  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; },
                 start_ns_, end_ns_);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked, int64_t start_time,
                    int64_t end_time) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(start_ns_, end_ns_, "tpu");
    buffer_->gpuOpCount = 0;
    const int32_t pid = libkineto::processId();
    const int32_t device = static_cast<int32_t>(device::ProcessDevice());
    for (Record& r : records_) {
      if (!Wanted(types_, r.kind)) continue;
      const ActivityType type = r.kind == Record::kKernel ? ActivityType::CONCURRENT_KERNEL
                                : r.kind == Record::kExecute || r.kind == Record::kCompile
                                    ? ActivityType::PRIVATEUSE1_RUNTIME
                                    : ActivityType::GPU_MEMCPY;
      buffer_->emplace_activity(buffer_->span, type, r.name);
      libkineto::GenericTraceActivity& a = *buffer_->activities.back();
      a.startTime = r.start_ns;
      a.endTime = r.end_ns;
      const bool on_device = type != ActivityType::PRIVATEUSE1_RUNTIME;
      a.device = on_device ? device : pid;
      a.resource = on_device ? kStream : r.thread;
      a.threadId = on_device ? 0 : r.thread;
      a.id = static_cast<int32_t>(r.flow ? r.flow : r.correlation);
      if (r.correlation != 0) a.linked = linked(static_cast<int32_t>(r.correlation));
      if (r.flow != 0) {
        a.flow.id = r.flow;
        a.flow.type = libkineto::kLinkAsyncCpuGpu;
        a.flow.start = r.kind == Record::kExecute;
      }
      if (on_device) {
        a.addMetadataQuoted("device", "tpu:" + std::to_string(device));
        ++buffer_->span.opCount;
        ++buffer_->gpuOpCount;
      }
      for (const Meta& m : r.meta) {
        if (m.quoted) {
          a.addMetadataQuoted(m.key, m.value);
        } else {
          a.addMetadata(m.key, m.value);
        }
      }
      a.log(logger);
    }
    records_.clear();
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    const int32_t device = static_cast<int32_t>(device::ProcessDevice());
    std::string label = "TPU " + std::to_string(device);
    if (lazy::Runtime::initialized()) label += " (" + lazy::Runtime::Get().device_name() + ")";
    // Device rows sort after the host's (Kineto puts GPUs at pid + 2^24).
    return std::make_unique<libkineto::DeviceInfo>(
        libkineto::DeviceInfo{device, device + (int64_t{1} << 24), "tpu:" + std::to_string(device), label});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    const int32_t device = static_cast<int32_t>(device::ProcessDevice());
    return {libkineto::ResourceInfo{kStream, kStream, device, "programs"}};
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override { PushCorrelation(id); }
  void popCorrelationId() override { PopCorrelation(); }

  std::unordered_map<std::string, std::string> getMetadata() override {
    if (!lazy::Runtime::initialized()) return {};
    return {{"tpu_device", "\"" + lazy::Runtime::Get().device_name() + "\""}};
  }

 private:
  std::set<ActivityType> types_;
  bool recording_ = false;
  int64_t start_ns_ = 0, end_ns_ = 0;
  std::vector<Record> records_;
  std::vector<std::string> errors_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class TpuActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return types_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& activity_types, const libkineto::Config& config) override {
    std::set<ActivityType> wanted;
    for (ActivityType t : activity_types)
      if (types_.count(t)) wanted.insert(t);
    if (wanted.empty()) return nullptr;
    return std::make_unique<TpuSession>(std::move(wanted));
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<ActivityType>& activity_types,
      const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_ = "torch_tpu";
  std::set<ActivityType> types_{ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
                                ActivityType::PRIVATEUSE1_RUNTIME};
};

}  // namespace

REGISTER_PRIVATEUSE1_PROFILER(TpuActivityProfiler);

}  // namespace tpu::profiler
