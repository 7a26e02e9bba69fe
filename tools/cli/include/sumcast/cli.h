// Command lines of Sumcast's programs, on CLI11: every program gets --help (-h) and --version,
// and a usage error prints "PROGRAM: what is wrong (the option's name)" and "run PROGRAM --help"
// on stderr and exits 2. Use:
//
//   CLI::App app{"what the program does", "sumcast-serve"};
//   sumcast::cli::setup(app);
//   app.add_option("--bind", ip, "...")->required();
//   if (const int rc = sumcast::cli::parse(app, argc, argv); rc >= 0) return rc;
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "sumcast/byte_size.h"

namespace sumcast::cli {

inline constexpr int kExitUsage = 2;

// The version every program prints (the project's).
inline const char* version() { return SUMCAST_CLI_VERSION; }

// --version, and help that lists defaults.
inline void setup(CLI::App& app) {
  app.set_version_flag("--version", std::string(app.get_name()) + " " + version(), "print the version and exit");
  app.option_defaults()->always_capture_default();
  app.get_formatter()->column_width(34);
}

// An option whose value is one of the names name_of(E(0)) .. name_of(E(count - 1)) (a dtype, a
// reduction): stores the matching E in *out; any other value is a usage error that lists them.
template <typename E, typename NameOf>
CLI::Option* add_named_option(CLI::App& app, const std::string& flag, E* out, int count, NameOf name_of,
                              const std::string& what) {
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) names.emplace_back(name_of(static_cast<E>(i)));
  return app
      .add_option_function<std::string>(
          flag,
          [out, count, name_of](const std::string& v) {
            for (int i = 0; i < count; ++i) {
              if (v == name_of(static_cast<E>(i))) *out = static_cast<E>(i);
            }
          },
          what)
      ->check(CLI::IsMember(names));
}

// An option whose value is a byte count ("65536", "64K", "4M", "1G": sumcast/byte_size.h) of at
// least `min`: stores it in *out; anything else is a usage error naming the option.
inline CLI::Option* add_size_option(CLI::App& app, const std::string& flag, uint64_t* out, const std::string& what,
                                    uint64_t min = 0) {
  return app
      .add_option_function<std::string>(
          flag,
          [flag, out, min](const std::string& v) {
            const auto bytes = parse_byte_size(v);
            if (!bytes || *bytes < min) {
              throw CLI::ValidationError(flag, "needs a size" + (min > 0 ? " of at least " + std::to_string(min) : "") +
                                                   " like 64M, not " + v);
            }
            *out = *bytes;
          },
          what)
      ->type_name("N[K|M|G]");
}

// Whether `name` (e.g. "--json", "-c") is an option of `app` or of any of its subcommands.
inline bool knows_option(const CLI::App& app, const std::string& name) {
  for (const CLI::Option* o : app.get_options()) {
    if (o->check_name(name)) return true;
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (knows_option(*sub, name)) return true;
  }
  return false;
}

// The first argument that looks like an option but is none of the app's, or "". CLI11 reports a
// missing required option before an unknown one; the unknown one is usually the real mistake.
inline std::string unknown_option(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-' || (a[1] >= '0' && a[1] <= '9') || a[1] == '.') continue;  // a value
    if (const size_t eq = a.find('='); eq != std::string::npos) a.resize(eq);
    if (a.size() > 2 && a[1] != '-') a.resize(2);  // -cFILE
    if (!knows_option(app, a)) return a;
  }
  return "";
}

// Parses argv. Returns -1 to go on, else the exit status: 0 after --help/--version (printed on
// stdout), kExitUsage after a usage error (printed on stderr).
inline int parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::printf("%s\n", app.version().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    const std::string unknown = unknown_option(app, argc, argv);
    const std::string what = unknown.empty() ? std::string(e.what()) : "unknown option " + unknown;
    std::fprintf(stderr, "%s: %s\nrun %s --help for the options\n", app.get_name().c_str(), what.c_str(),
                 app.get_name().c_str());
    return kExitUsage;
  }
  return -1;
}

}  // namespace sumcast::cli
