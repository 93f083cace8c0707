// The events recorded during a profiler session (trace.cc fills them, the
// Kineto session in kineto.cc turns them into trace activities).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "profiler/trace.h"

namespace tpu::profiler {

struct Record {
  enum Kind { kKernel, kExecute, kCompile, kCopyToDevice, kCopyToHost } kind;
  std::string name;
  int64_t start_ns = 0, end_ns = 0;
  uint64_t correlation = 0;  // the ATen op's (0: none)
  uint32_t flow = 0;         // links an execute span to its kernel
  int32_t thread = 0;        // host events: the system thread id
  std::vector<Meta> meta;
};

class Recorder {
 public:
  static Recorder& Get();
  // A session starts and stops recording; Take hands over what it saw.
  void Start();
  void Stop();
  std::vector<Record> Take();
  void Add(Record r);
  // The session generation: a kernel launched in one session and finished
  // after it stopped is dropped.
  uint64_t generation() const { return generation_; }
  // The device's last kernel end (kernels on one device do not overlap).
  int64_t Serialize(int64_t issued_ns, int64_t end_ns);

 private:
  std::mutex mu_;
  std::vector<Record> records_;
  uint64_t generation_ = 0;
  int64_t last_end_ = 0;
};

// The calling thread's system id (Kineto's resource id for host rows).
int32_t ThreadId();

}  // namespace tpu::profiler
