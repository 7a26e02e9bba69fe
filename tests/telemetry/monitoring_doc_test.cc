// docs/monitoring.md against the code: the metrics table's rows labelled by `core` alone name
// exactly the per-core counters and gauges of sumcast/core_counters.h, each with its type, so the
// document follows the one list instead of a copy of it.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "sumcast/core_counters.h"

namespace sumcast {
namespace {

std::string read_doc() {
  std::ifstream in(SUMCAST_SOURCE_DIR "/docs/monitoring.md");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(' ');
  const size_t e = s.find_last_not_of(' ');
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// The text of every `code span` in `cell`.
std::vector<std::string> code_spans(const std::string& cell) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = cell.find('`', at)) != std::string::npos) {
    const size_t end = cell.find('`', at + 1);
    if (end == std::string::npos) break;
    out.push_back(cell.substr(at + 1, end - at - 1));
    at = end + 1;
  }
  return out;
}

// The per-core metrics the table lists: counter or gauge name (no sumcast_ prefix, no _total) ->
// the type its row gives. Rows "| metric | type | labels | what |" whose labels are `core` alone.
std::map<std::string, std::string> documented_core_metrics(const std::string& doc, std::vector<std::string>* errors) {
  std::map<std::string, std::string> out;
  std::istringstream lines(doc);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("| `sumcast_", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream row(line.substr(1));
    std::string cell;
    while (std::getline(row, cell, '|')) cells.push_back(trim(cell));
    if (cells.size() < 4 || cells[2] != "`core`") continue;
    const std::string& type = cells[1];
    if (type == "histogram") continue;  // the completion latency: not a counter of the list
    for (std::string name : code_spans(cells[0])) {
      if (name.rfind("sumcast_", 0) == 0) {
        name = name.substr(8);
      } else if (name.rfind('_', 0) == 0) {
        name = name.substr(1);
      } else {
        errors->push_back("row of " + cells[0] + ": `" + name + "` is neither sumcast_NAME nor _NAME");
        continue;
      }
      const std::string suffix = "_total";
      const bool total =
          name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
      if (type == "counter" && !total) errors->push_back("counter " + name + " has no _total suffix");
      if (type == "gauge" && total) errors->push_back("gauge " + name + " has a _total suffix");
      if (total) name.resize(name.size() - suffix.size());
      if (!out.emplace(name, type).second) errors->push_back(name + " is listed twice");
    }
  }
  return out;
}

TEST(MonitoringDoc, CoreMetricsAreExactlyTheCountersOfTheList) {
  const std::string doc = read_doc();
  ASSERT_FALSE(doc.empty()) << "cannot read docs/monitoring.md";
  std::vector<std::string> errors;
  std::map<std::string, std::string> documented = documented_core_metrics(doc, &errors);
  for (const std::string& e : errors) ADD_FAILURE() << e;
  ASSERT_GE(documented.size(), 10u) << "the table's per-core rows were not found (format changed?)";
  for (const CoreCounterInfo& c : kCoreCounterInfo) {
    const std::string want = c.type == CounterType::kGauge ? "gauge" : "counter";
    const auto it = documented.find(c.name);
    if (it == documented.end()) {
      ADD_FAILURE() << "docs/monitoring.md does not list the per-core " << want << " " << c.name;
      continue;
    }
    EXPECT_EQ(it->second, want) << c.name;
    documented.erase(it);
  }
  for (const auto& [name, type] : documented) {
    ADD_FAILURE() << "docs/monitoring.md lists a per-core " << type << " " << name
                  << " that sumcast/core_counters.h does not have";
  }
}

TEST(CoreCounters, NamesAreUniqueAndHaveHelp) {
  for (size_t i = 0; i < kCoreCounterCount; ++i) {
    EXPECT_NE(std::string(kCoreCounterInfo[i].help), "") << kCoreCounterInfo[i].name;
    EXPECT_EQ(find_core_counter(kCoreCounterInfo[i].name), &kCoreCounterInfo[i]) << kCoreCounterInfo[i].name;
  }
  EXPECT_EQ(find_core_counter("drop_bad_icrc"), nullptr);
}

}  // namespace
}  // namespace sumcast
