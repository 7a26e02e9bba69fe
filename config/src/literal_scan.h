// A small lexer over agg.conf text for what libconfig 1.5 does not report by itself:
// `@include` directives (agg.conf is one self-contained file) and plain integer literals that do
// not fit in 32 bits (libconfig converts those with atoi and silently keeps a truncated value).
//
// The lexer follows libconfig 1.5's token rules (scanner.l): comments (#, //, /* */), strings
// with escapes, names, integers, 64-bit integers (L suffix), hex, floats. Thread safety: pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sumcast::config::detail {

struct IntLiteral {
  int line = 0;            // 1-based
  std::string text;        // as written, e.g. "-99999999999" or "0x1FFFFFFFF"
  bool overflows = false;  // outside int32 (decimal) or above 0x7FFFFFFF (hex)
};

struct LiteralScan {
  // Every plain (32-bit) integer literal in text order: libconfig makes one TypeInt setting of
  // each, in the same (document) order.
  std::vector<IntLiteral> ints;
  int include_line = 0;  // line of the first @include directive; 0 when there is none
};

LiteralScan scan_literals(std::string_view text);

}  // namespace sumcast::config::detail
