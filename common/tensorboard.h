// TensorBoard event files, written directly: TFRecord framing (length, masked CRC-32C) around
// hand-encoded tensorflow.Event protos carrying scalar summaries, so `tensorboard --logdir
// runs/` shows a run's curves with no TensorFlow or protobuf dependency. Scalars only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace kernelrl {

// CRC-32C (Castagnoli), as TFRecord uses it; masked as ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t crc32c(const void* data, size_t n);
uint32_t masked_crc32c(const void* data, size_t n);

class TensorBoardWriter {
 public:
  // Creates <dir>/events.out.tfevents.<unix time>.<host>.kernelrl and writes the version event.
  // An empty dir writes nothing (the ranks other than 0 of a multi-process job).
  explicit TensorBoardWriter(const std::filesystem::path& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void scalar(const std::string& tag, double value, int64_t step);
  void flush();
  const std::filesystem::path& path() const { return path_; }

 private:
  void write_record(const std::string& payload);
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

}  // namespace kernelrl
