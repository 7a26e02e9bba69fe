#include "sumcast/telemetry/prometheus.h"

#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "sumcast/core_counters.h"

namespace sumcast::telemetry {
namespace {

struct Help {
  std::string_view name;
  std::string_view text;
};

// HELP text of the port's own counters (rte_eth_stats; the kernel's drops on af_packet sockets).
constexpr Help kPortHelp[] = {
    {"ipackets", "Frames the port received (the PMD's count)."},
    {"opackets", "Frames the port sent (the PMD's count)."},
    {"ibytes", "Bytes the port received."},
    {"obytes", "Bytes the port sent."},
    {"imissed", "Frames the port dropped because its receive queues were full."},
    {"ierrors", "Erroneous frames the port received."},
    {"oerrors", "Frames the port failed to send."},
    {"rx_nombuf", "Receive mbuf allocation failures."},
    {"kernel_ring_drops", "Frames the kernel dropped on the af_packet PMD's sockets (rx ring full)."},
};

constexpr Help kControlHelp[] = {
    {"connections_accepted", "Control connections accepted."},
    {"connections_refused", "Control connections refused (over control.max_connections)."},
    {"auth_failures", "Control connections that presented a wrong token."},
    {"bad_messages", "Control connections closed for a malformed or unexpected message."},
    {"io_timeouts", "Control connections closed for a stalled message."},
    {"registrations", "Ranks registered into jobs."},
    {"registrations_refused", "Registrations refused."},
    {"jobs_started", "Jobs started (every rank registered)."},
    {"jobs_completed", "Jobs ended cleanly (every member left)."},
    {"jobs_failed", "Running jobs failed (no progress, member lost, appliance stop)."},
};

// HELP text of a per-core counter or gauge (sumcast/core_counters.h).
std::string core_help(const std::string& name, std::string_view fallback) {
  const CoreCounterInfo* info = find_core_counter(name);
  return info != nullptr ? std::string(info->help) : std::string(fallback) + name + ".";
}

template <size_t N>
std::string help_for(const Help (&table)[N], const std::string& name, std::string_view fallback) {
  for (const Help& h : table) {
    if (h.name == name) return std::string(h.text);
  }
  return std::string(fallback) + name + ".";
}

class Writer {
 public:
  void family(const std::string& name, const std::string& type, const std::string& help) {
    out_ += "# HELP " + name + " " + help + "\n";
    out_ += "# TYPE " + name + " " + type + "\n";
  }
  void sample(const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels, double v) {
    sample(name, labels, format_value(v));
  }
  // Counters exactly, beyond 2^53 too.
  void sample(const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels, uint64_t v) {
    sample(name, labels, std::to_string(v));
  }
  void sample(const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels,
              const std::string& v) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      bool first = true;
      for (const auto& [k, value] : labels) {
        if (!first) out_ += ',';
        first = false;
        out_ += k + "=\"" + escape_label_value(value) + "\"";
      }
      out_ += '}';
    }
    out_ += ' ';
    out_ += v;
    out_ += '\n';
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

using Labels = std::vector<std::pair<std::string, std::string>>;

Labels core_labels(const CoreMetrics& c) { return {{"core", std::to_string(c.core)}}; }
Labels job_labels(const JobMetrics& j) { return {{"job_id", std::to_string(j.job_id)}, {"job_name", j.name}}; }

void write_histogram(Writer& w, const std::string& name, const Labels& base, const Histogram& h) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.counts.size(); ++i) {
    cumulative += h.counts[i];
    Labels l = base;
    l.emplace_back("le", i < h.upper_bounds.size() ? format_value(h.upper_bounds[i]) : "+Inf");
    w.sample(name + "_bucket", l, cumulative);
  }
  w.sample(name + "_sum", base, h.sum);
  w.sample(name + "_count", base, cumulative);
}

}  // namespace

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (const char ch : value) {
    if (ch == '\\') {
      out += "\\\\";
    } else if (ch == '"') {
      out += "\\\"";
    } else if (ch == '\n') {
      out += "\\n";
    } else {
      out += ch;
    }
  }
  return out;
}

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Integers (counters) exactly, as long as a double holds them exactly.
  if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%" PRId64, static_cast<int64_t>(value));
    return buf;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), value);  // shortest text that reads back exactly
  return std::string(buf, r.ptr);
}

std::string render_prometheus(const Snapshot& s) {
  Writer w;
  w.family("sumcast_build_info", "gauge", "sumcastd and DPDK versions.");
  w.sample("sumcast_build_info", {{"version", s.version}, {"dpdk", s.dpdk_version}}, uint64_t{1});

  if (!s.cores.empty()) {
    const CoreMetrics& first = s.cores.front();
    for (size_t i = 0; i < first.counters.size(); ++i) {
      const std::string name = "sumcast_" + first.counters[i].name + "_total";
      w.family(name, "counter", core_help(first.counters[i].name, "Sumcast engine counter "));
      for (const CoreMetrics& c : s.cores) {
        if (i < c.counters.size()) w.sample(name, core_labels(c), c.counters[i].value);
      }
    }
    for (size_t i = 0; i < first.gauges.size(); ++i) {
      const std::string name = "sumcast_" + first.gauges[i].name;
      w.family(name, "gauge", core_help(first.gauges[i].name, "Sumcast engine gauge "));
      for (const CoreMetrics& c : s.cores) {
        if (i < c.gauges.size()) w.sample(name, core_labels(c), c.gauges[i].value);
      }
    }
    w.family("sumcast_drops_total", "counter", "Frames dropped by the engine core, by reason (docs/protocol.md).");
    for (const CoreMetrics& c : s.cores) {
      for (const NamedValue& d : c.drops) {
        w.sample("sumcast_drops_total", {{"core", std::to_string(c.core)}, {"reason", d.name}}, d.value);
      }
    }
    w.family("sumcast_slot_completion_seconds", "histogram",
             "Time from a slot round's first contribution to its completion (engine clock, per burst).");
    for (const CoreMetrics& c : s.cores) {
      write_histogram(w, "sumcast_slot_completion_seconds", core_labels(c), c.completion_latency);
    }
  }

  const Labels device = {{"device", s.port_device}};
  for (const NamedValue& c : s.port) {
    const std::string name = "sumcast_port_" + c.name + "_total";
    w.family(name, "counter", help_for(kPortHelp, c.name, "Sumcast port counter "));
    w.sample(name, device, c.value);
  }
  if (!s.port_xstats.empty()) {
    w.family("sumcast_port_xstat_total", "counter", "The port's extended statistics (rte_eth_xstats), by name.");
    for (const NamedValue& x : s.port_xstats) {
      w.sample("sumcast_port_xstat_total", {{"device", s.port_device}, {"name", x.name}}, x.value);
    }
  }

  if (!s.jobs.empty()) {
    w.family("sumcast_job_info", "gauge", "Jobs known to the control plane (registering or running).");
    for (const JobMetrics& j : s.jobs) {
      Labels l = job_labels(j);
      l.emplace_back("dtype", j.dtype);
      l.emplace_back("op", j.op);
      w.sample("sumcast_job_info", l, uint64_t{1});
    }
    w.family("sumcast_job_world_size", "gauge", "Ranks of the job.");
    for (const JobMetrics& j : s.jobs) w.sample("sumcast_job_world_size", job_labels(j), uint64_t{j.world_size});
    w.family("sumcast_job_registered_ranks", "gauge", "Ranks of the job registered so far.");
    for (const JobMetrics& j : s.jobs) w.sample("sumcast_job_registered_ranks", job_labels(j), uint64_t{j.registered});
    w.family("sumcast_job_running", "gauge", "1 when every rank registered and the dataplane runs the job, else 0.");
    for (const JobMetrics& j : s.jobs) w.sample("sumcast_job_running", job_labels(j), uint64_t{j.running ? 1u : 0u});
    w.family("sumcast_job_slots_completed_total", "counter", "Slot rounds of the job completed, over all cores.");
    for (const JobMetrics& j : s.jobs) {
      w.sample("sumcast_job_slots_completed_total", job_labels(j), j.slots_completed);
    }
    w.family("sumcast_job_seconds_since_progress", "gauge", "Seconds since the job last completed a slot round.");
    for (const JobMetrics& j : s.jobs) {
      w.sample("sumcast_job_seconds_since_progress", job_labels(j), j.seconds_since_progress);
    }
    w.family("sumcast_job_multicast", "gauge", "1 when the job's results go to its multicast group (label group).");
    for (const JobMetrics& j : s.jobs) {
      Labels l = job_labels(j);
      l.emplace_back("group", j.multicast_group);
      w.sample("sumcast_job_multicast", l, uint64_t{j.multicast ? 1u : 0u});
    }
    w.family("sumcast_job_group_frames_total", "counter", "Frames of the job sent to its multicast group.");
    for (const JobMetrics& j : s.jobs) w.sample("sumcast_job_group_frames_total", job_labels(j), j.group_frames);
    w.family("sumcast_job_unicast_answers_total", "counter",
             "Stored results of the job re-sent by unicast to the one rank that asked again.");
    for (const JobMetrics& j : s.jobs) w.sample("sumcast_job_unicast_answers_total", job_labels(j), j.unicast_answers);
    w.family("sumcast_job_ce_marked_total", "counter", "Contributions of the job that arrived marked CE.");
    for (const JobMetrics& j : s.jobs) w.sample("sumcast_job_ce_marked_total", job_labels(j), j.ce_marked);
    w.family("sumcast_job_cnps_sent_total", "counter", "CNPs sent to the job's members for CE-marked contributions.");
    for (const JobMetrics& j : s.jobs) w.sample("sumcast_job_cnps_sent_total", job_labels(j), j.cnps_sent);
    w.family("sumcast_job_loss_notices_total", "counter",
             "Loss notices sent to the job's ranks (a contribution of theirs missing from an open round).");
    for (const JobMetrics& j : s.jobs) w.sample("sumcast_job_loss_notices_total", job_labels(j), j.loss_notices);
    w.family("sumcast_job_duplicate_notices_total", "counter",
             "Duplicate notices sent to the job's ranks (a resend found its open round holding their contribution).");
    for (const JobMetrics& j : s.jobs) {
      w.sample("sumcast_job_duplicate_notices_total", job_labels(j), j.duplicate_notices);
    }
    w.family("sumcast_job_member_ce_marked_total", "counter", "Contributions of one rank of the job marked CE.");
    for (const JobMetrics& j : s.jobs) {
      for (size_t r = 0; r < j.member_ce_marked.size(); ++r) {
        Labels l = job_labels(j);
        l.emplace_back("rank", std::to_string(r));
        w.sample("sumcast_job_member_ce_marked_total", l, j.member_ce_marked[r]);
      }
    }
  }

  for (const NamedValue& c : s.control) {
    const std::string name = "sumcast_control_" + c.name + "_total";
    w.family(name, "counter", help_for(kControlHelp, c.name, "Sumcast control-plane counter "));
    w.sample(name, {}, c.value);
  }
  return w.take();
}

}  // namespace sumcast::telemetry
