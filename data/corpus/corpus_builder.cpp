#include "data/corpus/corpus_builder.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/progress.h"
#include "data/corpus/bm25.h"
#include "data/corpus/minhash.h"

namespace kernelrl {
namespace {

namespace fs = std::filesystem;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::tolower);
  return s;
}

uint64_t hash_str(const std::string& s) {
  return std::hash<std::string>{}(s);
}

// Whitespace-free text: two units equal after it are exact duplicates.
std::string normalized(const std::string& code) {
  std::string out;
  out.reserve(code.size());
  for (char c : code)
    if (!std::isspace(static_cast<unsigned char>(c))) out += c;
  return out;
}

// Share of non-space characters outside comments, and share of digits among them.
void code_shares(const std::string& code, double& code_fraction, double& digit_fraction) {
  int64_t total = 0, in_comment = 0, digits = 0;
  size_t i = 0, n = code.size();
  while (i < n) {
    if (code[i] == '/' && i + 1 < n && (code[i + 1] == '/' || code[i + 1] == '*')) {
      size_t j = code[i + 1] == '/' ? code.find('\n', i) : code.find("*/", i + 2);
      j = j == std::string::npos ? n : (code[i + 1] == '*' ? j + 2 : j);
      for (size_t k = i; k < j; ++k)
        if (!std::isspace(static_cast<unsigned char>(code[k]))) ++in_comment, ++total;
      i = j;
      continue;
    }
    unsigned char c = code[i];
    if (!std::isspace(c)) {
      ++total;
      if (std::isdigit(c)) ++digits;
    }
    ++i;
  }
  int64_t outside = total - in_comment;
  code_fraction = total ? static_cast<double>(outside) / total : 0;
  digit_fraction = outside ? static_cast<double>(digits) / outside : 0;
}

std::string first_sentences(const std::string& doc, size_t max_chars) {
  std::string d = doc;
  // Drop doxygen parameter blocks: they are kept in the signature already.
  for (const char* tag : {"\\param", "@param", "\\return", "@return", "\\tparam", "@tparam",
                          "\\note", "\\see", "@see", "\\code", "\\par"}) {
    size_t p = d.find(tag);
    if (p != std::string::npos && p > 20) d = d.substr(0, p);
  }
  if (d.size() <= max_chars) return d;
  size_t cut = d.rfind(". ", max_chars);
  if (cut != std::string::npos && cut > max_chars / 3) return d.substr(0, cut + 1);
  cut = d.rfind(' ', max_chars);
  return d.substr(0, cut == std::string::npos ? max_chars : cut) + " ...";
}

std::string name_words(const std::string& qualified) {
  std::string base =
      qualified.substr(qualified.rfind(':') == std::string::npos ? 0 : qualified.rfind(':') + 1);
  std::vector<std::string> w = words_of(base);
  std::string out;
  for (size_t i = w.size() > 1 ? 1 : 0; i < w.size(); ++i) out += (out.empty() ? "" : " ") + w[i];
  return out;
}

const std::map<std::string, std::string>& feature_phrases() {
  static const std::map<std::string, std::string> m = {
      {"shared_memory", "shared memory"},
      {"tensor_core_mma", "tensor-core MMA instructions"},
      {"wgmma", "Hopper warpgroup MMA (wgmma)"},
      {"ldmatrix", "ldmatrix fragment loads"},
      {"cp_async", "asynchronous global-to-shared copies (cp.async)"},
      {"tma", "bulk tensor copies (TMA)"},
      {"mbarrier", "mbarrier synchronization"},
      {"warp_shuffle", "warp shuffles"},
      {"warp_vote", "warp vote/match intrinsics"},
      {"warp_reduce", "warp reduction intrinsics"},
      {"atomics", "atomic operations"},
      {"inline_ptx", "inline PTX assembly"},
      {"synchronization", "barrier synchronization"},
      {"half_precision", "half-precision (fp16) arithmetic"},
      {"bfloat16", "bfloat16 arithmetic"},
      {"fp8", "FP8 types"},
      {"vector_types", "vector types for wide memory accesses"},
      {"cooperative_groups", "cooperative groups"},
      {"texture", "texture or surface accesses"},
      {"launch_bounds", "__launch_bounds__"},
      {"thread_indexing", "thread and block indices"},
      {"cache_hints", "cache-hinted loads or stores"},
  };
  return m;
}

}  // namespace

std::string make_instruction(const SourceUnit& u, const std::vector<std::string>& features,
                             const std::string& file) {
  uint64_t h = hash_str(u.name + file);
  static const char* kVerbs[] = {"Write", "Implement", "Write", "Provide"};
  std::string what;
  if (u.kind == "kernel") {
    what = u.is_template ? "CUDA kernel template" : "CUDA kernel";
  } else if (u.kind == "device_function") {
    what = u.is_template ? "CUDA device function template" : "CUDA device function";
  } else if (u.kind == "class") {
    what = u.is_template ? "C++/CUDA class template" : "C++/CUDA class";
  } else {
    what = u.is_template ? "C++ function template" : "C++ function";
  }
  std::ostringstream s;
  s << kVerbs[h % 4] << " the " << what << " `" << u.name << "`";
  if (u.kind != "class") s << " with the signature `" << u.signature << "`";
  s << ".";
  if (!u.doc.empty()) {
    static const char* kLead[] = {
        " Purpose: ", " It should do the following: ", " Documentation: "};
    s << kLead[(h >> 8) % 3] << first_sentences(u.doc, 420);
    if (s.str().back() != '.') s << ".";
  } else {
    std::string w = name_words(u.name);
    if (!w.empty()) s << " As its name says, it concerns: " << w << ".";
  }
  std::vector<std::string> phrases;
  for (const auto& f : features) {
    auto it = feature_phrases().find(f);
    if (it != feature_phrases().end() && f != "thread_indexing") phrases.push_back(it->second);
  }
  if (!phrases.empty()) {
    s << " The implementation uses ";
    for (size_t i = 0; i < phrases.size(); ++i)
      s << (i == 0 ? "" : (i + 1 == phrases.size() ? " and " : ", ")) << phrases[i];
    s << ".";
  }
  s << " It comes from `" << file << "`.";
  return s.str();
}

std::vector<std::string> split_passages(const std::string& text, int64_t passage_chars) {
  std::vector<std::string> out;
  std::string cur, para;
  auto flush_para = [&] {
    std::string p;
    bool sp = false;
    for (char c : para) {
      if (std::isspace(static_cast<unsigned char>(c))) {
        sp = !p.empty();
      } else {
        if (sp) p += ' ';
        sp = false;
        p += c;
      }
    }
    para.clear();
    if (p.empty()) return;
    if (!cur.empty() && static_cast<int64_t>(cur.size() + p.size() + 1) > passage_chars) {
      out.push_back(cur);
      cur.clear();
    }
    cur += (cur.empty() ? "" : " ") + p;
    while (static_cast<int64_t>(cur.size()) > passage_chars) {
      size_t cut = cur.rfind(' ', passage_chars);
      if (cut == std::string::npos || cut < static_cast<size_t>(passage_chars) / 2)
        cut = passage_chars;
      out.push_back(cur.substr(0, cut));
      cur = cur.substr(std::min(cur.size(), cut + 1));
    }
  };
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      flush_para();
    } else {
      para += line;
      para += '\n';
    }
  }
  flush_para();
  if (!cur.empty()) out.push_back(cur);
  return out;
}

std::string CorpusBuildReport::summary() const {
  std::ostringstream s;
  s << "files scanned " << files_scanned << " (skipped " << files_skipped << "), units found "
    << units_found << "\n"
    << "dropped: kind " << dropped_kind << ", too short " << dropped_short << ", too long "
    << dropped_long << ", not code " << dropped_not_code << ", exact duplicates "
    << exact_duplicates << ", near duplicates " << near_duplicates << ", no context " << no_context
    << "\n"
    << "documentation passages " << doc_passages << "\n"
    << "triplets written " << written << " in " << seconds << " s:";
  for (const auto& [k, n] : kinds) s << " " << k << " " << n;
  return s.str();
}

CorpusBuildReport build_corpus(const CorpusBuildConfig& cfg, const std::vector<fs::path>& from,
                               const std::vector<fs::path>& docs, const fs::path& out) {
  auto t0 = std::chrono::steady_clock::now();
  CorpusBuildReport rep;
  if (from.empty()) throw UserError("data build: give at least one --from DIR");
  struct File {
    fs::path path;
    std::string label;  // root name / relative path
  };
  std::vector<File> files;
  auto ext_ok = [&](const fs::path& p) {
    std::string e = lower(p.extension().string());
    return std::find(cfg.extensions.begin(), cfg.extensions.end(), e) != cfg.extensions.end();
  };
  for (const auto& root : from) {
    std::error_code ec;
    if (!fs::exists(root, ec))
      throw UserError("data build: --from " + root.string() + " does not exist");
    fs::path canon = fs::weakly_canonical(root, ec);
    std::string root_name = canon.filename().string();
    if (fs::is_regular_file(canon)) {
      files.push_back({canon, root_name});
      continue;
    }
    for (auto it = fs::recursive_directory_iterator(
             canon, fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      if (!it->is_regular_file(ec) || !ext_ok(it->path())) continue;
      files.push_back({it->path(), root_name + "/" + fs::relative(it->path(), canon, ec).string()});
    }
  }
  std::sort(files.begin(), files.end(),
            [](const File& a, const File& b) { return a.label < b.label; });

  // 1. Scan every file into units; every doc comment becomes a retrieval passage.
  struct Kept {
    SourceUnit unit;
    std::string file;
    int64_t own_passage;
  };
  std::vector<Kept> kept;
  Bm25Index index;
  std::vector<std::string> passages, passage_source;
  std::unordered_map<uint64_t, int64_t> passage_by_hash;
  auto add_passage = [&](const std::string& text, const std::string& source) -> int64_t {
    uint64_t h = hash_str(text);
    auto it = passage_by_hash.find(h);
    if (it != passage_by_hash.end()) return it->second;
    int64_t id = index.add(text);
    passages.push_back(text);
    passage_source.push_back(source);
    passage_by_hash[h] = id;
    return id;
  };
  std::unordered_set<uint64_t> exact;
  MinHashDeduper dedup(cfg.minhash_perm, cfg.minhash_bands, cfg.shingle_tokens,
                       cfg.dedup_threshold);
  if (cfg.minhash_perm % cfg.minhash_bands != 0)
    throw ConfigError("data.build.minhash_bands: must divide minhash_perm");
  Progress progress("scan", static_cast<int64_t>(files.size()));
  for (size_t fi = 0; fi < files.size(); ++fi) {
    const File& f = files[fi];
    std::error_code ec;
    auto size = fs::file_size(f.path, ec);
    if (ec || static_cast<int64_t>(size) > cfg.max_file_bytes) {
      ++rep.files_skipped;
      continue;
    }
    std::ifstream in(f.path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    ++rep.files_scanned;
    std::vector<SourceUnit> units = scan_source(text);
    rep.units_found += static_cast<int64_t>(units.size());
    for (auto& u : units) {
      int64_t own = -1;
      if (u.doc.size() >= 40) {
        std::string p = u.name + ": " + u.doc;
        if (static_cast<int64_t>(p.size()) > cfg.passage_chars) p = p.substr(0, cfg.passage_chars);
        own = add_passage(p, f.label);
      }
      if (std::find(cfg.kinds.begin(), cfg.kinds.end(), u.kind) == cfg.kinds.end()) {
        ++rep.dropped_kind;
        continue;
      }
      int64_t chars = static_cast<int64_t>(u.code.size());
      int64_t lines = std::count(u.code.begin(), u.code.end(), '\n') + 1;
      if (chars < cfg.min_chars || lines < cfg.min_lines) {
        ++rep.dropped_short;
        continue;
      }
      if (chars > cfg.max_chars) {
        ++rep.dropped_long;
        continue;
      }
      double code_fraction, digit_fraction;
      code_shares(u.code, code_fraction, digit_fraction);
      if (code_fraction < cfg.min_code_fraction || digit_fraction > cfg.max_digit_fraction) {
        ++rep.dropped_not_code;
        continue;
      }
      if (!exact.insert(hash_str(normalized(u.code))).second) {
        ++rep.exact_duplicates;
        continue;
      }
      if (dedup.is_duplicate_then_add(u.code)) {
        ++rep.near_duplicates;
        continue;
      }
      kept.push_back({std::move(u), f.label, own});
    }
    if (fi % 64 == 0)
      progress.update(static_cast<int64_t>(fi), std::to_string(kept.size()) + " units");
  }
  progress.finish(std::to_string(kept.size()) + " units");

  // 2. Text and markdown under --docs join the retrieval corpus.
  for (const auto& root : docs) {
    std::error_code ec;
    if (!fs::exists(root, ec))
      throw UserError("data build: --docs " + root.string() + " does not exist");
    std::vector<fs::path> doc_files;
    if (fs::is_regular_file(root)) {
      doc_files.push_back(root);
    } else {
      for (auto it = fs::recursive_directory_iterator(
               root, fs::directory_options::skip_permission_denied, ec);
           it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (ec) break;
        std::string e = lower(it->path().extension().string());
        if (it->is_regular_file(ec) &&
            (e == ".md" || e == ".txt" || e == ".rst" || e == ".markdown"))
          doc_files.push_back(it->path());
      }
    }
    std::sort(doc_files.begin(), doc_files.end());
    for (const auto& p : doc_files)
      for (const auto& passage :
           split_passages(read_file(p, "documentation file"), cfg.passage_chars))
        add_passage(passage, p.filename().string());
  }
  index.finalize();
  rep.doc_passages = index.size();

  // 3. Instruction, context, triplet.
  std::string body;
  const size_t budget = static_cast<size_t>(cfg.context_tokens) * 4;  // 1 token ~ 4 characters
  Progress progress2("retrieve", static_cast<int64_t>(kept.size()));
  for (size_t i = 0; i < kept.size(); ++i) {
    const Kept& k = kept[i];
    std::vector<std::string> features = detect_features(k.unit.code);
    Triplet t;
    t.instruction = make_instruction(k.unit, features, k.file);
    std::string context;
    for (const auto& hit : index.search(t.instruction, cfg.context_top_k, k.own_passage)) {
      std::string piece = "[" + passage_source[hit.doc] + "] " + passages[hit.doc];
      if (context.size() + piece.size() + 1 > budget) {
        if (context.empty()) context = piece.substr(0, budget);
        break;
      }
      context += (context.empty() ? "" : "\n") + piece;
    }
    if (context.empty()) {
      ++rep.no_context;
      continue;
    }
    t.context = std::move(context);
    t.code = k.unit.code;
    t.source = k.file + ":" + std::to_string(k.unit.line);
    t.id = k.file + ":" + std::to_string(k.unit.line) + ":" + k.unit.name;
    t.tags.push_back(k.unit.kind);
    if (k.unit.is_template) t.tags.push_back("template");
    for (auto& f : features) t.tags.push_back(f);
    ++rep.kinds[k.unit.kind];
    body += to_jsonl(t);
    body += '\n';
    ++rep.written;
    if (i % 1024 == 0) progress2.update(static_cast<int64_t>(i));
  }
  progress2.finish();
  atomic_write(out, body);
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

namespace {
int64_t bucket_of(size_t n) {
  int64_t b = 64;
  while (static_cast<size_t>(b) <= n) b *= 2;
  return b / 2 < 64 ? 0 : b / 2;
}
void print_hist(std::ostringstream& s, const char* name, const std::map<int64_t, int64_t>& h) {
  s << name << " length (chars):\n";
  int64_t peak = 1;
  for (auto& [b, n] : h) peak = std::max(peak, n);
  for (auto& [b, n] : h) {
    std::string range = "[" + std::to_string(b) + ", " + std::to_string(b == 0 ? 64 : b * 2) + ")";
    s << "  " << range << std::string(range.size() < 18 ? 18 - range.size() : 1, ' ') << n << " "
      << std::string(static_cast<size_t>(40 * n / peak), '#') << "\n";
  }
}
}  // namespace

CorpusStats corpus_stats(const fs::path& corpus, double dedup_threshold) {
  CorpusStats st;
  std::unordered_set<std::string> ids;
  std::unordered_set<uint64_t> codes;
  MinHashDeduper dedup(64, 16, 5, dedup_threshold);
  for_each_triplet(corpus, [&](const Triplet& t, int64_t) {
    ++st.triplets;
    st.empty_instruction += t.instruction.empty();
    st.empty_context += t.context.empty();
    st.empty_code += t.code.empty();
    if (!ids.insert(t.id).second) ++st.duplicate_ids;
    if (!codes.insert(hash_str(normalized(t.code))).second) {
      ++st.exact_duplicate_code;
    } else if (dedup.is_duplicate_then_add(t.code)) {
      ++st.near_duplicate_code;
    }
    for (const auto& tag : t.tags) ++st.tags[tag];
    ++st.instruction_chars[bucket_of(t.instruction.size())];
    ++st.context_chars[bucket_of(t.context.size())];
    ++st.code_chars[bucket_of(t.code.size())];
  });
  return st;
}

std::string CorpusStats::format() const {
  std::ostringstream s;
  s << "triplets " << triplets << "\n"
    << "empty fields: instruction " << empty_instruction << ", context " << empty_context
    << ", code " << empty_code << "\n"
    << "duplicates: ids " << duplicate_ids << ", exact code " << exact_duplicate_code
    << ", near-duplicate code (MinHash) " << near_duplicate_code << "\n";
  print_hist(s, "instruction", instruction_chars);
  print_hist(s, "context", context_chars);
  print_hist(s, "code", code_chars);
  std::vector<std::pair<int64_t, std::string>> by;
  for (auto& [k, n] : tags) by.push_back({-n, k});
  std::sort(by.begin(), by.end());
  s << "tags:\n";
  for (auto& [n, k] : by)
    s << "  " << k << std::string(k.size() < 20 ? 20 - k.size() : 1, ' ') << -n << "\n";
  return s.str();
}

}  // namespace kernelrl
