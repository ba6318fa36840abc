#include "common/tensorboard.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>

#include "common/error.h"

namespace kernelrl {
namespace {

std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected 0x1EDC6F41
    t[i] = c;
  }
  return t;
}

// Protobuf wire format helpers.
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void tag(std::string& out, int field, int wire) { varint(out, (uint64_t(field) << 3) | wire); }
void fixed64(std::string& out, const void* p) { out.append(static_cast<const char*>(p), 8); }
void fixed32(std::string& out, const void* p) { out.append(static_cast<const char*>(p), 4); }
void bytes_field(std::string& out, int field, const std::string& b) {
  tag(out, field, 2);
  varint(out, b.size());
  out += b;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
std::string event(int64_t step, const std::string* file_version, const std::string* summary) {
  std::string e;
  double t = now_s();
  tag(e, 1, 1);
  fixed64(e, &t);
  tag(e, 2, 0);
  varint(e, static_cast<uint64_t>(step));
  if (file_version) bytes_field(e, 3, *file_version);
  if (summary) bytes_field(e, 5, *summary);
  return e;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  static const auto table = make_table();
  uint32_t c = 0xFFFFFFFFu;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir) {
  if (dir.empty()) return;
  std::filesystem::create_directories(dir);
  char host[64] = "host";
  ::gethostname(host, sizeof host - 1);
  path_ = dir / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(now_s())) + "." +
                 host + ".kernelrl");
  file_ = std::fopen(path_.c_str(), "ab");
  if (!file_) throw UserError("cannot create TensorBoard event file '" + path_.string() + "'");
  const std::string version = "brain.Event:2";
  write_record(event(0, &version, nullptr));
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::scalar(const std::string& name, double value, int64_t step) {
  if (!file_) return;
  // Summary { repeated Value value = 1; }  Value { string tag = 1; float simple_value = 2; }
  std::string v;
  bytes_field(v, 1, name);
  float f = static_cast<float>(value);
  tag(v, 2, 5);
  fixed32(v, &f);
  std::string summary;
  bytes_field(summary, 1, v);
  write_record(event(step, nullptr, &summary));
}

void TensorBoardWriter::flush() {
  if (file_) std::fflush(file_);
}

void TensorBoardWriter::write_record(const std::string& payload) {
  // TFRecord: uint64 length, uint32 masked_crc(length), data, uint32 masked_crc(data).
  uint64_t len = payload.size();
  uint32_t len_crc = masked_crc32c(&len, sizeof len);
  uint32_t data_crc = masked_crc32c(payload.data(), payload.size());
  std::fwrite(&len, sizeof len, 1, file_);
  std::fwrite(&len_crc, sizeof len_crc, 1, file_);
  std::fwrite(payload.data(), 1, payload.size(), file_);
  std::fwrite(&data_crc, sizeof data_crc, 1, file_);
}

}  // namespace kernelrl
