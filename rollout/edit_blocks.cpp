#include "rollout/edit_blocks.h"

#include <algorithm>
#include <cstring>

namespace kernelrl {
namespace {

std::string lf(const std::string& s) {  // CR LF -> LF
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i)
    if (!(s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n')) out += s[i];
  return out;
}

std::string with_final_newline(std::string s) {
  if (!s.empty() && s.back() != '\n') s += '\n';
  return s;
}

// The lines of `s`, each without its '\n' (a last line without one included).
std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  size_t b = 0;
  while (b < s.size()) {
    size_t e = s.find('\n', b);
    if (e == std::string::npos) e = s.size();
    lines.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return lines;
}

bool is_marker(const std::string& line, const char* marker) {
  const size_t n = std::strlen(marker);
  if (line.compare(0, n, marker) != 0) return false;
  return line.find_first_not_of(" \t", n) == std::string::npos;
}

// Matches of `search` in `text` that start at a line start (overlapping ones count); the first
// at *first.
int64_t count_matches(const std::string& text, const std::string& search, size_t* first) {
  int64_t n = 0;
  for (size_t pos = text.find(search); pos != std::string::npos; pos = text.find(search, pos + 1))
    if (pos == 0 || text[pos - 1] == '\n') {
      if (n++ == 0 && first) *first = pos;
    }
  return n;
}

std::string first_line(const std::string& s) {
  std::string l = s.substr(0, s.find('\n'));
  return l.size() > 80 ? l.substr(0, 80) + "..." : l;
}

EditResult fail(EditFailure f, std::string reason) {
  EditResult r;
  r.failure = f;
  r.reason = std::move(reason);
  return r;
}

std::string join(const std::vector<std::string>& lines, size_t b, size_t e) {
  std::string s;
  for (size_t i = b; i < e; ++i) s += lines[i] + "\n";
  return s;
}

}  // namespace

const char* edit_failure_name(EditFailure f) {
  switch (f) {
    case EditFailure::none: return "";
    case EditFailure::empty: return "edit_empty";
    case EditFailure::malformed: return "edit_malformed";
    case EditFailure::no_match: return "edit_no_match";
    case EditFailure::ambiguous: return "edit_ambiguous";
  }
  return "";
}

EditResult parse_edit_blocks(const std::string& completion) {
  enum { outside, in_search, in_replace } state = outside;
  EditResult r;
  EditBlock cur;
  const std::vector<std::string> lines = split_lines(lf(completion));
  auto where = [&](size_t i) { return "line " + std::to_string(i + 1); };
  auto block_no = [&] { return "block " + std::to_string(r.blocks.size() + 1); };
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const bool search = is_marker(line, kEditSearchMarker), divider = is_marker(line, kEditDividerMarker),
               replace = is_marker(line, kEditReplaceMarker);
    switch (state) {
      case outside:
        if (search) {
          state = in_search;
          cur = {};
        } else if (divider || replace) {
          return fail(EditFailure::malformed, where(i) + ": '" + line + "' outside a block");
        }
        break;
      case in_search:
        if (search || replace)
          return fail(EditFailure::malformed,
                      block_no() + " (" + where(i) + "): '" + line + "' before its " + kEditDividerMarker);
        if (divider) {
          if (cur.search.empty())
            return fail(EditFailure::malformed, block_no() + ": an empty SEARCH text");
          state = in_replace;
        } else {
          cur.search += line + "\n";
        }
        break;
      case in_replace:
        if (search || divider)
          return fail(EditFailure::malformed,
                      block_no() + " (" + where(i) + "): '" + line + "' before its " + kEditReplaceMarker);
        if (replace) {
          r.blocks.push_back(std::move(cur));
          cur = {};
          state = outside;
        } else {
          cur.replace += line + "\n";
        }
        break;
    }
  }
  if (state != outside)
    return fail(EditFailure::malformed, block_no() + " is not terminated (no " +
                                            (state == in_search ? std::string(kEditDividerMarker) + " line"
                                                                : std::string(kEditReplaceMarker) + " line") +
                                            ")");
  if (r.blocks.empty()) return fail(EditFailure::empty, "the response holds no SEARCH/REPLACE block");
  return r;
}

EditResult apply_edit_blocks(const std::string& base, const std::vector<EditBlock>& blocks) {
  if (blocks.empty()) return fail(EditFailure::empty, "the response holds no SEARCH/REPLACE block");
  std::string text = with_final_newline(lf(base));
  for (size_t k = 0; k < blocks.size(); ++k) {
    const std::string search = lf(blocks[k].search);
    if (search.empty()) return fail(EditFailure::malformed, "block " + std::to_string(k + 1) + ": an empty SEARCH text");
    size_t at = 0;
    const int64_t n = count_matches(text, search, &at);
    const std::string which = "block " + std::to_string(k + 1) + "'s SEARCH text (first line '" +
                              first_line(search) + "')";
    if (n == 0) return fail(EditFailure::no_match, which + " matches nothing in the kernel");
    if (n > 1)
      return fail(EditFailure::ambiguous, which + " matches " + std::to_string(n) + " places in the kernel");
    text.replace(at, search.size(), lf(blocks[k].replace));
  }
  EditResult r;
  r.blocks = blocks;
  r.code = std::move(text);
  return r;
}

EditResult apply_edit_completion(const std::string& base, const std::string& completion) {
  EditResult parsed = parse_edit_blocks(completion);
  if (!parsed.ok()) return parsed;
  return apply_edit_blocks(base, parsed.blocks);
}

std::string format_edit_blocks(const std::vector<EditBlock>& blocks) {
  std::string s;
  for (const auto& b : blocks)
    s += std::string(kEditSearchMarker) + "\n" + with_final_newline(b.search) + kEditDividerMarker + "\n" +
         with_final_newline(b.replace) + kEditReplaceMarker + "\n";
  return s;
}

std::vector<EditBlock> diff_edit_blocks(const std::string& from_text, const std::string& to_text) {
  const std::vector<std::string> a = split_lines(lf(from_text)), b = split_lines(lf(to_text));
  // The changed runs (hunks) of a line diff: the longest common subsequence of the lines
  // between the common prefix and suffix; one hunk for all of it when that table is too big.
  size_t pre = 0;
  while (pre < a.size() && pre < b.size() && a[pre] == b[pre]) ++pre;
  size_t suf = 0;
  while (suf < a.size() - pre && suf < b.size() - pre && a[a.size() - 1 - suf] == b[b.size() - 1 - suf]) ++suf;
  const size_t n = a.size() - pre - suf, m = b.size() - pre - suf;
  struct Hunk {
    size_t a0, a1, b0, b1;
  };
  std::vector<Hunk> hunks;
  if (n == 0 && m == 0) return {};
  if (n * m > 16u * 1024 * 1024) {
    hunks.push_back({pre, pre + n, pre, pre + m});
  } else {
    std::vector<uint32_t> L((n + 1) * (m + 1), 0);  // L[i][j]: LCS of a[pre+i..], b[pre+j..]
    auto at = [&](size_t i, size_t j) -> uint32_t& { return L[i * (m + 1) + j]; };
    for (size_t i = n; i-- > 0;)
      for (size_t j = m; j-- > 0;)
        at(i, j) = a[pre + i] == b[pre + j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
    size_t i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[pre + i] == b[pre + j]) {
        ++i, ++j;
        continue;
      }
      Hunk h{pre + i, 0, pre + j, 0};
      while ((i < n || j < m) && !(i < n && j < m && a[pre + i] == b[pre + j])) {
        if (j < m && (i == n || at(i, j + 1) >= at(i + 1, j)))
          ++j;
        else
          ++i;
      }
      h.a1 = pre + i, h.b1 = pre + j;
      hunks.push_back(h);
    }
  }
  // Each hunk as a block against the text the blocks before it left; its SEARCH text grown by
  // context lines until it matches exactly once there.
  std::vector<std::string> cur = a;
  std::vector<EditBlock> blocks;
  int64_t offset = 0;  // where hunk lines of `a` sit in `cur`
  for (const Hunk& h : hunks) {
    const size_t p = static_cast<size_t>(static_cast<int64_t>(h.a0) + offset), len = h.a1 - h.a0;
    const std::string text = join(cur, 0, cur.size());
    size_t before = 0, after = 0;
    for (bool grow_before = true;; grow_before = !grow_before) {
      const std::string search = join(cur, p - before, p + len + after);
      if (!search.empty() && count_matches(text, search, nullptr) == 1) break;
      const bool can_before = p - before > 0, can_after = p + len + after < cur.size();
      if (!can_before && !can_after) break;  // the whole text: it matches once
      if ((grow_before && can_before) || !can_after)
        ++before;
      else
        ++after;
    }
    EditBlock blk;
    blk.search = join(cur, p - before, p + len + after);
    blk.replace = join(cur, p - before, p) + join(b, h.b0, h.b1) + join(cur, p + len, p + len + after);
    std::vector<std::string> next(cur.begin(), cur.begin() + static_cast<int64_t>(p));
    next.insert(next.end(), b.begin() + static_cast<int64_t>(h.b0), b.begin() + static_cast<int64_t>(h.b1));
    next.insert(next.end(), cur.begin() + static_cast<int64_t>(p + len), cur.end());
    cur = std::move(next);
    offset += static_cast<int64_t>(h.b1 - h.b0) - static_cast<int64_t>(len);
    blocks.push_back(std::move(blk));
  }
  return blocks;
}

}  // namespace kernelrl
