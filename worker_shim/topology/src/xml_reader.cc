// The small XML reader (xml_reader.h): a recursive-descent scanner over the whole text.
#include "sumcast/topo/xml_reader.h"

#include <cctype>
#include <cstdlib>

namespace sumcast::topo {

const std::string* XmlElement::attribute(std::string_view key) const {
  for (const auto& [k, v] : attributes) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string XmlElement::attribute_or(std::string_view key, std::string_view fallback) const {
  const std::string* v = attribute(key);
  return v ? *v : std::string(fallback);
}

namespace {

constexpr int kMaxDepth = 256;

class Scanner {
 public:
  Scanner(std::string_view text, std::string_view what) : text_(text), what_(what) {}

  Result<XmlElement> document() {
    SUMCAST_RETURN_IF_ERROR(skip_misc());
    if (at_end() || peek() != '<') return error("expected a root element");
    XmlElement root;
    SUMCAST_RETURN_IF_ERROR(element(root, 0));
    SUMCAST_RETURN_IF_ERROR(skip_misc());
    if (!at_end()) return error("content after the root element");
    return root;
  }

 private:
  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  bool starts_with(std::string_view s) const { return text_.substr(pos_).substr(0, s.size()) == s; }
  void advance(size_t n = 1) {
    for (size_t i = 0; i < n && pos_ < text_.size(); ++i) {
      if (text_[pos_] == '\n') ++line_;
      ++pos_;
    }
  }
  void skip_space() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(peek()))) advance();
  }
  Status error(std::string_view msg) const {
    return Status::invalid_argument(std::string(what_) + ":" + std::to_string(line_) + ": " + std::string(msg));
  }
  // Skips past `end`, which must follow.
  Status skip_past(std::string_view end, std::string_view construct) {
    size_t found = text_.find(end, pos_);
    if (found == std::string_view::npos) return error(std::string("unterminated ") + std::string(construct));
    advance(found + end.size() - pos_);
    return Status();
  }
  // Whitespace, comments, processing instructions and DOCTYPE between elements.
  Status skip_misc() {
    for (;;) {
      skip_space();
      if (starts_with("<!--")) {
        SUMCAST_RETURN_IF_ERROR(skip_past("-->", "comment"));
      } else if (starts_with("<?")) {
        SUMCAST_RETURN_IF_ERROR(skip_past("?>", "processing instruction"));
      } else if (starts_with("<!DOCTYPE") || starts_with("<!doctype")) {
        SUMCAST_RETURN_IF_ERROR(skip_past(">", "DOCTYPE"));
      } else {
        return Status();
      }
    }
  }
  static bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':';
  }
  Result<std::string> name() {
    size_t start = pos_;
    while (!at_end() && name_char(peek())) advance();
    if (pos_ == start) return error("expected a name");
    return std::string(text_.substr(start, pos_ - start));
  }
  // Appends `raw` with entities decoded.
  Status decode(std::string_view raw, std::string& out) const {
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '&') {
        out.push_back(raw[i]);
        continue;
      }
      size_t semi = raw.find(';', i);
      if (semi == std::string_view::npos) return error("'&' without ';'");
      std::string_view ent = raw.substr(i + 1, semi - i - 1);
      if (ent == "amp") {
        out.push_back('&');
      } else if (ent == "lt") {
        out.push_back('<');
      } else if (ent == "gt") {
        out.push_back('>');
      } else if (ent == "quot") {
        out.push_back('"');
      } else if (ent == "apos") {
        out.push_back('\'');
      } else if (!ent.empty() && ent[0] == '#') {
        bool hex = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X');
        std::string digits(ent.substr(hex ? 2 : 1));
        char* end = nullptr;
        long v = std::strtol(digits.c_str(), &end, hex ? 16 : 10);
        if (digits.empty() || *end != '\0' || v <= 0 || v > 127) {
          return error("unsupported character reference &" + std::string(ent) + ";");
        }
        out.push_back(static_cast<char>(v));
      } else {
        return error("unknown entity &" + std::string(ent) + ";");
      }
      i = semi;
    }
    return Status();
  }
  Status attributes(XmlElement& el) {
    for (;;) {
      skip_space();
      if (at_end()) return error("unterminated start tag <" + el.name + ">");
      if (peek() == '>' || (peek() == '/' && peek(1) == '>')) return Status();
      Result<std::string> key = name();
      if (!key.ok()) return key.status();
      skip_space();
      if (peek() != '=') return error("attribute " + *key + " has no value");
      advance();
      skip_space();
      char quote = peek();
      if (quote != '"' && quote != '\'') return error("attribute " + *key + ": value not quoted");
      advance();
      size_t end = text_.find(quote, pos_);
      if (end == std::string_view::npos) return error("unterminated value of attribute " + *key);
      std::string value;
      SUMCAST_RETURN_IF_ERROR(decode(text_.substr(pos_, end - pos_), value));
      advance(end + 1 - pos_);
      if (el.attribute(*key)) return error("attribute " + *key + " given twice");
      el.attributes.emplace_back(std::move(*key), std::move(value));
    }
  }
  Status element(XmlElement& el, int depth) {
    if (depth > kMaxDepth) return error("elements nested too deeply");
    el.line = line_;
    advance();  // '<'
    Result<std::string> n = name();
    if (!n.ok()) return n.status();
    el.name = std::move(*n);
    SUMCAST_RETURN_IF_ERROR(attributes(el));
    if (peek() == '/') {
      advance(2);
      return Status();
    }
    advance();  // '>'
    std::string text;
    for (;;) {
      if (at_end()) return error("element <" + el.name + "> (line " + std::to_string(el.line) + ") not closed");
      if (starts_with("<!--")) {
        SUMCAST_RETURN_IF_ERROR(skip_past("-->", "comment"));
      } else if (starts_with("<![CDATA[")) {
        advance(9);
        size_t end = text_.find("]]>", pos_);
        if (end == std::string_view::npos) return error("unterminated CDATA");
        text.append(text_.substr(pos_, end - pos_));
        advance(end + 3 - pos_);
      } else if (starts_with("<?")) {
        SUMCAST_RETURN_IF_ERROR(skip_past("?>", "processing instruction"));
      } else if (starts_with("</")) {
        advance(2);
        Result<std::string> close = name();
        if (!close.ok()) return close.status();
        if (*close != el.name) {
          return error("</" + *close + "> closes <" + el.name + "> of line " + std::to_string(el.line));
        }
        skip_space();
        if (peek() != '>') return error("malformed end tag </" + *close);
        advance();
        break;
      } else if (peek() == '<') {
        el.children.emplace_back();
        SUMCAST_RETURN_IF_ERROR(element(el.children.back(), depth + 1));
      } else {
        size_t end = text_.find('<', pos_);
        if (end == std::string_view::npos) end = text_.size();
        SUMCAST_RETURN_IF_ERROR(decode(text_.substr(pos_, end - pos_), text));
        advance(end - pos_);
      }
    }
    size_t b = text.find_first_not_of(" \t\r\n");
    size_t e = text.find_last_not_of(" \t\r\n");
    el.text = b == std::string::npos ? std::string() : text.substr(b, e - b + 1);
    return Status();
  }

  std::string_view text_;
  std::string_view what_;
  size_t pos_ = 0;
  int line_ = 1;
};

}  // namespace

Result<XmlElement> parse_xml(std::string_view text, std::string_view what) { return Scanner(text, what).document(); }

}  // namespace sumcast::topo
