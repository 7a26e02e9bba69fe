#include "literal_scan.h"

#include <cctype>
#include <cstdint>

namespace sumcast::config::detail {
namespace {

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool is_xdigit(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '*'; }
bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '*';
}

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  LiteralScan run() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\n') {
        ++line_;
        ++pos_;
      } else if (c == '#' || starts_with("//")) {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (starts_with("/*")) {
        skip_block_comment();
      } else if (c == '"') {
        skip_string();
      } else if (c == '@') {
        if (starts_with("@include") && out_.include_line == 0) out_.include_line = line_;
        ++pos_;
      } else if (is_name_start(c)) {
        while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
      } else if (starts_number()) {
        lex_number();
      } else {
        ++pos_;
      }
    }
    return std::move(out_);
  }

 private:
  bool starts_with(std::string_view s) const { return text_.substr(pos_).starts_with(s); }
  char at(size_t i) const { return i < text_.size() ? text_[i] : '\0'; }

  void skip_block_comment() {
    pos_ += 2;
    while (pos_ < text_.size() && !starts_with("*/")) {
      if (text_[pos_] == '\n') ++line_;
      ++pos_;
    }
    pos_ = pos_ < text_.size() ? pos_ + 2 : pos_;
  }

  void skip_string() {
    ++pos_;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      if (text_[pos_] == '\\') ++pos_;
      if (pos_ < text_.size() && text_[pos_] == '\n') ++line_;
      ++pos_;
    }
    if (pos_ < text_.size()) ++pos_;
  }

  // A digit, or a sign or '.' directly followed by a digit (or sign then ".digit").
  bool starts_number() const {
    const char c = at(pos_);
    if (is_digit(c)) return true;
    if (c == '.') return is_digit(at(pos_ + 1));
    if (c == '+' || c == '-') {
      return is_digit(at(pos_ + 1)) || (at(pos_ + 1) == '.' && is_digit(at(pos_ + 2)));
    }
    return false;
  }

  void lex_number() {
    const size_t start = pos_;
    const bool negative = at(pos_) == '-';
    if (at(pos_) == '+' || at(pos_) == '-') ++pos_;
    if (at(pos_) == '0' && (at(pos_ + 1) == 'x' || at(pos_ + 1) == 'X') && is_xdigit(at(pos_ + 2))) {
      pos_ += 2;
      uint64_t value = 0;
      bool big = false;
      while (is_xdigit(at(pos_))) {
        const char h = text_[pos_++];
        const uint64_t digit =
            is_digit(h) ? static_cast<uint64_t>(h - '0') : static_cast<uint64_t>(std::tolower(h) - 'a' + 10);
        big = big || value > 0x0FFFFFFFu;
        value = (value << 4) | digit;
      }
      if (skip_long_suffix()) return;
      record(start, big || value > 0x7FFFFFFFu);
      return;
    }
    uint64_t magnitude = 0;
    bool big = false;
    while (is_digit(at(pos_))) {
      magnitude = magnitude * 10 + static_cast<uint64_t>(text_[pos_++] - '0');
      big = big || magnitude > (uint64_t{1} << 32);
    }
    const bool exponent =
        (at(pos_) == 'e' || at(pos_) == 'E') &&
        (is_digit(at(pos_ + 1)) || ((at(pos_ + 1) == '+' || at(pos_ + 1) == '-') && is_digit(at(pos_ + 2))));
    if (at(pos_) == '.' || exponent) {  // a float: fraction and/or exponent
      if (at(pos_) == '.') {
        ++pos_;
        while (is_digit(at(pos_))) ++pos_;
      }
      if (at(pos_) == 'e' || at(pos_) == 'E') {
        ++pos_;
        if (at(pos_) == '+' || at(pos_) == '-') ++pos_;
        while (is_digit(at(pos_))) ++pos_;
      }
      return;
    }
    if (skip_long_suffix()) return;
    const uint64_t limit = negative ? uint64_t{0x80000000u} : uint64_t{0x7FFFFFFFu};
    record(start, big || magnitude > limit);
  }

  // "L" or "LL": a 64-bit literal, which libconfig reads in full.
  bool skip_long_suffix() {
    if (at(pos_) != 'L') return false;
    ++pos_;
    if (at(pos_) == 'L') ++pos_;
    return true;
  }

  void record(size_t start, bool overflows) {
    out_.ints.push_back({line_, std::string(text_.substr(start, pos_ - start)), overflows});
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  LiteralScan out_;
};

}  // namespace

LiteralScan scan_literals(std::string_view text) { return Lexer(text).run(); }

}  // namespace sumcast::config::detail
