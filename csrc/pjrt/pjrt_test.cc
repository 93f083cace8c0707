// Tests of the PJRT client against the real XLA CPU plugin, whose path comes
// from TORCH_TPU_TEST_PLUGIN (CMake's add_test sets it).
#include "pjrt/pjrt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace tpu::pjrt {
namespace {

std::string PluginPath() {
  const char* p = std::getenv("TORCH_TPU_TEST_PLUGIN");
  return p != nullptr ? p : "";
}

// site-packages folder that holds xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so.
std::string SitePackages() {
  const std::string suffix = "/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so";
  std::string path = PluginPath();
  if (path.size() < suffix.size() || path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return "";
  }
  return path.substr(0, path.size() - suffix.size());
}

constexpr char kAddModule[] =
    "module { func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> "
    "(tensor<4xf32>) { %0 = \"stablehlo.add\"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) "
    "-> tensor<4xf32> \"func.return\"(%0) : (tensor<4xf32>) -> () } }";

constexpr char kAddMulModule[] =
    "module { func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> "
    "(tensor<4xf32>, tensor<4xf32>) {\n"
    "  %0 = \"stablehlo.add\"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
    "  %1 = \"stablehlo.multiply\"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
    "  \"func.return\"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> ()\n"
    "} }";

// Argument 0 may be donated to (aliased with) output 0.
constexpr char kAliasedAddModule[] =
    "module { func.func public @main(%arg0: tensor<4xf32> {tf.aliasing_output = 0 : i32}, "
    "%arg1: tensor<4xf32>) -> (tensor<4xf32>) { %0 = \"stablehlo.add\"(%arg0, %arg1) : "
    "(tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> \"func.return\"(%0) : (tensor<4xf32>) -> () } }";

template <typename T>
std::vector<T> ToHostVector(const Buffer& b, size_t n) {
  std::vector<T> out(n);
  b.ToHost(out.data(), n * sizeof(T));
  return out;
}

class PjrtTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_FALSE(PluginPath().empty()) << "set TORCH_TPU_TEST_PLUGIN to the XLA CPU plugin .so";
    client_ = Client::Create(PluginPath(), ClientOptions{1});
  }
  static void TearDownTestSuite() { client_.reset(); }

  std::unique_ptr<Buffer> F32(const std::vector<float>& v) {
    return client_->BufferFromHost(v.data(), ElementType::F32, {static_cast<int64_t>(v.size())});
  }

  static std::shared_ptr<Client> client_;
};
std::shared_ptr<Client> PjrtTest::client_;

// --- client -----------------------------------------------------------------

TEST_F(PjrtTest, ClientBasics) {
  EXPECT_EQ(client_->platform_name(), "cpu");
  EXPECT_EQ(client_->device_count(), 1);
  EXPECT_EQ(client_->plugin_path(), PluginPath());
  auto [major, minor] = client_->api_version();
  EXPECT_EQ(major, 0);
  EXPECT_GE(minor, 81);
  EXPECT_FALSE(client_->device_kind(0).empty());
  EXPECT_THROW(client_->device_kind(1), Error);
  EXPECT_THROW(client_->device_kind(-1), Error);
}

TEST_F(PjrtTest, PluginIdentityNamesPathAndVersion) {
  std::string id = client_->plugin_identity();
  EXPECT_NE(id.find(PluginPath()), std::string::npos) << id;
  auto [major, minor] = client_->api_version();
  EXPECT_NE(id.find(std::to_string(major) + "." + std::to_string(minor)), std::string::npos) << id;
  EXPECT_NE(id.find(client_->platform_version()), std::string::npos) << id;
  EXPECT_EQ(id.find("size=-1"), std::string::npos) << id;
  EXPECT_EQ(id, client_->plugin_identity());  // stable
}

TEST(PjrtClient, CpuDeviceCountIsPassed) {
  auto four = Client::Create(PluginPath(), ClientOptions{4});
  EXPECT_EQ(four->platform_name(), "cpu");
  EXPECT_EQ(four->device_count(), 4);
  for (int d = 0; d < 4; ++d) EXPECT_FALSE(four->device_kind(d).empty());
}

TEST(PjrtClient, RunsOnANonFirstDevice) {
  auto four = Client::Create(PluginPath(), ClientOptions{4});
  auto exe = four->Compile(kAddModule, EncodeCompileOptions(), /*device=*/2);
  std::vector<float> a = {1, 2, 3, 4}, b = {10, 20, 30, 40};
  auto ba = four->BufferFromHost(a.data(), ElementType::F32, {4}, {}, 2);
  auto bb = four->BufferFromHost(b.data(), ElementType::F32, {4}, {}, 2);
  auto out = exe->Execute({ba->raw(), bb->raw()});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(ToHostVector<float>(*out[0], 4), (std::vector<float>{11, 22, 33, 44}));

  // An executable compiled for device 0 can be loaded for device 2 and back.
  auto first = four->Compile(kAddModule, EncodeCompileOptions(), 0);
  auto moved = four->Deserialize(first->Serialize(), 2);
  auto out2 = moved->Execute({ba->raw(), ba->raw()});
  EXPECT_EQ(ToHostVector<float>(*out2[0], 4), (std::vector<float>{2, 4, 6, 8}));
  auto back = four->Deserialize(exe->Serialize(), 0);
  auto ca = four->BufferFromHost(a.data(), ElementType::F32, {4});
  auto out3 = back->Execute({ca->raw(), ca->raw()});
  EXPECT_EQ(ToHostVector<float>(*out3[0], 4), (std::vector<float>{2, 4, 6, 8}));
  // Arguments on another device than the executable's are an error, not a crash.
  EXPECT_THROW(first->Execute({ba->raw(), bb->raw()}), Error);
}

TEST(PjrtClient, LoadErrorsAreReported) {
  try {
    Client::Create("/nonexistent/dir/plugin_cpu.so");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/plugin_cpu.so"), std::string::npos) << e.what();
  }
  // A real shared library that is no PJRT plugin.
  try {
    Client::Create("libm.so.6");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GetPjrtApi"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Client::Create(PluginPath(), ClientOptions{0}), Error);
}

TEST_F(PjrtTest, MemoryStatsDoesNotThrow) {
  auto keep = F32({1, 2, 3, 4});
  MemoryStats s;
  EXPECT_NO_THROW(s = client_->memory_stats(0));
  EXPECT_GE(s.bytes_in_use, 0);
  if (!s.peak_known) {
    EXPECT_EQ(s.peak_bytes_in_use, 0);
  }
  if (!s.limit_known) {
    EXPECT_EQ(s.bytes_limit, 0);
  }
  EXPECT_THROW(client_->memory_stats(3), Error);
}

// --- buffers ------------------------------------------------------------------

TEST_F(PjrtTest, RoundTripF32) {
  std::vector<float> v = {1.5f, -2.25f, 3e10f, 0.f, -0.f, 7.f};
  auto b = client_->BufferFromHost(v.data(), ElementType::F32, {2, 3});
  EXPECT_EQ(b->element_type(), ElementType::F32);
  EXPECT_EQ(b->dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b->on_device_size_bytes(), 24u);
  auto back = ToHostVector<float>(*b, 6);
  EXPECT_EQ(std::memcmp(back.data(), v.data(), 24), 0);
}

TEST_F(PjrtTest, RoundTripBf16Bits) {
  // 1.0, -2.0, smallest subnormal, NaN, +inf
  std::vector<uint16_t> v = {0x3f80, 0xc000, 0x0001, 0x7fc0, 0x7f80};
  auto b = client_->BufferFromHost(v.data(), ElementType::BF16, {5});
  EXPECT_EQ(b->element_type(), ElementType::BF16);
  EXPECT_EQ(b->on_device_size_bytes(), 10u);
  EXPECT_EQ(ToHostVector<uint16_t>(*b, 5), v);
}

TEST_F(PjrtTest, RoundTripS64) {
  std::vector<int64_t> v = {INT64_MIN, -1, 0, 1, INT64_MAX, 1LL << 40};
  auto b = client_->BufferFromHost(v.data(), ElementType::S64, {3, 2});
  EXPECT_EQ(b->element_type(), ElementType::S64);
  EXPECT_EQ(b->dims(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(ToHostVector<int64_t>(*b, 6), v);
}

TEST_F(PjrtTest, RoundTripPred) {
  std::vector<uint8_t> v = {1, 0, 0, 1, 1};  // bool bytes
  auto b = client_->BufferFromHost(v.data(), ElementType::PRED, {5});
  EXPECT_EQ(b->element_type(), ElementType::PRED);
  EXPECT_EQ(ToHostVector<uint8_t>(*b, 5), v);
}

TEST_F(PjrtTest, RoundTripU8AndScalar) {
  std::vector<uint8_t> v = {0, 1, 127, 128, 255, 42, 7, 9};
  auto b = client_->BufferFromHost(v.data(), ElementType::U8, {2, 2, 2});
  EXPECT_EQ(b->element_type(), ElementType::U8);
  EXPECT_EQ(ToHostVector<uint8_t>(*b, 8), v);

  double x = 3.25;
  auto s = client_->BufferFromHost(&x, ElementType::F64, {});
  EXPECT_TRUE(s->dims().empty());
  EXPECT_EQ(ToHostVector<double>(*s, 1)[0], 3.25);
}

TEST_F(PjrtTest, HostDataMayBeFreedAfterTheCall) {
  auto v = std::make_unique<std::vector<float>>(std::vector<float>{4, 3, 2, 1});
  auto b = client_->BufferFromHost(v->data(), ElementType::F32, {4});
  std::fill(v->begin(), v->end(), -1.f);
  v.reset();
  EXPECT_EQ(ToHostVector<float>(*b, 4), (std::vector<float>{4, 3, 2, 1}));
}

TEST_F(PjrtTest, StridedHostInputIsTransposed) {
  // x is 2x3 row-major; read it as its 3x2 transpose through byte strides.
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  auto b = client_->BufferFromHost(x.data(), ElementType::F32, {3, 2},
                                   {sizeof(float), 3 * sizeof(float)});
  EXPECT_EQ(b->dims(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(ToHostVector<float>(*b, 6), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST_F(PjrtTest, InvalidBufferInputsThrowBeforeReachingThePlugin) {
  float x = 1;
  try {
    client_->BufferFromHost(&x, ElementType::INVALID, {1});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), 3);
  }
  EXPECT_THROW(client_->BufferFromHost(&x, static_cast<ElementType>(99), {1}), Error);
  EXPECT_THROW(client_->BufferFromHost(&x, ElementType::F32, {1}, {4, 4}), Error);
  EXPECT_THROW(client_->BufferFromHost(&x, ElementType::F32, {-1}), Error);
  EXPECT_THROW(client_->BufferFromHost(nullptr, ElementType::F32, {1}), Error);
  EXPECT_THROW(client_->BufferFromHost(&x, ElementType::F32, {1}, {}, 1), Error);
}

TEST_F(PjrtTest, BufferReadyEventAwaits) {
  auto b = F32({1, 2, 3, 4});
  auto ev = b->ReadyEvent();
  EXPECT_NO_THROW(ev->Await());
  EXPECT_TRUE(ev->IsReady());
}

// --- compile and execute -----------------------------------------------------

TEST_F(PjrtTest, CompileAndExecuteAdd) {
  auto exe = client_->Compile(kAddModule);
  EXPECT_EQ(exe->num_outputs(), 1u);
  auto a = F32({1, 2, 3, 4});
  auto b = F32({10, 20, 30, 40});
  for (int run = 0; run < 2; ++run) {  // the executable is reusable
    std::unique_ptr<Event> done;
    auto out = exe->Execute({a->raw(), b->raw()}, {}, &done);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_NE(done, nullptr);
    done->Await();
    EXPECT_TRUE(done->IsReady());
    EXPECT_EQ(out[0]->element_type(), ElementType::F32);
    EXPECT_EQ(out[0]->dims(), (std::vector<int64_t>{4}));
    EXPECT_EQ(ToHostVector<float>(*out[0], 4), (std::vector<float>{11, 22, 33, 44}));
  }
  // Inputs are untouched and still usable.
  EXPECT_EQ(ToHostVector<float>(*a, 4), (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(PjrtTest, ExecuteTwoOutputs) {
  auto exe = client_->Compile(kAddMulModule);
  EXPECT_EQ(exe->num_outputs(), 2u);
  auto a = F32({1, 2, 3, 4});
  auto b = F32({5, 6, 7, 8});
  auto out = exe->Execute({a->raw(), b->raw()});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(ToHostVector<float>(*out[0], 4), (std::vector<float>{6, 8, 10, 12}));
  EXPECT_EQ(ToHostVector<float>(*out[1], 4), (std::vector<float>{5, 12, 21, 32}));
}

TEST_F(PjrtTest, ExecuteWithWrongArgumentCountThrows) {
  auto exe = client_->Compile(kAddModule);
  auto a = F32({1, 2, 3, 4});
  EXPECT_THROW(exe->Execute({a->raw()}), Error);
  EXPECT_THROW(exe->Execute({a->raw(), nullptr}), Error);
}

TEST_F(PjrtTest, NonDonatableInputSurvivesAliasedProgram) {
  auto exe = client_->Compile(kAliasedAddModule);
  auto a = F32({1, 2, 3, 4});
  auto b = F32({1, 1, 1, 1});
  auto out = exe->Execute({a->raw(), b->raw()}, /*non_donatable=*/{0});
  EXPECT_EQ(ToHostVector<float>(*out[0], 4), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(ToHostVector<float>(*a, 4), (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(PjrtTest, CompileErrorThrowsAndClientStaysUsable) {
  try {
    client_->Compile("module { this is not mlir }");
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("PJRT_Client_Compile failed: "), std::string::npos) << what;
    EXPECT_GT(what.size(), std::strlen("PJRT_Client_Compile failed: ")) << what;
    EXPECT_NE(e.code(), 0);
  }
  auto exe = client_->Compile(kAddModule);
  auto a = F32({1, 1, 1, 1});
  auto out = exe->Execute({a->raw(), a->raw()});
  EXPECT_EQ(ToHostVector<float>(*out[0], 4), (std::vector<float>{2, 2, 2, 2}));
}

TEST_F(PjrtTest, EmptyCompileOptionsAreRejected) {
  try {
    client_->Compile(kAddModule, "");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), 3);
  }
}

TEST_F(PjrtTest, OptionOverridesReachThePlugin) {
  // An option the plugin does not know is refused: the overrides are read.
  try {
    client_->Compile(kAddModule, EncodeCompileOptions() +
                                     EncodeOptionOverride("xla_no_such_option", int64_t{0}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("xla_no_such_option"), std::string::npos) << e.what();
  }
  // Overrides of both kinds compile a program that computes the same.
  auto exe = client_->Compile(
      kAddMulModule, EncodeCompileOptions() +
                         EncodeOptionOverride("xla_backend_optimization_level", int64_t{0}) +
                         EncodeBoolOptionOverride("xla_cpu_use_fusion_emitters", false));
  auto a = F32({1, 2, 3, 4});
  auto b = F32({2, 2, 2, 2});
  auto got = exe->Execute({a->raw(), b->raw()});
  EXPECT_EQ(ToHostVector<float>(*got[0], 4), (std::vector<float>{3, 4, 5, 6}));
  EXPECT_EQ(ToHostVector<float>(*got[1], 4), (std::vector<float>{2, 4, 6, 8}));
}

TEST_F(PjrtTest, SerializeDeserializeRoundTrip) {
  auto exe = client_->Compile(kAddMulModule);
  std::string bytes = exe->Serialize();
  ASSERT_FALSE(bytes.empty());
  auto loaded = client_->Deserialize(bytes);
  EXPECT_EQ(loaded->num_outputs(), 2u);
  auto a = F32({1, 2, 3, 4});
  auto b = F32({2, 2, 2, 2});
  auto expected = exe->Execute({a->raw(), b->raw()});
  auto got = loaded->Execute({a->raw(), b->raw()});
  ASSERT_EQ(got.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ToHostVector<float>(*got[i], 4), ToHostVector<float>(*expected[i], 4));
  }
  EXPECT_EQ(ToHostVector<float>(*got[1], 4), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_THROW(client_->Deserialize(""), Error);
}

TEST_F(PjrtTest, OnReadyCallbackIsInvoked) {
  auto exe = client_->Compile(kAddModule);
  auto a = F32({1, 2, 3, 4});
  std::unique_ptr<Event> done;
  auto out = exe->Execute({a->raw(), a->raw()}, {}, &done);
  std::promise<std::string> called;
  done->OnReady([&](const std::string& error) { called.set_value(error); });
  auto f = called.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(f.get(), "");

  // Also on an event that is already ready.
  done->Await();
  std::promise<std::string> again;
  done->OnReady([&](const std::string& error) { again.set_value(error); });
  auto g = again.get_future();
  ASSERT_EQ(g.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(g.get(), "");
}

TEST_F(PjrtTest, ConcurrentExecution) {
  auto exe = client_->Compile(kAddModule);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      float base = static_cast<float>(t);
      std::vector<float> x = {base, base, base, base};
      for (int i = 0; i < 20; ++i) {
        auto b = client_->BufferFromHost(x.data(), ElementType::F32, {4});
        auto out = exe->Execute({b->raw(), b->raw()});
        std::vector<float> r(4);
        out[0]->ToHost(r.data(), sizeof(float) * 4);
        if (r == std::vector<float>(4, 2 * base)) ++ok[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(ok[t], 20) << "thread " << t;
}

// --- compile options ----------------------------------------------------------

TEST(PjrtCompileOptions, Encoding) {
  EXPECT_EQ(EncodeCompileOptions(1, 1), std::string("\x1a\x04\x20\x01\x28\x01", 6));
  EXPECT_EQ(EncodeCompileOptions(), EncodeCompileOptions(1, 1));
  EXPECT_EQ(EncodeCompileOptions(2, 1), std::string("\x1a\x04\x20\x02\x28\x01", 6));
  EXPECT_EQ(EncodeCompileOptions(1, 8), std::string("\x1a\x04\x20\x01\x28\x08", 6));
  // Multi-byte varint: 300 = 0xac 0x02.
  EXPECT_EQ(EncodeCompileOptions(300, 1), std::string("\x1a\x05\x20\xac\x02\x28\x01", 7));
  EXPECT_THROW(EncodeCompileOptions(0, 1), Error);
  // env_option_overrides = 7 { key = 1: "ab", value = 2 { int_field = 3: 5 } }.
  EXPECT_EQ(EncodeOptionOverride("ab", int64_t{5}),
            std::string("\x3a\x08\x0a\x02" "ab" "\x12\x02\x18\x05", 10));
  // ... { bool_field = 2: true }.
  EXPECT_EQ(EncodeBoolOptionOverride("ab", true),
            std::string("\x3a\x08\x0a\x02" "ab" "\x12\x02\x10\x01", 10));
}

TEST(PjrtElementTypes, SizesAndNames) {
  EXPECT_EQ(ElementSize(ElementType::PRED), 1u);
  EXPECT_EQ(ElementSize(ElementType::BF16), 2u);
  EXPECT_EQ(ElementSize(ElementType::F32), 4u);
  EXPECT_EQ(ElementSize(ElementType::S64), 8u);
  EXPECT_EQ(ElementSize(ElementType::C128), 16u);
  EXPECT_EQ(ElementSize(ElementType::INVALID), 0u);
  EXPECT_STREQ(ElementTypeName(ElementType::BF16), "bf16");
  EXPECT_STREQ(ElementTypeName(ElementType::PRED), "pred");
}

// --- plugin discovery -----------------------------------------------------------

TEST(PjrtFindPlugin, ExplicitPathWins) {
  PluginChoice c = FindPlugin(PluginPath(), "", {});
  EXPECT_EQ(c.path, PluginPath());
  EXPECT_EQ(c.platform, "");
}

TEST(PjrtFindPlugin, MissingExplicitPathNamesTheVariable) {
  try {
    FindPlugin("/nonexistent/libfoo.so", "", {SitePackages()});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TORCH_TPU_PLUGIN_PATH"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("/nonexistent/libfoo.so"), std::string::npos) << e.what();
  }
}

TEST(PjrtFindPlugin, NothingFoundExplainsTheFix) {
  for (const auto& dirs : {std::vector<std::string>{}, std::vector<std::string>{"/nonexistent"}}) {
    try {
      FindPlugin("", "", dirs);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      std::string what = e.what();
      EXPECT_EQ(e.code(), 5);
      EXPECT_NE(what.find("pip install xla-cpu-pjrt==0.0.1"), std::string::npos) << what;
      EXPECT_NE(what.find("TORCH_TPU_PLUGIN_PATH"), std::string::npos) << what;
    }
  }
  EXPECT_THROW(FindPlugin("", "tpu", {SitePackages()}), Error);  // no libtpu here
  EXPECT_THROW(FindPlugin("", "quantum", {SitePackages()}), Error);
}

TEST(PjrtFindPlugin, FindsTheCpuPluginInSitePackages) {
  ASSERT_FALSE(SitePackages().empty()) << "unexpected plugin path layout: " << PluginPath();
  PluginChoice c = FindPlugin("", "cpu", {"/nonexistent", SitePackages()});
  EXPECT_EQ(c.path, SitePackages() + "/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so");
  EXPECT_EQ(c.platform, "cpu");
  auto client = Client::Create(c.path);
  EXPECT_EQ(client->platform_name(), "cpu");

  // Auto mode finds some plugin (the CPU one unless a TPU/GPU plugin is installed too).
  PluginChoice any = FindPlugin("", "", {SitePackages()});
  EXPECT_FALSE(any.path.empty());
  EXPECT_FALSE(any.platform.empty());
}

// --- programs on several devices ---------------------------------------------

// Sums its argument over the replicas, then adds the replica's id.
constexpr char kAllReduceModule[] =
    "module @main attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 3 : i32} {\n"
    "  func.func public @main(%arg0: tensor<2xf32>) -> (tensor<2xf32>) {\n"
    "    %0 = \"stablehlo.all_reduce\"(%arg0) ({\n"
    "      ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
    "        %s = \"stablehlo.add\"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
    "        \"stablehlo.return\"(%s) : (tensor<f32>) -> ()\n"
    "    }) {replica_groups = dense<[[0, 1, 2]]> : tensor<1x3xi64>} : (tensor<2xf32>) -> tensor<2xf32>\n"
    "    %1 = \"stablehlo.replica_id\"() : () -> tensor<ui32>\n"
    "    %2 = \"stablehlo.convert\"(%1) : (tensor<ui32>) -> tensor<f32>\n"
    "    %3 = \"stablehlo.broadcast_in_dim\"(%2) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<2xf32>\n"
    "    %4 = \"stablehlo.add\"(%0, %3) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>\n"
    "    \"func.return\"(%4) : (tensor<2xf32>) -> ()\n"
    "  }\n"
    "}\n";

TEST(PjrtClient, DeviceAssignmentIsEncoded) {
  // CompileOptionsProto{3: ExecutableBuildOptionsProto{4: 2, 5: 1,
  //   9: DeviceAssignmentProto{1: 2, 2: 1, 3: {1: 3, 1: 1}}}}.
  const std::string got = EncodeCompileOptions(2, 1, {3, 1});
  const std::string want("\x1a\x10\x20\x02\x28\x01\x4a\x0a\x08\x02\x10\x01\x1a\x04\x08\x03\x08\x01", 18);
  EXPECT_EQ(got, want);
  EXPECT_THROW(EncodeCompileOptions(2, 1, {3}), Error);
  EXPECT_THROW(EncodeCompileOptions(2, 2, {0, 1}), Error);
}

TEST(PjrtClient, RunsOneProgramOnSeveralDevicesInTheAssignedOrder) {
  auto four = Client::Create(PluginPath(), ClientOptions{4});
  auto global = four->global_devices();
  ASSERT_EQ(global.size(), 4u);
  for (const auto& [id, process] : global) EXPECT_EQ(process, 0);
  // Replica 0 on device 3, replica 1 on device 0, replica 2 on device 2.
  const std::vector<int> assignment = {four->device_id(3), four->device_id(0), four->device_id(2)};
  auto exe = four->CompileForDevices(kAllReduceModule, assignment);
  std::vector<int> order = exe->addressable_device_ids();
  ASSERT_EQ(order.size(), 3u);
  std::vector<std::unique_ptr<Buffer>> keep;
  std::vector<std::vector<PJRT_Buffer*>> args;
  for (int id : order) {
    int index = 0;
    while (four->device_id(index) != id) ++index;
    std::vector<float> v = {static_cast<float>(index), 10.0f * index};
    keep.push_back(four->BufferFromHost(v.data(), ElementType::F32, {2}, {}, index));
    args.push_back({keep.back()->raw()});
  }
  auto outs = exe->ExecuteOnDevices(args);
  ASSERT_EQ(outs.size(), 3u);
  for (size_t i = 0; i < outs.size(); ++i) {
    // Sum over devices 3, 0 and 2 = (5, 50), plus this device's replica id.
    const int id = order[i];
    const float replica = static_cast<float>(
        std::find(assignment.begin(), assignment.end(), id) - assignment.begin());
    EXPECT_EQ(ToHostVector<float>(*outs[i][0], 2), (std::vector<float>{5 + replica, 50 + replica}));
  }
  EXPECT_THROW(exe->ExecuteOnDevices({{keep[0]->raw()}, {keep[1]->raw(), keep[2]->raw()}}), Error);
}

}  // namespace
}  // namespace tpu::pjrt
