// load_file(): reads a topology file and hands it to the loader its format calls for.
#include <cctype>

#include "builder_util.h"
#include "sumcast/topo/loaders.h"

namespace sumcast::topo {
namespace {

SourceFormat detect(const std::string& text) {
  // Skip comments ('#' lines, <!-- -->, <?xml ?>) to the first meaningful token.
  size_t pos = 0;
  for (;;) {
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
    if (text.compare(pos, 1, "#") == 0) {
      size_t nl = text.find('\n', pos);
      pos = nl == std::string::npos ? text.size() : nl + 1;
    } else if (text.compare(pos, 4, "<!--") == 0) {
      size_t end = text.find("-->", pos);
      pos = end == std::string::npos ? text.size() : end + 3;
    } else if (text.compare(pos, 2, "<?") == 0 || text.compare(pos, 9, "<!DOCTYPE") == 0) {
      size_t end = text.find('>', pos);
      pos = end == std::string::npos ? text.size() : end + 1;
    } else {
      break;
    }
  }
  if (text.compare(pos, 9, "<topology") == 0) return SourceFormat::kHwlocXml;
  if (text.compare(pos, 7, "<system") == 0) return SourceFormat::kNcclXml;
  if (text.compare(pos, 4, "GPU0") == 0) return SourceFormat::kSmiMatrix;
  if (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) return SourceFormat::kWeightMatrix;
  return SourceFormat::kDetect;
}

}  // namespace

Result<HostModel> load_file(const std::string& path, SourceFormat format, const LoadOptions& options) {
  std::string text;
  SUMCAST_RETURN_IF_ERROR(internal::read_text_file(path, text));
  if (format == SourceFormat::kDetect) format = detect(text);
  switch (format) {
    case SourceFormat::kHwlocXml:
      return load_hwloc_xml_file(path, options);
    case SourceFormat::kNcclXml:
      return load_nccl_xml(text, path, options);
    case SourceFormat::kSmiMatrix:
      return load_smi_matrix(text, path, options);
    case SourceFormat::kWeightMatrix:
      return load_weight_matrix(text, path, options);
    case SourceFormat::kDetect:
      break;
  }
  return Status::invalid_argument(path +
                                  ": not a topology file this tool knows (hwloc XML, NCCL XML, "
                                  "nvidia-smi topo -m, link-weight matrix)");
}

}  // namespace sumcast::topo
