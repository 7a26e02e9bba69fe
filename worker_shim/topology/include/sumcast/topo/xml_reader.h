// The topology files we import as XML (NCCL topology XML), read with libxml2 (the parser hwloc
// itself uses) into a plain element tree. Well-formedness is libxml2's: entities, comments,
// processing instructions, CDATA and declared encodings work, anything malformed is an error
// naming the input, line and column. No network access, no external entities or DTDs loaded.
// Character data is kept only as a trimmed string per element.
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
  std::string text;  // character data (and CDATA) directly inside this element, trimmed
  int line = 0;      // where the start tag is (1-based)

  // The attribute's value, or nullptr when absent.
  const std::string* attribute(std::string_view key) const;
  // The attribute's value, or `fallback`.
  std::string attribute_or(std::string_view key, std::string_view fallback) const;
};

// Parses a whole document and returns its root element. `what` names the input in errors.
// Nesting deeper than 256 elements is refused (libxml2's own limit without XML_PARSE_HUGE).
Result<XmlElement> parse_xml(std::string_view text, std::string_view what);

}  // namespace sumcast::topo
