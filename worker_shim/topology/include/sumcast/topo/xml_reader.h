// A small XML reader for the topology files we import (NCCL topology XML): elements, attributes,
// comments, processing instructions, DOCTYPE and CDATA; character data is kept only as a trimmed
// string per element. Entities: the five predefined ones and numeric references (ASCII only).
// Errors name the line. Not a validating parser, and not for untrusted multi-megabyte input.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sumcast/status.h"

namespace sumcast::topo {

struct XmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;  // in document order
  std::vector<XmlElement> children;
  std::string text;  // character data directly inside this element, trimmed
  int line = 0;      // where the start tag begins (1-based)

  // The attribute's value, or nullptr when absent.
  const std::string* attribute(std::string_view key) const;
  // The attribute's value, or `fallback`.
  std::string attribute_or(std::string_view key, std::string_view fallback) const;
};

// Parses a whole document and returns its root element. `what` names the input in errors.
Result<XmlElement> parse_xml(std::string_view text, std::string_view what);

}  // namespace sumcast::topo
