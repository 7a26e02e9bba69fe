// XML topology files (xml_reader.h): libxml2 parses, this file copies its tree into XmlElement.
#include "sumcast/topo/xml_reader.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

#include <climits>
#include <string>

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

std::string as_string(const xmlChar* s) { return s ? std::string(reinterpret_cast<const char*>(s)) : std::string(); }

std::string trimmed(std::string s) {
  const char* ws = " \t\r\n";
  const size_t first = s.find_first_not_of(ws);
  if (first == std::string::npos) return {};
  const size_t last = s.find_last_not_of(ws);
  return s.substr(first, last - first + 1);
}

// The element's name with its namespace prefix, as written.
std::string qualified_name(const xmlNode* node) {
  std::string name = as_string(node->name);
  if (node->ns != nullptr && node->ns->prefix != nullptr) name = as_string(node->ns->prefix) + ":" + name;
  return name;
}

void copy_element(const xmlNode* node, XmlElement& out) {
  out.name = qualified_name(node);
  out.line = static_cast<int>(xmlGetLineNo(node));
  for (const xmlAttr* a = node->properties; a != nullptr; a = a->next) {
    xmlChar* value = xmlNodeListGetString(node->doc, a->children, 1);
    std::string key = as_string(a->name);
    if (a->ns != nullptr && a->ns->prefix != nullptr) key = as_string(a->ns->prefix) + ":" + key;
    out.attributes.emplace_back(std::move(key), as_string(value));
    xmlFree(value);
  }
  std::string text;
  for (const xmlNode* c = node->children; c != nullptr; c = c->next) {
    if (c->type == XML_ELEMENT_NODE) {
      copy_element(c, out.children.emplace_back());
    } else if (c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) {
      text += as_string(c->content);
    }
  }
  out.text = trimmed(std::move(text));
}

// The first error of a parse: the later ones are usually its consequences ("premature end of data"
// after a mismatched tag).
struct FirstError {
  bool set = false;
  int line = 0;
  int column = 0;
  std::string message;
};

void keep_first(void* ctx, xmlErrorPtr e) {
  auto* first = static_cast<FirstError*>(ctx);
  if (first->set || e == nullptr || e->level < XML_ERR_ERROR) return;
  first->set = true;
  first->line = e->line;
  first->column = e->int2;
  first->message = trimmed(e->message ? std::string(e->message) : std::string("malformed XML"));
}

// Routes this thread's libxml2 errors to a FirstError for one parse (libxml2's structured error
// handler is per thread), restoring the previous handler afterwards.
class ErrorScope {
 public:
  explicit ErrorScope(FirstError* first) : old_(xmlStructuredError), old_ctx_(xmlStructuredErrorContext) {
    xmlSetStructuredErrorFunc(first, keep_first);
  }
  ~ErrorScope() { xmlSetStructuredErrorFunc(old_ctx_, old_); }
  ErrorScope(const ErrorScope&) = delete;
  ErrorScope& operator=(const ErrorScope&) = delete;

 private:
  xmlStructuredErrorFunc old_;
  void* old_ctx_;
};

struct DocFree {
  void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};
struct ContextFree {
  void operator()(xmlParserCtxt* c) const { xmlFreeParserCtxt(c); }
};

}  // namespace

Result<XmlElement> parse_xml(std::string_view text, std::string_view what) {
  if (text.size() > static_cast<size_t>(INT_MAX)) {
    return Status::invalid_argument(std::string(what) + ": too large for an XML topology file");
  }
  const std::string name(what);
  std::unique_ptr<xmlParserCtxt, ContextFree> ctxt(xmlNewParserCtxt());
  if (!ctxt) return Status::internal("libxml2: cannot allocate a parser context");
  FirstError first;
  std::unique_ptr<xmlDoc, DocFree> doc;
  {
    ErrorScope scope(&first);  // errors go to `first`, never to stderr
    const int options = XML_PARSE_NONET | XML_PARSE_NOWARNING;
    doc.reset(
        xmlCtxtReadMemory(ctxt.get(), text.data(), static_cast<int>(text.size()), name.c_str(), nullptr, options));
  }
  if (!doc || first.set || !ctxt->wellFormed) {
    if (!first.set) return Status::invalid_argument(name + ": malformed XML");
    return Status::invalid_argument(name + ":" + std::to_string(first.line) + ":" + std::to_string(first.column) +
                                    ": " + first.message);
  }
  const xmlNode* root = xmlDocGetRootElement(doc.get());
  if (root == nullptr) return Status::invalid_argument(name + ": no root element");
  XmlElement out;
  copy_element(root, out);
  return out;
}

}  // namespace sumcast::topo
