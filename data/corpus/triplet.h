// Triplets: the (instruction, context, code) records of the pretraining corpus, one JSON object
// per line: {"id", "instruction", "context", "code", "source", "tags"}. Implements the JSONL
// reader (every malformed line is a UserError naming file:line) and writer; not the builder
// (corpus_builder.h) nor the tokenization (trainer/).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace kernelrl {

struct Triplet {
  std::string id;                 // unique within a corpus
  std::string instruction;        // what to write (natural language)
  std::string context;            // retrieved documentation passages, may be empty
  std::string code;               // the answer: complete source of one unit or kernel
  std::string source;             // file path[:line] or "family:<name>"
  std::vector<std::string> tags;  // kind and detected features
};

// One JSONL line (no trailing newline).
std::string to_jsonl(const Triplet& t);

// Parses one line; `where` ("file:line") prefixes the UserError for a malformed line: not JSON,
// not an object, a missing or non-string field, tags not a list of strings, or an unknown key.
Triplet parse_triplet(const std::string& line, const std::string& where);

// Calls `fn` for every triplet of a JSONL file (blank lines skipped). Throws UserError with
// file:line for a malformed line and with the path for an unreadable file.
void for_each_triplet(const std::filesystem::path& path,
                      const std::function<void(const Triplet&, int64_t line)>& fn);
std::vector<Triplet> read_triplets(const std::filesystem::path& path);

// Writes a JSONL file atomically.
void write_triplets(const std::filesystem::path& path, const std::vector<Triplet>& triplets);

}  // namespace kernelrl
