// Unit tests of the Prometheus text exposition (sumcast::telemetry::render_prometheus). The
// output is read back by a parser of the text format (version 0.0.4) written here from the
// format's description, which also checks the format's rules: # TYPE before a family's samples,
// a family's samples together, valid names, escaped label values, no duplicate series, and
// cumulative histogram buckets ending in +Inf equal to _count.
#include "sumcast/telemetry/prometheus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace sumcast::telemetry {
namespace {

using LabelSet = std::map<std::string, std::string>;

struct Sample {
  std::string name;
  LabelSet labels;
  double value = 0;
  std::string raw_value;
};

struct Parsed {
  std::map<std::string, std::string> types;  // family -> counter|gauge|histogram|...
  std::map<std::string, std::string> help;
  std::vector<Sample> samples;
  std::string error;  // first violation of the format, "" when none
};

bool valid_metric_name(const std::string& n) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// The family a sample belongs to: histograms' _bucket/_sum/_count belong to their base name.
std::string family_of(const std::string& name, const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      const std::string base = name.substr(0, name.size() - s.size());
      auto it = types.find(base);
      if (it != types.end() && (it->second == "histogram" || it->second == "summary")) return base;
    }
  }
  return name;
}

Parsed parse(const std::string& text) {
  Parsed p;
  std::set<std::string> finished;  // families whose samples ended
  std::string current;
  std::set<std::string> series;
  size_t pos = 0;
  auto fail = [&](const std::string& why) {
    if (p.error.empty()) p.error = why;
  };
  if (!text.empty() && text.back() != '\n') fail("text does not end with a line feed");
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.empty()) continue;
    if (line[0] == '#') {
      // "# HELP name text" / "# TYPE name type"; other comments are allowed and ignored.
      if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
        const std::string rest = line.substr(7);
        const size_t sp = rest.find(' ');
        const std::string name = rest.substr(0, sp);
        const std::string arg = sp == std::string::npos ? "" : rest.substr(sp + 1);
        if (!valid_metric_name(name)) fail("bad name in: " + line);
        if (line[2] == 'T') {
          if (p.types.count(name) != 0) fail("second TYPE for " + name);
          if (arg != "counter" && arg != "gauge" && arg != "histogram" && arg != "summary" && arg != "untyped") {
            fail("bad type in: " + line);
          }
          if (finished.count(name) != 0 || current == name) fail("TYPE after samples of " + name);
          p.types[name] = arg;
        } else {
          p.help[name] = arg;
        }
      }
      continue;
    }
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    if (!valid_metric_name(s.name)) fail("bad metric name in: " + line);
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
          fail("bad label in: " + line);
          break;
        }
        const std::string key = line.substr(i, eq - i);
        if (!valid_metric_name(key) || key.find(':') != std::string::npos) fail("bad label name in: " + line);
        std::string value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\') {
            ++j;
            if (j >= line.size()) break;
            if (line[j] == 'n') {
              value += '\n';
            } else if (line[j] == '\\' || line[j] == '"') {
              value += line[j];
            } else {
              fail("bad escape in: " + line);
            }
          } else {
            value += line[j];
          }
        }
        if (j >= line.size()) {
          fail("unterminated label value in: " + line);
          break;
        }
        if (s.labels.count(key) != 0) fail("label twice in: " + line);
        s.labels[key] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) {
        fail("unterminated labels in: " + line);
        continue;
      }
      ++i;  // '}'
    }
    if (i >= line.size() || line[i] != ' ') {
      fail("no value in: " + line);
      continue;
    }
    s.raw_value = line.substr(i + 1);
    if (const size_t sp = s.raw_value.find(' '); sp != std::string::npos) s.raw_value.resize(sp);  // timestamp
    if (s.raw_value == "+Inf") {
      s.value = std::numeric_limits<double>::infinity();
    } else if (s.raw_value == "-Inf") {
      s.value = -std::numeric_limits<double>::infinity();
    } else if (s.raw_value == "NaN") {
      s.value = std::numeric_limits<double>::quiet_NaN();
    } else {
      char* end = nullptr;
      s.value = std::strtod(s.raw_value.c_str(), &end);
      if (end == s.raw_value.c_str() || *end != '\0') fail("bad value in: " + line);
    }
    const std::string fam = family_of(s.name, p.types);
    if (p.types.count(fam) == 0) fail("sample before its TYPE: " + line);
    if (fam != current) {
      if (finished.count(fam) != 0) fail("family " + fam + " is not contiguous");
      if (!current.empty()) finished.insert(current);
      current = fam;
    }
    std::string key = s.name;
    for (const auto& [k, v] : s.labels) key += "|" + k + "=" + v;
    if (!series.insert(key).second) fail("duplicate series: " + line);
    p.samples.push_back(std::move(s));
  }
  return p;
}

const Sample* find(const Parsed& p, const std::string& name, const LabelSet& labels) {
  for (const Sample& s : p.samples) {
    if (s.name == name && s.labels == labels) return &s;
  }
  return nullptr;
}

double value(const Parsed& p, const std::string& name, const LabelSet& labels) {
  const Sample* s = find(p, name, labels);
  EXPECT_NE(s, nullptr) << name;
  return s != nullptr ? s->value : -1;
}

CoreMetrics core(uint32_t index, uint64_t base) {
  CoreMetrics c;
  c.core = index;
  c.counters = {{"rx_packets", base + 1}, {"contributions", base + 2}, {"slots_completed", base + 3}};
  c.gauges = {{"jobs_active", index + 1}};
  c.drops = {{"bad_icrc", base + 4}, {"unknown_job", base + 5}};
  c.completion_latency.upper_bounds = {1e-6, 2e-6, 4e-6};
  c.completion_latency.counts = {base + 1, 0, base + 2, 3};
  c.completion_latency.sum = 0.25 * static_cast<double>(index + 1);
  return c;
}

Snapshot sample_snapshot() {
  Snapshot s;
  s.version = "0.1.0";
  s.dpdk_version = "DPDK 22.11.11";
  s.cores = {core(0, 100), core(1, 200)};
  JobMetrics a;
  a.job_id = 7;
  a.name = "resnet \"50\"\\x\nend";
  a.dtype = "bf16";
  a.op = "sum";
  a.world_size = 8;
  a.registered = 8;
  a.running = true;
  a.slots_completed = 12345;
  a.seconds_since_progress = 0.5;
  a.multicast = true;
  a.multicast_group = "239.255.77.3";
  a.group_frames = 321;
  a.unicast_answers = 4;
  a.ce_marked = 30;
  a.cnps_sent = 6;
  a.loss_notices = 9;
  a.duplicate_notices = 10;
  a.member_ce_marked = {0, 10, 20};
  JobMetrics b;
  b.job_id = 9;
  b.name = "waiting";
  b.dtype = "fp32";
  b.op = "max";
  b.world_size = 4;
  b.registered = 2;
  s.jobs = {a, b};
  s.control = {{"connections_accepted", 10}, {"jobs_started", 2}};
  s.port_device = "net_af_packet0";
  s.port = {{"ipackets", 1000}, {"imissed", 7}, {"kernel_ring_drops", 42}};
  s.port_xstats = {{"rx_good_packets", 1000}, {"rx_q0_errors", 3}};
  return s;
}

TEST(PrometheusTest, OutputParsesAndEveryValueIsTheSnapshots) {
  const Snapshot s = sample_snapshot();
  const Parsed p = parse(render_prometheus(s));
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(value(p, "sumcast_build_info", {{"version", "0.1.0"}, {"dpdk", "DPDK 22.11.11"}}), 1);
  for (const CoreMetrics& c : s.cores) {
    const std::string core = std::to_string(c.core);
    for (const NamedValue& v : c.counters) {
      EXPECT_EQ(value(p, "sumcast_" + v.name + "_total", {{"core", core}}), static_cast<double>(v.value)) << v.name;
      EXPECT_EQ(p.types.at("sumcast_" + v.name + "_total"), "counter");
    }
    EXPECT_EQ(value(p, "sumcast_jobs_active", {{"core", core}}), c.core + 1);
    for (const NamedValue& d : c.drops) {
      EXPECT_EQ(value(p, "sumcast_drops_total", {{"core", core}, {"reason", d.name}}), static_cast<double>(d.value));
    }
  }
  EXPECT_EQ(p.types.at("sumcast_jobs_active"), "gauge");
  EXPECT_EQ(p.types.at("sumcast_drops_total"), "counter");
  // Jobs: the awkward name comes back intact through the label escaping.
  const LabelSet a = {{"job_id", "7"}, {"job_name", s.jobs[0].name}};
  EXPECT_EQ(
      value(p, "sumcast_job_info", {{"job_id", "7"}, {"job_name", s.jobs[0].name}, {"dtype", "bf16"}, {"op", "sum"}}),
      1);
  EXPECT_EQ(value(p, "sumcast_job_world_size", a), 8);
  EXPECT_EQ(value(p, "sumcast_job_registered_ranks", a), 8);
  EXPECT_EQ(value(p, "sumcast_job_running", a), 1);
  EXPECT_EQ(value(p, "sumcast_job_slots_completed_total", a), 12345);
  EXPECT_EQ(value(p, "sumcast_job_seconds_since_progress", a), 0.5);
  EXPECT_EQ(
      value(p, "sumcast_job_multicast", {{"job_id", "7"}, {"job_name", s.jobs[0].name}, {"group", "239.255.77.3"}}), 1);
  EXPECT_EQ(value(p, "sumcast_job_group_frames_total", a), 321);
  EXPECT_EQ(value(p, "sumcast_job_unicast_answers_total", a), 4);
  EXPECT_EQ(value(p, "sumcast_job_ce_marked_total", a), 30);
  EXPECT_EQ(value(p, "sumcast_job_cnps_sent_total", a), 6);
  EXPECT_EQ(value(p, "sumcast_job_loss_notices_total", a), 9);
  EXPECT_EQ(value(p, "sumcast_job_duplicate_notices_total", a), 10);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(value(p, "sumcast_job_member_ce_marked_total",
                    {{"job_id", "7"}, {"job_name", s.jobs[0].name}, {"rank", std::to_string(r)}}),
              r * 10);
  }
  EXPECT_EQ(value(p, "sumcast_job_multicast", {{"job_id", "9"}, {"job_name", "waiting"}, {"group", ""}}), 0);
  const LabelSet b = {{"job_id", "9"}, {"job_name", "waiting"}};
  EXPECT_EQ(value(p, "sumcast_job_registered_ranks", b), 2);
  EXPECT_EQ(value(p, "sumcast_job_running", b), 0);
  EXPECT_EQ(value(p, "sumcast_control_connections_accepted_total", {}), 10);
  EXPECT_EQ(value(p, "sumcast_control_jobs_started_total", {}), 2);
  // The port's own counters, labelled with its device.
  for (const NamedValue& v : s.port) {
    EXPECT_EQ(value(p, "sumcast_port_" + v.name + "_total", {{"device", "net_af_packet0"}}),
              static_cast<double>(v.value));
    EXPECT_EQ(p.types.at("sumcast_port_" + v.name + "_total"), "counter");
  }
  for (const NamedValue& x : s.port_xstats) {
    EXPECT_EQ(value(p, "sumcast_port_xstat_total", {{"device", "net_af_packet0"}, {"name", x.name}}),
              static_cast<double>(x.value));
  }
  // Every family has help text.
  for (const auto& [family, type] : p.types) EXPECT_NE(p.help.count(family), 0u) << family;
}

TEST(PrometheusTest, HistogramBucketsAreCumulativeAndEndInInfEqualToCount) {
  const Snapshot s = sample_snapshot();
  const Parsed p = parse(render_prometheus(s));
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.types.at("sumcast_slot_completion_seconds"), "histogram");
  for (const CoreMetrics& c : s.cores) {
    const std::string core = std::to_string(c.core);
    const Histogram& h = c.completion_latency;
    std::vector<const Sample*> buckets;  // in the order written
    for (const Sample& x : p.samples) {
      if (x.name == "sumcast_slot_completion_seconds_bucket" && x.labels.at("core") == core) buckets.push_back(&x);
    }
    ASSERT_EQ(buckets.size(), h.counts.size());
    uint64_t running = 0;
    for (size_t i = 0; i < h.counts.size(); ++i) {
      running += h.counts[i];
      const std::string& le = buckets[i]->labels.at("le");
      if (i < h.upper_bounds.size()) {
        EXPECT_EQ(std::strtod(le.c_str(), nullptr), h.upper_bounds[i]);
      } else {
        EXPECT_EQ(le, "+Inf");
      }
      EXPECT_EQ(buckets[i]->value, static_cast<double>(running)) << "le " << le;
    }
    EXPECT_EQ(value(p, "sumcast_slot_completion_seconds_count", {{"core", core}}), static_cast<double>(running));
    EXPECT_EQ(value(p, "sumcast_slot_completion_seconds_sum", {{"core", core}}), h.sum);
  }
}

TEST(PrometheusTest, CountersBeyondTwoToThe53AreWrittenExactly) {
  Snapshot s;
  CoreMetrics c;
  c.counters = {{"rx_bytes", (uint64_t{1} << 60) + 1}};
  s.cores = {c};
  const std::string text = render_prometheus(s);
  EXPECT_NE(text.find("sumcast_rx_bytes_total{core=\"0\"} 1152921504606846977\n"), std::string::npos) << text;
}

TEST(PrometheusTest, EmptySnapshotHasOnlyBuildInfo) {
  const Parsed p = parse(render_prometheus(Snapshot{}));
  ASSERT_EQ(p.error, "");
  ASSERT_EQ(p.samples.size(), 1u);
  EXPECT_EQ(p.samples[0].name, "sumcast_build_info");
}

TEST(PrometheusTest, LabelValuesEscapeBackslashQuoteAndLineFeedOnly) {
  EXPECT_EQ(escape_label_value("a\\b\"c\nd\te"), "a\\\\b\\\"c\\nd\te");
  EXPECT_EQ(escape_label_value(""), "");
}

TEST(PrometheusTest, ValuesReadBackToTheSameDouble) {
  for (const double v : {0.0, 1.0, -3.0, 0.1, 1.0 / 3.0, 1.5e-7, 123456789.125, 9007199254740993.0, 1e300}) {
    const std::string t = format_value(v);
    EXPECT_EQ(std::strtod(t.c_str(), nullptr), v) << t;
  }
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_value(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(format_value(42.0), "42");
}

// The parser itself must catch what it claims to (else the tests above prove nothing).
TEST(PrometheusTest, ParserRejectsMalformedExpositions) {
  EXPECT_NE(parse("x 1\n").error, "");                                                     // no TYPE
  EXPECT_NE(parse("# TYPE x gauge\nx{a=\"1} 1\n").error, "");                              // unterminated
  EXPECT_NE(parse("# TYPE x gauge\n# TYPE y gauge\nx 1\ny 1\nx{a=\"2\"} 1\n").error, "");  // split family
  EXPECT_NE(parse("# TYPE x gauge\nx 1\nx 2\n").error, "");                                // duplicate
  EXPECT_NE(parse("# TYPE x gauge\nx one\n").error, "");                                   // bad value
  EXPECT_NE(parse("# TYPE 1x gauge\n").error, "");                                         // bad name
  EXPECT_EQ(parse("# TYPE x gauge\nx{a=\"q\\\"\"} 1\n").error, "");
}

}  // namespace
}  // namespace sumcast::telemetry
